package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginCapabilityGrant: install shows what a plugin asks for and, with
// no terminal, installs it only with --yes; a later version asking for the
// same needs no new grant, one asking for more does (naming only what is
// new). pluginTrust.capabilities caps what a source's plugins may declare:
// refused at install, and an installed plugin over a new limit is refused
// at launch (verify says UNTRUSTED with the rule, list shows why).
func TestPluginCapabilityGrant(t *testing.T) {
	home := t.TempDir()
	v1 := testPluginWithCaps(t, "acme", "1.0.0", "kubeconfig")
	v11 := testPluginWithCaps(t, "acme", "1.1.0", "kubeconfig")
	v12 := testPluginWithCaps(t, "acme", "1.2.0", "kubeconfig,docker")

	r := marina(t, home, nil, "plugin", "install", v1)
	if r.code != 2 || !strings.Contains(r.stderr, "plugin acme 1.0.0 asks for capabilities kubeconfig: pass --yes to grant them (nothing was installed)") ||
		!strings.Contains(r.stderr, "kubeconfig            every cluster's admin kubeconfig (Cluster.Kubeconfig): full control of the clusters") {
		t.Fatalf("install without a terminal or --yes: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 0 {
		t.Fatalf("a refused grant installed something: %+v", got)
	}
	r = marina(t, home, nil, "plugin", "install", v1, "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "capabilities: kubeconfig (granted now: kubeconfig)") {
		t.Fatalf("install --yes: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = marina(t, home, nil, "plugin", "install", v11)
	if r.code != 0 || !strings.Contains(r.stdout, "capabilities: kubeconfig\n") {
		t.Fatalf("install of a version asking for what was granted: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = marina(t, home, nil, "plugin", "install", v12)
	if r.code != 2 || !strings.Contains(r.stderr, "plugin acme 1.2.0 asks for capabilities docker: pass --yes") || strings.Contains(r.stderr, "kubeconfig   ") {
		t.Fatalf("install of a version asking for more: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = marina(t, home, nil, "plugin", "info", "acme@1.1.0")
	if r.code != 0 || !strings.Contains(r.stdout, "capabilities:\n  kubeconfig            every cluster's admin kubeconfig") {
		t.Fatalf("info: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// A limit for the test plugins' directory: kubeconfig only.
	prefix := filepath.Dir(filepath.Dir(v12)) + "/" // .../test-plugins/
	limit := "pluginTrust:\n  capabilities:\n  - sources: [\"" + prefix + "\"]\n    allow: [kubeconfig]\n"
	writeConfigFile(t, home, limit)
	r = marina(t, home, nil, "plugin", "install", v12, "--yes")
	if r.code == 0 || !strings.Contains(r.stderr, "declares capability docker, but pluginTrust.capabilities[0] allows plugins from "+prefix+" only kubeconfig") {
		t.Fatalf("install over a limit: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Installed before the limit, refused after it.
	writeConfigFile(t, home, "")
	if r := marina(t, home, nil, "plugin", "install", v12, "--yes"); r.code != 0 {
		t.Fatalf("install without a limit: %d\n%s", r.code, r.stderr)
	}
	writeConfigFile(t, home, limit+"plugins:\n  acme:\n    enabled: true\n    version: 1.2.0\n")
	r = marina(t, home, nil, "plugin", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "UNTRUSTED acme 1.2.0") || !strings.Contains(r.stdout, "pluginTrust.capabilities[0]") || !strings.Contains(r.stdout, "ok       acme 1.1.0") {
		t.Fatalf("verify with an installed plugin over the limit: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = marina(t, home, nil, "config", "validate")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "pluginTrust.capabilities[0]") {
		t.Fatalf("config validate with the enabled plugin over the limit: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	writeConfigFile(t, home, "pluginTrust:\n  capabilities:\n  - allow: [kubeconfg]\n")
	r = marina(t, home, nil, "config", "validate")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, `pluginTrust.capabilities[0].allow[0]`) || !strings.Contains(r.stderr+r.stdout, `did you mean kubeconfig?`) {
		t.Fatalf("config validate with a misspelt capability: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
