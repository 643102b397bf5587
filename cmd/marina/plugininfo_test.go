package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPluginInfoStructured (issue 15): `plugin info -o json` is data a
// script can use: lowerCamel keys, the schema and defaults as objects (not
// base64), durations as strings; hook timeouts say where they come from.
func TestPluginInfoStructured(t *testing.T) {
	home := t.TempDir()
	var v struct {
		Name   string `json:"name"`
		Source string `json:"source"`
		Hooks  []struct {
			Name, Timeout, TimeoutFrom string
		} `json:"hooks"`
		ConfigSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"configSchema"`
		ConfigDefaults map[string]any `json:"configDefaults"`
	}
	decode := func(r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("plugin info: exit %d\n%s", r.code, r.stderr)
		}
		if strings.Contains(r.stdout, `"Description"`) || strings.Contains(r.stdout, "configSchema\": \"") {
			t.Fatalf("plugin info -o json has Go field names or a base64 schema:\n%s", r.stdout)
		}
		v.Hooks = nil
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("plugin info -o json: %v\n%s", err, r.stdout)
		}
	}
	decode(marina(t, home, nil, "plugin", "info", "localdns", "-o", "json"))
	if v.Name != "localdns" || v.Source != "built-in" || v.ConfigSchema.Properties["readyTimeout"] == nil || v.ConfigDefaults["readyTimeout"] != "1m0s" {
		t.Fatalf("plugin info localdns: %+v", v)
	}
	if len(v.Hooks) != 2 || v.Hooks[0].Name != "PostUp" || v.Hooks[0].Timeout != "5m0s" || v.Hooks[0].TimeoutFrom != "plugin" {
		t.Errorf("hooks: %+v", v.Hooks)
	}
	// The configured timeout is the one hooks get, and info says so.
	decode(marina(t, home, nil, "plugin", "info", "localdns", "-o", "json", "--set", "plugins.localdns.timeout=7m"))
	for _, h := range v.Hooks {
		if h.Timeout != "7m0s" || h.TimeoutFrom != "config" {
			t.Errorf("with plugins.localdns.timeout=7m: %+v", h)
		}
	}
	if r := marina(t, home, nil, "plugin", "info", "localdns", "-o", "yaml"); r.code != 0 || !strings.Contains(r.stdout, "\nconfigSchema:\n  $schema: ") || !strings.Contains(r.stdout, "timeoutFrom: plugin") {
		t.Errorf("plugin info -o yaml: exit %d\n%s", r.code, r.stdout)
	}
}

// TestPluginInfoSelectedVersion (issue 15): without @VERSION, plugin info
// describes the version the config selects, not the highest installed.
func TestPluginInfoSelectedVersion(t *testing.T) {
	home := t.TempDir()
	install(t, home, testPlugin(t, "acme", "1.0.0"))
	install(t, home, testPlugin(t, "acme", "2.0.0"))
	if r := marina(t, home, nil, "plugin", "info", "acme"); r.code != 0 || !strings.HasPrefix(r.stdout, "acme 2.0.0 ") || !strings.Contains(r.stdout, "the highest installed") {
		t.Fatalf("no config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeConfigFile(t, home, "plugins:\n  acme:\n    enabled: false\n    version: \"~1.0\"\n")
	r := marina(t, home, nil, "plugin", "info", "acme")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "acme 1.0.0 ") || !strings.Contains(r.stdout, "selected by the config (plugins.acme.version: ~1.0)") {
		t.Fatalf("~1.0 in the config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "info", "acme@2.0.0", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"version": "2.0.0"`) {
		t.Fatalf("acme@2.0.0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
