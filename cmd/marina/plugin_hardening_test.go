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

// testPlugin returns the path of a real plugin binary built from
// core/pluginstore/testdata/plugin with the given name and version (set at
// link time), building it on first use next to the marina binary under test
// (TestMain removes that directory).
func testPlugin(t testing.TB, name, version string) string {
	t.Helper()
	return testPluginDescribed(t, name, version, "")
}

// testPluginDescribed is testPlugin with the plugin's description set at
// link time ("" keeps the default).
func testPluginDescribed(t testing.TB, name, version, description string) string {
	t.Helper()
	return buildTestPlugin(t, name, version, description, "")
}

// testPluginWithCaps is testPlugin declaring the capabilities caps
// (comma-separated).
func testPluginWithCaps(t testing.TB, name, version, caps string) string {
	t.Helper()
	return buildTestPlugin(t, name, version, "", caps)
}

func buildTestPlugin(t testing.TB, name, version, description, caps string, extra ...string) string {
	t.Helper()
	ldflags := "-s -w -X main.name=" + name + " -X main.version=" + version
	dir := name + "-" + version
	for _, x := range extra { // main.VAR=VALUE
		ldflags += " -X " + x
		dir += "-" + strings.NewReplacer("main.", "", "=", "-").Replace(x)
	}
	if description != "" {
		ldflags += " -X 'main.description=" + description + "'"
		dir += "-described"
	}
	if caps != "" {
		ldflags += " -X main.capabilities=" + caps
		dir += "-caps-" + strings.ReplaceAll(caps, ",", "+")
	}
	out := filepath.Join(filepath.Dir(marinaBin), "test-plugins", dir, "marina-plugin-"+name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", ldflags, "./core/pluginstore/testdata/plugin")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build test plugin %s %s: %v\n%s", name, version, err, b)
	}
	return out
}

