package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bcollard/marina/core/pluginset"
)

// verifyJSON runs `plugin verify -o json` and returns its rows by version
// of plugin name, and the exit status.
func verifyJSON(t *testing.T, home, name string) (map[string]verifyRow, result) {
	t.Helper()
	r := marina(t, home, nil, "plugin", "verify", "-o", "json")
	var rows []verifyRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("plugin verify -o json (exit %d): %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	out := map[string]verifyRow{}
	for _, row := range rows {
		if row.Name == name {
			out[row.Version] = row
		}
	}
	return out, r
}

// lockPin returns the version and constraint the lock file pins for name.
func lockPin(t *testing.T, home, name string) (version, constraint string) {
	t.Helper()
	var lf struct {
		Plugins map[string]struct{ Version, Constraint string }
	}
	if err := json.Unmarshal([]byte(readLock(t, home)), &lf); err != nil {
		t.Fatal(err)
	}
	return lf.Plugins[name].Version, lf.Plugins[name].Constraint
}

// TestLockFollowsConfig (issue 15): plugins.acme.version edited by hand
// used to leave the lock file pinning the old version until `plugin
// enable`, and `plugin verify` (the lock's pin) then disagreed with `plugin
// list` (the config's selection). The next command that resolves the
// plugin set now re-pins, whichever it is; another build of the pinned
// version is still refused.
func TestLockFollowsConfig(t *testing.T) {
	home := t.TempDir()
	install(t, home, testPlugin(t, "acme", "1.0.0"))
	install(t, home, testPlugin(t, "acme", "2.0.0"))
	writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: false\n    version: \"^1\"\n")
	if r := marina(t, home, nil, "plugin", "enable", "acme"); r.code != 0 {
		t.Fatalf("enable: exit %d\n%s", r.code, r.stderr)
	}
	if v, c := lockPin(t, home, "acme"); v != "1.0.0" || c != "^1" {
		t.Fatalf("after enable: lock pins %s (%s), want 1.0.0 (^1)", v, c)
	}

	// Edited by hand to select 2.x; `plugin verify` runs first.
	writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: true\n    version: \"^2\"\n")
	rows, r := verifyJSON(t, home, "acme")
	if r.code != 0 || !rows["2.0.0"].Pinned || !rows["2.0.0"].OK || rows["1.0.0"].Pinned {
		t.Fatalf("verify after selecting ^2: exit %d %+v\n%s", r.code, rows, r.stderr)
	}
	if v, c := lockPin(t, home, "acme"); v != "2.0.0" || c != "^2" {
		t.Fatalf("after verify: lock pins %s (%s), want 2.0.0 (^2)", v, c)
	}
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 2 || got[1].Version != "2.0.0" || got[1].Status != "active" || got[0].Status != "installed" {
		t.Fatalf("list after selecting ^2: %+v", got)
	}
	text := marina(t, home, nil, "plugin", "verify")
	if text.code != 0 || !strings.Contains(text.stdout, "ok       acme 2.0.0 (pinned)") || !strings.Contains(text.stdout, "ok       acme 1.0.0\n") {
		t.Fatalf("plugin verify (text): exit %d\n%s%s", text.code, text.stdout, text.stderr)
	}

	// And back to 1.x by hand; this time `plugin list` runs first.
	writeHomeConfig(t, home, "plugins:\n  acme:\n    enabled: true\n    version: \"~1.0\"\n")
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 2 || got[0].Status != "active" || got[1].Status != "installed" {
		t.Fatalf("list after selecting ~1.0: %+v", got)
	}
	if v, c := lockPin(t, home, "acme"); v != "1.0.0" || c != "~1.0" {
		t.Fatalf("after list: lock pins %s (%s), want 1.0.0 (~1.0)", v, c)
	}
	if rows, r := verifyJSON(t, home, "acme"); r.code != 0 || !rows["1.0.0"].Pinned || rows["2.0.0"].Pinned {
		t.Fatalf("verify after list: exit %d %+v\n%s", r.code, rows, r.stderr)
	}

	// A lock file (say, a teammate's, under version control) pinning another
	// build of the version the config selects is not overwritten: list and
	// verify refuse the installed build, and the pin stays.
	lockPath := filepath.Join(home, ".marina", "plugins.lock")
	other := strings.Repeat("0", 64)
	lf := `{"version": 1, "plugins": {"acme": {"version": "1.0.0", "constraint": "^1", "sha256": {"` + runtime.GOOS + "/" + runtime.GOARCH + `": "` + other + `"}, "source": "elsewhere", "protocol": "1.0"}}}` + "\n"
	if err := os.WriteFile(lockPath, []byte(lf), 0o644); err != nil {
		t.Fatal(err)
	}
	rowsL, rl := listRows(t, home)
	if acme := rowsFor(rowsL, "acme"); rl.code != 1 || acme[0].Status != "modified" || !strings.Contains(acme[0].Detail, "not the build that was locked") {
		t.Fatalf("list with another build pinned: exit %d %+v\n%s", rl.code, acme, rl.stderr)
	}
	if rows, r := verifyJSON(t, home, "acme"); r.code != 1 || rows["1.0.0"].OK || !strings.Contains(rows["1.0.0"].Error, "not the build that was locked") {
		t.Fatalf("verify with another build pinned: exit %d %+v\n%s", r.code, rows, r.stderr)
	}
	if got := readLock(t, home); got != lf {
		t.Fatalf("the lock file pinning another build was changed:\n%s", got)
	}
}

