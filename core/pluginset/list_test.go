package pluginset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/sdk"
)

// scriptStore is a store whose installs are shell scripts ("#!/bin/sh" and
// a line "# NAME VERSION"), described from that line without running them.
func scriptStore(t *testing.T) *pluginstore.Store {
	t.Helper()
	dir := t.TempDir()
	describe := func(_ context.Context, path string) (*sdk.Description, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var name, version string
		if _, err := fmt.Sscanf(strings.Split(string(b), "\n")[1], "# %s %s", &name, &version); err != nil {
			return nil, err
		}
		return &sdk.Description{Name: name, Version: version, Protocol: "1.0", Hooks: []sdk.Hook{sdk.PostCluster}}, nil
	}
	return pluginstore.Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins.lock"), describe)
}

// installScript installs plugin name at version into s.
func installScript(t *testing.T, s *pluginstore.Store, name, version string) *pluginstore.Installed {
	t.Helper()
	src := filepath.Join(t.TempDir(), "marina-plugin-"+name)
	if err := os.WriteFile(src, []byte("#!/bin/sh\n# "+name+" "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inst, err := s.Install(context.Background(), src, pluginstore.InstallOptions{})
	if err != nil {
		t.Fatalf("install %s %s: %v", name, version, err)
	}
	return inst
}

// listed is what a test compares of a row.
type listed struct{ Name, Version, Source, Status, Detail string }

func listedOf(rows []Row) []listed {
	out := make([]listed, len(rows))
	for i, r := range rows {
		out[i] = listed{r.Name, r.Version, r.Source, r.Status, r.Detail}
	}
	return out
}

// TestList: the rows of `plugin list` join the plugin set with the
// store's installs: a built-in (and an install shadowed by its name),
// every installed version of a configured plugin (the selected one
// active), an enabled plugin that is not installed, a built-in whose
// required plugin cannot run, and an install the config does not name.
// A corrupt lock file and a modified binary are problems.
func TestList(t *testing.T) {
	s := scriptStore(t)
	installScript(t, s, "acme", "1.0.0")
	acme11 := installScript(t, s, "acme", "1.1.0")
	installScript(t, s, "dns", "9.0.0") // before built-in names were refused
	installScript(t, s, "zeta", "1.0.0")
	dns := &sdk.Description{Name: "dns", Version: "0.1.0", Protocol: "1.0", Hooks: []sdk.Hook{sdk.PostUp, sdk.PreDown},
		Dependencies: []sdk.Dependency{{Name: "acme", Optional: true}}}
	ext := &sdk.Description{Name: "ext", Version: "0.2.0", Protocol: "1.0", Dependencies: []sdk.Dependency{{Name: "ghost"}}}
	ghostProblem := "plugin ghost is not installed; install it with `marina plugin install <source>` or remove plugins.ghost from the config"
	entries := []Entry{
		{Name: "acme", Enabled: true, Installed: acme11, Description: acme11.Description},
		{Name: "dns", Builtin: true, Enabled: true, Description: dns},
		{Name: "ext", Builtin: true, Enabled: true, Description: ext},
		{Name: "ghost", Enabled: true, Problem: ghostProblem},
		{Name: "off", Builtin: true, Description: &sdk.Description{Name: "off", Version: "0.3.0", Protocol: "1.0"}},
	}
	rows, problems, err := List(entries, s)
	if err != nil || len(problems) > 0 {
		t.Fatalf("List: %v, problems %q", err, problems)
	}
	want := []listed{
		{"acme", "1.0.0", rows[0].Source, StatusInstalled, ""},
		{"acme", "1.1.0", rows[1].Source, StatusActive, ""},
		{"dns", "0.1.0", "built-in", StatusActive, ""},
		{"dns", "9.0.0", rows[3].Source, StatusShadowed, "a plugin built into marina has this name and always wins; remove this one with `marina plugin remove dns@9.0.0`"},
		{"ext", "0.2.0", "built-in", StatusUnavailable, "plugin ext requires plugin ghost, which cannot run: " + ghostProblem},
		{"ghost", "", "-", StatusUnavailable, ghostProblem},
		{"off", "0.3.0", "built-in", StatusDisabled, ""},
		{"zeta", "1.0.0", rows[7].Source, StatusInstalled, "not in the config; enable it with `marina plugin enable zeta`"},
	}
	if got := listedOf(rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows:\n%+v\nwant:\n%+v", got, want)
	}
	for _, i := range []int{0, 1, 3, 7} {
		if r := rows[i]; !strings.HasSuffix(r.Source, "marina-plugin-"+r.Name) || r.Path == "" || len(r.SHA256) != 64 || !strings.HasPrefix(r.Signature, "unsigned") {
			t.Errorf("installed row %d: %+v", i, r)
		}
	}
	if r := rows[2]; !reflect.DeepEqual(r.Hooks, []string{"PostUp", "PreDown"}) || !reflect.DeepEqual(r.Dependencies, []string{"acme?"}) || r.Protocol != "1.0" || r.Path != "" || r.Signature != "" {
		t.Errorf("built-in row: %+v", r)
	}
	if r := rows[5]; r.Hooks == nil || r.Dependencies == nil {
		t.Errorf("a row without a description has nil lists (null in JSON): %+v", r)
	}

	// An unreadable lock file: the active install cannot be checked.
	if err := os.WriteFile(s.LockPath(), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, problems, err = List(entries, s)
	if err != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], "lock file unreadable: ") {
		t.Fatalf("with a corrupt lock file: %v, problems %q", err, problems)
	}
	if rows[1].Status != StatusLockUnreadable || rows[0].Status != StatusInstalled {
		t.Errorf("with a corrupt lock file: %+v", listedOf(rows)[:2])
	}
	if err := os.Remove(s.LockPath()); err != nil {
		t.Fatal(err)
	}

	// A modified binary.
	if err := os.WriteFile(acme11.Path, []byte("#!/bin/sh\n# acme 1.1.0\nevil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rows, problems, err = List(entries, s)
	// One problem line, naming the plugin once (the store's message names
	// it already: no "plugin acme 1.1.0: binary modified: plugin acme 1.1.0: ...").
	if err != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], "plugin acme 1.1.0: binary ") ||
		strings.Count(problems[0], "acme 1.1.0") != 1 || !strings.Contains(problems[0], "was modified after install") {
		t.Fatalf("with a modified binary: %v, problems %q", err, problems)
	}
	if r := rows[1]; r.Status != StatusModified || !strings.Contains(r.Detail, "was modified after install") {
		t.Errorf("modified row: %+v", r)
	}
}

// TestInstalledRowMarksInsecureSource: an https install made without a
// checksum says so in its source.
func TestInstalledRowMarksInsecureSource(t *testing.T) {
	r := installedRow(pluginstore.Installed{Name: "acme", Version: "1.0.0", Source: "https://example.com/acme", InsecureSkipChecksum: true})
	if r.Source != "https://example.com/acme"+InsecureSourceMark || r.Name != "acme" || r.Version != "1.0.0" {
		t.Errorf("row: %+v", r)
	}
}