// marinaIn runs marina like marina() but in the working directory dir.
func marinaIn(t *testing.T, home, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(marinaBin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	return runCmd(t, cmd)
}

// listRows runs `plugin list -o json` and returns its rows and exit status.
func listRows(t *testing.T, home string) ([]pluginset.Row, result) {
	t.Helper()
	r := marina(t, home, nil, "plugin", "list", "-o", "json")
	var rows []pluginset.Row
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("plugin list -o json (exit %d): %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	return rows, r
}

func install(t *testing.T, home, bin string) {
	t.Helper()
	if r := marina(t, home, nil, "plugin", "install", bin); r.code != 0 {
		t.Fatalf("plugin install %s: exit %d\n%s", bin, r.code, r.stderr)
	}
}

func writeHomeConfig(t *testing.T, home, body string) string {
	t.Helper()
	path := filepath.Join(home, ".marina", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPluginEnableRefusesWhatCannotRun: `plugin enable nosuch` used to exit 0
// and write plugins.nosuch.enabled, after which every command failed.
func TestPluginEnableRefusesWhatCannotRun(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".marina", "config.yaml")
	r := marina(t, home, nil, "plugin", "enable", "nosuch")
	if r.code != 2 || !strings.Contains(r.stderr, `no plugin "nosuch" is built in or installed`) || !strings.Contains(r.stderr, "marina plugin install SOURCE") {
		t.Fatalf("enable nosuch: exit %d\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(cfg); err == nil && strings.Contains(string(b), "nosuch") {
		t.Fatalf("the config was changed although enable was refused:\n%s", b)
	}
	if r := marina(t, home, nil, "plugin", "enable", "metalb"); r.code != 2 || !strings.Contains(r.stderr, `did you mean "metallb"?`) {
		t.Fatalf("enable metalb: exit %d\n%s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "disable", "nosuch"); r.code != 2 || !strings.Contains(r.stderr, `plugin disable nosuch: no plugin "nosuch"`) {
		t.Fatalf("disable nosuch: exit %d\n%s", r.code, r.stderr)
	}

	install(t, home, testPlugin(t, "acme", "1.0.0"))
	r = marina(t, home, nil, "plugin", "enable", "acmee")
	if r.code != 2 || !strings.Contains(r.stderr, `did you mean "acme"?`) || !strings.Contains(r.stderr, "installed: acme") {
		t.Fatalf("enable acmee: exit %d\n%s", r.code, r.stderr)
	}
	// Installed, but the config's constraint selects no installed version.
	writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: false\n    version: \"^2\"\n")
	r = marina(t, home, nil, "plugin", "enable", "acme")
	if r.code != 2 || !strings.Contains(r.stderr, `no installed version of plugin acme matches "^2"`) || !strings.Contains(r.stderr, "plugins.acme.version") {
		t.Fatalf("enable acme with ^2: exit %d\n%s", r.code, r.stderr)
	}
	writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: false\n")
	if r := marina(t, home, nil, "plugin", "enable", "acme"); r.code != 0 {
		t.Fatalf("enable acme: exit %d\n%s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "enable", "metallb"); r.code != 0 {
		t.Fatalf("enable metallb: exit %d\n%s", r.code, r.stderr)
	}
	// And the next command still works.
	if rows, r := listRows(t, home); r.code != 0 || rowsFor(rows, "acme")[0].Status != "active" {
		t.Fatalf("plugin list after enable: exit %d %+v\n%s", r.code, rowsFor(rows, "acme"), r.stderr)
	}
}

// TestPluginRemoveKeepsTheConfigRunnable: removing the only installed version
// of an enabled plugin used to succeed and leave the config enabling nothing.
func TestPluginRemoveKeepsTheConfigRunnable(t *testing.T) {
	home := t.TempDir()
	install(t, home, testPlugin(t, "acme", "1.0.0"))
	install(t, home, testPlugin(t, "acme", "1.1.0"))
	cfg := writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: true\n")

	// Another version is left: fine, and the lock file follows.
	if r := marina(t, home, nil, "plugin", "remove", "acme@1.1.0"); r.code != 0 {
		t.Fatalf("remove acme@1.1.0: exit %d\n%s", r.code, r.stderr)
	}
	if lock := readLock(t, home); !strings.Contains(lock, `"1.0.0"`) {
		t.Fatalf("lock file does not pin 1.0.0 after the remove:\n%s", lock)
	}
	for _, arg := range []string{"acme@1.0.0", "acme"} {
		r := marina(t, home, nil, "plugin", "remove", arg)
		if r.code != 2 || !strings.Contains(r.stderr, "plugin acme is enabled") || !strings.Contains(r.stderr, "reference nothing") ||
			!strings.Contains(r.stderr, "--disable") || !strings.Contains(r.stderr, "nothing was removed") {
			t.Fatalf("remove %s: exit %d\n%s", arg, r.code, r.stderr)
		}
	}
	if rows, r := listRows(t, home); r.code != 0 || len(rowsFor(rows, "acme")) != 1 || rowsFor(rows, "acme")[0].Status != "active" {
		t.Fatalf("after the refused removes: exit %d %+v", r.code, rowsFor(rows, "acme"))
	}
	r := marina(t, home, nil, "plugin", "remove", "acme", "--disable")
	if r.code != 0 || !strings.Contains(r.stdout, "removed acme") || !strings.Contains(r.stdout, "disabled acme in "+cfg) {
		t.Fatalf("remove --disable: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(cfg); err != nil || !strings.Contains(string(b), "enabled: false") {
		t.Fatalf("config after remove --disable (%v):\n%s", err, b)
	}
	if _, r := listRows(t, home); r.code != 0 {
		t.Fatalf("plugin list after remove --disable: exit %d\n%s", r.code, r.stderr)
	}
	// A disabled plugin may go without --disable.
	install(t, home, testPlugin(t, "acme", "1.0.0"))
	if r := marina(t, home, nil, "plugin", "remove", "acme"); r.code != 0 {
		t.Fatalf("remove disabled acme: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPluginInstallRefusals: a plugin named like a built-in installed and was
// then never run nor listed; an empty SOURCE installed the working directory.
func TestPluginInstallRefusals(t *testing.T) {
	home := t.TempDir()
	r := marina(t, home, nil, "plugin", "install", testPlugin(t, "metallb", "9.0.0"))
	if r.code != 2 || !strings.Contains(r.stderr, "calls itself metallb, the name of a plugin built into marina") || !strings.Contains(r.stderr, "Rename it") {
		t.Fatalf("install metallb: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".marina", "plugins", "metallb")); err == nil {
		t.Fatal("the refused metallb plugin is in the store")
	}

	// The working directory holds exactly one marina-plugin-* binary: a
	// directory source `plugin install .` would take.
	cwd := t.TempDir()
	data, err := os.ReadFile(testPlugin(t, "acme", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, "marina-plugin-acme"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"", " "} {
		r := marinaIn(t, home, cwd, "plugin", "install", src)
		if r.code != 2 || !strings.Contains(r.stderr, "SOURCE is empty") {
			t.Fatalf("install %q: exit %d\n%s%s", src, r.code, r.stdout, r.stderr)
		}
	}
	if rows, _ := listRows(t, home); len(rowsFor(rows, "acme")) != 0 {
		t.Fatalf("install '' installed the working directory: %+v", rowsFor(rows, "acme"))
	}
}

// TestPluginListShowsTampering: a modified binary and a corrupt lock file
// were listed as active with exit 0.
func TestPluginListShowsTampering(t *testing.T) {
	home := t.TempDir()
	install(t, home, testPlugin(t, "acme", "1.0.0"))
	writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: true\n")
	if r := marina(t, home, nil, "plugin", "enable", "acme"); r.code != 0 { // pins it in the lock file
		t.Fatalf("enable: exit %d\n%s", r.code, r.stderr)
	}
	rows, r := listRows(t, home)
	acme := rowsFor(rows, "acme")
	if r.code != 0 || len(acme) != 1 || acme[0].Status != "active" || acme[0].Path == "" {
		t.Fatalf("before tampering: exit %d %+v\n%s", r.code, acme, r.stderr)
	}
	bin := acme[0].Path
	orig, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte(nil), orig...)
	tampered[len(tampered)/2] ^= 0xff
	if err := os.WriteFile(bin, tampered, 0o755); err != nil {
		t.Fatal(err)
	}
	rows, r = listRows(t, home)
	acme = rowsFor(rows, "acme")
	if r.code != 1 || len(acme) != 1 || acme[0].Status != "modified" || !strings.Contains(acme[0].Detail, "modified after install") ||
		!strings.Contains(r.stderr, "plugin acme 1.0.0: binary ") || strings.Count(r.stderr, "plugin acme 1.0.0") != 1 {
		t.Fatalf("tampered binary: exit %d %+v\n%s", r.code, acme, r.stderr)
	}
	text := marina(t, home, nil, "plugin", "list")
	if text.code != 1 || !strings.Contains(text.stdout, "modified (plugin acme 1.0.0: binary") {
		t.Fatalf("plugin list (text) with a tampered binary: exit %d\n%s%s", text.code, text.stdout, text.stderr)
	}

	// plugin info still describes it (from its manifest) and fails,
	// saying why it will not run.
	if info := marina(t, home, nil, "plugin", "info", "acme"); info.code != 1 || !strings.Contains(info.stdout, "acme 1.0.0") ||
		!strings.Contains(info.stderr, "was modified after install") {
		t.Fatalf("plugin info of a tampered binary: exit %d\n%s%s", info.code, info.stdout, info.stderr)
	}

	// Restored: active again. Then the lock file is corrupted.
	if err := os.WriteFile(bin, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	if info := marina(t, home, nil, "plugin", "info", "acme"); info.code != 0 || info.stderr != "" {
		t.Fatalf("plugin info of the restored binary: exit %d\n%s%s", info.code, info.stdout, info.stderr)
	}
	if rows, r := listRows(t, home); r.code != 0 || rowsFor(rows, "acme")[0].Status != "active" {
		t.Fatalf("restored binary: exit %d %+v\n%s", r.code, rowsFor(rows, "acme"), r.stderr)
	}
	lock := filepath.Join(home, ".marina", "plugins.lock")
	if err := os.WriteFile(lock, []byte(`{"version": 1, "plugins": {`), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, r = listRows(t, home)
	acme = rowsFor(rows, "acme")
	if r.code != 1 || len(acme) != 1 || acme[0].Status != "lock unreadable" || !strings.Contains(r.stderr, "lock file unreadable") || !strings.Contains(r.stderr, lock) {
		t.Fatalf("corrupt lock: exit %d %+v\n%s", r.code, acme, r.stderr)
	}
	// Both at once: the binary is still checked against its manifest.
	if err := os.WriteFile(bin, tampered, 0o755); err != nil {
		t.Fatal(err)
	}
	if rows, r := listRows(t, home); r.code != 1 || rowsFor(rows, "acme")[0].Status != "modified" {
		t.Fatalf("tampered binary and corrupt lock: exit %d %+v\n%s", r.code, rowsFor(rows, "acme"), r.stderr)
	}
}

// TestPluginTextIsCleaned: a plugin's description is the plugin's to choose;
// terminal control sequences in it (here: an OSC that retitles the terminal
// and a colour) must not reach the terminal through plugin info or list.
func TestPluginTextIsCleaned(t *testing.T) {
	home := t.TempDir()
	install(t, home, testPluginDescribed(t, "acme", "1.0.0", "evil\x1b]0;pwned\x07 \x1b[31mred\x1b[0m plugin"))
	r := marina(t, home, nil, "plugin", "info", "acme")
	if r.code != 0 || !strings.Contains(r.stdout, "  evil red plugin\n") || strings.ContainsRune(r.stdout, 0x1b) || strings.ContainsRune(r.stdout, 0x07) {
		t.Fatalf("plugin info: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	r = marina(t, home, nil, "plugin", "info", "acme", "-o", "json")
	if r.code != 0 || strings.ContainsRune(r.stdout, 0x1b) || !strings.Contains(r.stdout, `\u001b]0;pwned`) {
		t.Fatalf("plugin info -o json must keep the text, escaped: exit %d\n%s", r.code, r.stdout)
	}
}