// TestPluginListDependencyUnavailable (issue 15): externaldns requires
// localdns; with localdns disabled, `plugin list` showed externaldns
// active although no run could start it. coredns depends on localdns only
// optionally and stays active.
func TestPluginListDependencyUnavailable(t *testing.T) {
	home := t.TempDir()
	writeHomeConfig(t, home, "plugins:\n  localdns:\n    enabled: false\n")
	rows, r := listRows(t, home)
	if r.code != 0 {
		t.Fatalf("plugin list: exit %d\n%s", r.code, r.stderr)
	}
	status := map[string]pluginset.Row{}
	for _, row := range rows {
		status[row.Name] = row
	}
	ext := status["externaldns"]
	if ext.Status != "unavailable" || !strings.Contains(ext.Detail, "localdns") || !strings.Contains(ext.Detail, "`marina plugin enable localdns`") {
		t.Errorf("externaldns with localdns disabled: %+v", ext)
	}
	if status["localdns"].Status != "disabled" || status["coredns"].Status != "active" || status["metallb"].Status != "active" {
		t.Errorf("statuses: localdns %q, coredns %q, metallb %q", status["localdns"].Status, status["coredns"].Status, status["metallb"].Status)
	}
	// Enabled again: externaldns is active again.
	writeHomeConfig(t, home, "plugins:\n  localdns:\n    enabled: true\n")
	if rows, r := listRows(t, home); r.code != 0 || rowsFor(rows, "externaldns")[0].Status != "active" {
		t.Errorf("externaldns with localdns enabled: exit %d %+v", r.code, rowsFor(rows, "externaldns"))
	}
}

