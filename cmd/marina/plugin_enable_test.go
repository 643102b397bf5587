package main

import (
	"os"
	"strings"
	"testing"
)

// TestPluginEnableSaysWhatIsMissing (issue 26): enabling a plugin whose
// config has a required field not set says so — the field, the plugin,
// and where to set it — instead of leaving a config that no longer
// validates without a word; the plugin is enabled all the same, and the
// rest of the user's file keeps its layout.
func TestPluginEnableSaysWhatIsMissing(t *testing.T) {
	home := t.TempDir()
	bin := buildTestPlugin(t, "quota", "1.0.0", "", "", "main.required=quota")
	if r := marina(t, home, nil, "plugin", "install", bin); r.code != 0 {
		t.Fatalf("install: %d\n%s", r.code, r.stderr)
	}
	orig := "pluginSources: [oci://registry.example.com/team]\nplugins:\n    metallb:\n        enabled: true\n"
	cfg := writeConfigFile(t, home, orig)
	r := marina(t, home, nil, "plugin", "enable", "quota")
	if r.code != 0 || !strings.Contains(r.stdout, "enabled quota in "+cfg) ||
		!strings.Contains(r.stderr, "Warning: the config does not validate with quota enabled") ||
		!strings.Contains(r.stderr, "plugins.quota.config.quota:") || !strings.Contains(r.stderr, "marina plugin info quota") {
		t.Fatalf("enable: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got, err := os.ReadFile(cfg)
	if err != nil || string(got) != strings.Replace(orig, "plugins:\n", "plugins:\n    quota:\n        enabled: true\n", 1) {
		t.Fatalf("the config after enable: %v\n%s", err, got)
	}
	if r := marina(t, home, nil, "config", "validate"); r.code != 2 || !strings.Contains(r.stderr, "plugins.quota.config.quota") {
		t.Fatalf("config validate agrees: %d\n%s", r.code, r.stderr)
	}
	// Once set, enable says nothing more.
	if err := os.WriteFile(cfg, []byte("plugins:\n  quota:\n    enabled: false\n    config: {quota: ten}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := marina(t, home, nil, "plugin", "enable", "quota"); r.code != 0 || strings.Contains(r.stderr, "Warning") {
		t.Fatalf("enable with the field set: %d\n%s", r.code, r.stderr)
	}
}
