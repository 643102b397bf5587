package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/pluginset"
)

// TestPluginLifecycle is the "done when" from a clean tree: scaffold a
// plugin, build two versions, install both, select one by constraint (the lock
// file records it), validate its config through the running plugin, and refuse
// a binary modified after install.
func TestPluginLifecycle(t *testing.T) {
	home := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	dir := filepath.Join(work, "marina-plugin-acme")
	// A development build (this test's marina, built from this checkout)
	// points the new plugin at its checkout's SDK module without flags.
	r := marina(t, home, nil, "plugin", "new", "acme", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "SDK: "+filepath.Join(repo, "sdk")+" (the checkout this development build") {
		t.Fatalf("plugin new: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	_, target, _ := strings.Cut(string(gomod), "replace github.com/bcollard/marina/sdk => ")
	target, _, _ = strings.Cut(target, "\n")
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target) // relative when the temporary directory is beside the checkout
	}
	if err != nil || !strings.Contains(string(gomod), "require github.com/bcollard/marina/sdk v0.0.0") || filepath.Clean(target) != filepath.Join(repo, "sdk") {
		t.Fatalf("go.mod (replace resolves to %s, want %s): %v\n%s", target, filepath.Join(repo, "sdk"), err, gomod)
	}
	gocmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	gocmd("mod", "tidy")
	bins := map[string]string{}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		bins[v] = filepath.Join(work, "acme-"+v)
		gocmd("build", "-ldflags", "-X main.version="+v, "-o", bins[v], ".")
		r := marina(t, home, nil, "plugin", "install", bins[v])
		if r.code != 0 || !strings.Contains(r.stdout, "installed acme "+v+" (protocol 1.0, hooks PostCluster)") {
			t.Fatalf("install %s: %d\n%s\n%s", v, r.code, r.stdout, r.stderr)
		}
	}
	// Starting the plugin to describe it wrote its raw stderr to the run's log file.
	logs, _ := filepath.Glob(filepath.Join(home, ".marina", "logs", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no per-run plugin log file under ~/.marina/logs")
	}
	// Installing the same build again changes nothing.
	if r := marina(t, home, nil, "plugin", "install", bins["1.0.0"]); r.code != 0 {
		t.Fatalf("reinstall: %d %s", r.code, r.stderr)
	}

	rows := listPlugins(t, home)
	if got := rowsFor(rows, "acme"); len(got) != 2 || got[0].Version != "1.0.0" || got[1].Version != "1.1.0" ||
		strings.Join(got[0].Hooks, ",") != "PostCluster" || got[0].Status != "installed" || got[0].Protocol != "1.0" {
		t.Fatalf("acme rows = %+v", got)
	}

	// Select ~1.0 in the config: 1.0.0 becomes active and is pinned in the lock file.
	cfgPath := filepath.Join(home, ".marina", "config.yaml")
	writeConfig := func(body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(cfgPath), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("plugins:\n  acme:\n    enabled: false\n    version: \"~1.0\"\n    config:\n      greeting: hi\n")
	if r := marina(t, home, nil, "plugin", "enable", "acme"); r.code != 0 {
		t.Fatalf("enable: %d %s", r.code, r.stderr)
	}
	lock := readLock(t, home)
	if !strings.Contains(lock, `"acme"`) || !strings.Contains(lock, `"1.0.0"`) || !strings.Contains(lock, `"~1.0"`) {
		t.Fatalf("lock file does not pin acme 1.0.0:\n%s", lock)
	}
	rows = listPlugins(t, home)
	if got := rowsFor(rows, "acme"); got[0].Status != "active" || got[1].Status != "installed" {
		t.Fatalf("after ~1.0: %+v", got)
	}

	// The plugin validates its own config (it is started for this).
	if r := marina(t, home, nil, "config", "validate"); r.code != 0 {
		t.Fatalf("validate: %d %s %s", r.code, r.stdout, r.stderr)
	}
	writeConfig("plugins:\n  acme:\n    enabled: true\n    version: \"^1.1\"\n    config:\n      greting: hi\n")
	r = marina(t, home, nil, "config", "validate")
	if r.code != 2 || !strings.Contains(r.stderr, "acme") || !strings.Contains(r.stderr, `did you mean "greeting"`) {
		t.Fatalf("bad plugin config: %d %s", r.code, r.stderr)
	}
	writeConfig("plugins:\n  acme:\n    enabled: true\n    version: \"^1.1\"\n")
	if r := marina(t, home, nil, "plugin", "enable", "acme"); r.code != 0 {
		t.Fatalf("enable: %d %s", r.code, r.stderr)
	}
	if lock := readLock(t, home); !strings.Contains(lock, `"1.1.0"`) {
		t.Fatalf("lock file does not pin 1.1.0:\n%s", lock)
	}

	// Flip one byte of the installed, selected binary: the next run refuses it.
	var installed string
	for _, row := range rowsFor(listPlugins(t, home), "acme") {
		if row.Version == "1.1.0" {
			installed = row.Path
		}
	}
	if installed == "" {
		t.Fatal("no path for acme 1.1.0")
	}
	data, err := os.ReadFile(installed)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(installed, data, 0o755); err != nil {
		t.Fatal(err)
	}
	r = marina(t, home, nil, "config", "validate")
	if r.code != 1 || !strings.Contains(r.stderr, "modified") {
		t.Fatalf("tampered binary: exit %d\n%s", r.code, r.stderr)
	}
	r = marina(t, home, nil, "plugin", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "MODIFIED acme 1.1.0") || !strings.Contains(r.stdout, "ok       acme 1.0.0") {
		t.Fatalf("verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// Removing the version the config's "^1.1" selects would leave the
	// enabled plugin with nothing to run: refused, nothing removed.
	r = marina(t, home, nil, "plugin", "remove", "acme@1.1.0")
	if r.code != 2 || !strings.Contains(r.stderr, `no installed version matches plugins.acme.version "^1.1"`) || !strings.Contains(r.stderr, "nothing was removed") {
		t.Fatalf("remove of the selected version: exit %d\n%s", r.code, r.stderr)
	}
	// With a constraint 1.0.0 satisfies, remove one version; the other stays.
	writeConfig("plugins:\n  acme:\n    enabled: true\n    version: \"~1.0\"\n")
	if r := marina(t, home, nil, "plugin", "remove", "acme@1.1.0"); r.code != 0 {
		t.Fatalf("remove: %d %s", r.code, r.stderr)
	}
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 1 || got[0].Version != "1.0.0" {
		t.Fatalf("after remove: %+v", got)
	}
	if r := marina(t, home, nil, "plugin", "info", "acme", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"greeting"`) {
		t.Fatalf("info: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func listPlugins(t *testing.T, home string) []pluginset.Row {
	t.Helper()
	r := marina(t, home, nil, "plugin", "list", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plugin list: %d %s", r.code, r.stderr)
	}
	var rows []pluginset.Row
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("plugin list -o json: %v\n%s", err, r.stdout)
	}
	return rows
}

func rowsFor(rows []pluginset.Row, name string) []pluginset.Row {
	var out []pluginset.Row
	for _, r := range rows {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

func readLock(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, ".marina", "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunLogPruning(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 25; i++ {
		name := filepath.Join(dir, "20260101T0000"+string(rune('a'+i))+"Z-1.log")
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pruneRunLogs(dir, 19)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 19 || entries[0].Name() != "20260101T0000gZ-1.log" {
		t.Fatalf("kept %d, first %s", len(entries), entries[0].Name())
	}
}

// TestBuiltinsListed: the five built-ins appear in `plugin list` with their
// version, protocol and hooks, described by the plugins themselves, and each
// really serves out of process (`plugin info` starts none; the dispatcher
// path is covered by the up end-to-end test).
func TestBuiltinsListed(t *testing.T) {
	home := t.TempDir()
	want := map[string][]string{
		"registries":  {"PostUp", "PreCluster", "PostCluster", "PreDestroy"},
		"localdns":    {"PostUp", "PreDestroy"},
		"metallb":     {"PostCluster"},
		"coredns":     {"PostCluster"},
		"externaldns": {"PostCluster", "PreClusterDelete"},
	}
	rows := listPlugins(t, home)
	for name, hooks := range want {
		got := rowsFor(rows, name)
		if len(got) != 1 {
			t.Fatalf("%s: %d rows in plugin list, want 1: %+v", name, len(got), rows)
		}
		r := got[0]
		if r.Source != "built-in" || r.Status != "active" || r.Protocol != "1.0" || r.Version == "" || strings.Join(r.Hooks, ",") != strings.Join(hooks, ",") {
			t.Errorf("%s: %+v, want active built-in with hooks %v", name, r, hooks)
		}
	}
	// The opt-in built-in is listed, disabled until enabled.
	if got := rowsFor(rows, "certmanager"); len(got) != 1 || got[0].Source != "built-in" || got[0].Status != "disabled" || strings.Join(got[0].Hooks, ",") != "PostCluster" {
		t.Errorf("certmanager: %+v, want one disabled built-in with hook PostCluster", got)
	}
	// The built-in serves the plugin protocol when marina re-executes itself.
	if r := marina(t, home, nil, "plugin", "info", "metallb", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"PostCluster"`) {
		t.Fatalf("plugin info metallb: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