// TestPluginListFitsIn100Columns (issue 15): the default table of the
// built-ins on a default config, and with a detail to show, fits in 100
// columns; -o wide keeps every column, as the table was before.
func TestPluginListFitsIn100Columns(t *testing.T) {
	home := t.TempDir()
	check := func(what, out string) {
		t.Helper()
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("%s: a line of %d columns:\n%s", what, n, line)
			}
		}
	}
	r := marina(t, home, nil, "plugin", "list")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "NAME ") || !strings.Contains(r.stdout, "externaldns") {
		t.Fatalf("plugin list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	check("default config", r.stdout)
	header := strings.Fields(strings.SplitN(r.stdout, "\n", 2)[0])
	if strings.Join(header, " ") != "NAME VERSION SOURCE HOOKS STATUS" {
		t.Errorf("default header = %v", header)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "externaldns" && (f[3] != "2" || f[4] != "active") {
			t.Errorf("externaldns line: %q", line)
		}
	}

	// A detail is shown below the table, wrapped, its commands whole.
	writeHomeConfig(t, home, "plugins:\n  localdns:\n    enabled: false\n")
	r = marina(t, home, nil, "plugin", "list")
	if r.code != 0 {
		t.Fatalf("plugin list: exit %d\n%s", r.code, r.stderr)
	}
	check("localdns disabled", r.stdout)
	table, notes, ok := strings.Cut(r.stdout, "\n\n")
	if !ok || !strings.Contains(table, "unavailable\n") || strings.Contains(table, "requires") ||
		!strings.HasPrefix(notes, "externaldns 0.1.0: unavailable (plugin externaldns requires plugin localdns") ||
		!strings.Contains(notes, "`marina plugin enable localdns`") {
		t.Errorf("plugin list with localdns disabled:\n%s", r.stdout)
	}

	// -o wide: every column, the detail in the table.
	r = marina(t, home, nil, "plugin", "list", "-o", "wide")
	header = strings.Fields(strings.SplitN(r.stdout, "\n", 2)[0])
	if r.code != 0 || strings.Join(header, " ") != "NAME VERSION SOURCE PROTOCOL HOOKS DEPENDS SIGNATURE STATUS" ||
		!regexp.MustCompile(`PostCluster,PreClusterDelete +localdns +- +unavailable \(plugin externaldns requires plugin localdns`).MatchString(r.stdout) {
		t.Errorf("plugin list -o wide: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "list", "-o", "xml"); r.code != 2 || !strings.Contains(r.stderr, "wide") {
		t.Errorf("plugin list -o xml: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPluginTable: long sources are shortened and long details wrapped
// below the default table, whose lines stay within 100 columns; a command
// in backquotes is never split.
func TestPluginTable(t *testing.T) {
	home, _ := os.UserHomeDir()
	long := "plugin acme 1.0.0: binary /var/lib/somewhere/very/deep/plugins/acme/1.0.0/linux_amd64/marina-plugin-acme was modified after install (sha256 0123456789ab…, expected ba9876543210…); reinstall it with `marina plugin install /var/lib/somewhere/very/deep/src/marina-plugin-acme`"
	rows := []pluginset.Row{
		{Name: "acme", Version: "1.0.0", Source: filepath.Join(home, "src", "a", "rather", "long", "path", "to", "bin", "marina-plugin-acme"), Hooks: []string{"PostCluster"}, Status: "modified", Detail: long},
		{Name: "beta", Version: "2.0.0", Source: "https://example.com/releases/download/v2.0.0/marina-plugin-beta.tar.gz [checksum skipped at install]", Hooks: []string{"PostUp", "PreDestroy"}, Status: "active"},
		{Name: "gamma", Source: "-", Status: "unavailable", Detail: "plugin gamma is not installed; install it with `marina plugin install <source>` or remove plugins.gamma from the config"},
	}
	var b strings.Builder
	if err := WriteTable(&b, rows, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("a line of %d columns: %s", n, line)
		}
	}
	for _, want := range []string{
		"  …/long/path/to/bin/marina-plugin-acme  ", "  …/v2.0.0/marina-plugin-beta.tar.gz [checksum skipped]  ",
		"\nacme 1.0.0: modified (plugin acme 1.0.0: binary",
		"`marina plugin install /var/lib/somewhere/very/deep/src/marina-plugin-acme`)",
		"\ngamma: unavailable (plugin gamma is not installed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("default table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "`marina plugin\n") || strings.Contains(out, "`marina\n") {
		t.Errorf("a command was split:\n%s", out)
	}
	b.Reset()
	if err := WriteTable(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), rows[0].Source) || !strings.Contains(b.String(), "modified ("+long+")") || !strings.Contains(b.String(), rows[1].Source) {
		t.Errorf("wide table:\n%s", b.String())
	}
}
