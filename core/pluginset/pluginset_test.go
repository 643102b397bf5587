package pluginset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/sdk"
)

// installed is an install record as the store returns it (Pin needs no
// binary on disk: it records the digest the manifest holds).
func installed(name, version, digit string) *pluginstore.Installed {
	return &pluginstore.Installed{
		Name: name, Version: version, Platform: pluginstore.HostPlatform().String(),
		SHA256: strings.Repeat(digit, 64), Source: "/src/" + name + "-" + version,
		Description: &sdk.Description{Name: name, Version: version, Protocol: "1.0"},
	}
}

func enabledEntry(inst *pluginstore.Installed, constraint string) Entry {
	return Entry{Name: inst.Name, Enabled: true, Constraint: constraint, Installed: inst, Description: inst.Description}
}

func newStore(t *testing.T) *pluginstore.Store {
	t.Helper()
	dir := t.TempDir()
	return pluginstore.Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins.lock"), nil)
}

func lockEntry(t *testing.T, s *pluginstore.Store, name string) (pluginstore.LockEntry, bool) {
	t.Helper()
	lf, err := s.ReadLock()
	if err != nil {
		t.Fatal(err)
	}
	e, ok := lf.Plugins[name]
	return e, ok
}

// TestSyncFollowsTheConfig: the config's selection, edited by hand after the
// lock file pinned another version, is what the lock file records after
// Sync; a selection that agrees with the lock file writes nothing.
func TestSyncFollowsTheConfig(t *testing.T) {
	s := newStore(t)
	v1, v2 := installed("acme", "1.0.0", "1"), installed("acme", "2.0.0", "2")
	if err := s.Pin(v1, "^1"); err != nil {
		t.Fatal(err)
	}
	// The config now says ^2 (edited by hand): 2.0.0 is selected.
	if err := Sync(s, []Entry{enabledEntry(v2, "^2")}); err != nil {
		t.Fatal(err)
	}
	e, ok := lockEntry(t, s, "acme")
	if !ok || e.Version != "2.0.0" || e.Constraint != "^2" || e.SHA256[v2.Platform] != v2.SHA256 || len(e.SHA256) != 1 {
		t.Fatalf("after Sync to 2.0.0: %+v", e)
	}

	// The same version under another constraint: the constraint follows.
	if err := Sync(s, []Entry{enabledEntry(v2, ">=2")}); err != nil {
		t.Fatal(err)
	}
	if e, _ := lockEntry(t, s, "acme"); e.Version != "2.0.0" || e.Constraint != ">=2" {
		t.Fatalf("after a constraint change: %+v", e)
	}

	// Nothing to change: the file is not rewritten.
	before, err := os.Stat(s.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := Sync(s, []Entry{enabledEntry(v2, ">=2")}); err != nil {
		t.Fatalf("Sync with nothing to change: %v", err)
	}
	after, err := os.Stat(s.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) { // a write renames a new file over it
		t.Fatalf("the lock file was rewritten although it agreed with the config")
	}

	// A plugin that is not pinned yet is pinned; disabled plugins, plugins
	// that cannot run and built-ins are left alone.
	other := installed("other", "0.1.0", "3")
	broken := installed("broken", "1.0.0", "4")
	entries := []Entry{
		enabledEntry(v2, ">=2"),
		enabledEntry(other, ""),
		{Name: "off", Enabled: false, Installed: installed("off", "1.0.0", "5")},
		{Name: "broken", Enabled: true, Installed: broken, Problem: "something"},
		{Name: "metallb", Enabled: true, Builtin: true},
	}
	if err := Sync(s, entries); err != nil {
		t.Fatal(err)
	}
	lf, err := s.ReadLock()
	if err != nil {
		t.Fatal(err)
	}
	if len(lf.Plugins) != 2 || lf.Plugins["other"].Version != "0.1.0" || lf.Plugins["acme"].Version != "2.0.0" {
		t.Fatalf("lock file plugins = %+v", lf.Plugins)
	}
}

// TestSyncRefusesAnotherBuild: following the config never trusts another
// build of the version the lock file pins; the pin is kept as it was.
func TestSyncRefusesAnotherBuild(t *testing.T) {
	s := newStore(t)
	pinned := installed("acme", "2.0.0", "a")
	if err := s.Pin(pinned, "^2"); err != nil {
		t.Fatal(err)
	}
	rebuilt := installed("acme", "2.0.0", "b")
	for _, constraint := range []string{"^2", ">=2"} {
		err := Sync(s, []Entry{enabledEntry(rebuilt, constraint)})
		if !errors.Is(err, pluginstore.ErrLockMismatch) || !strings.Contains(err.Error(), "to trust the installed build instead") {
			t.Fatalf("Sync (%s) of another build of the pinned version: %v, want ErrLockMismatch", constraint, err)
		}
		e, _ := lockEntry(t, s, "acme")
		if e.SHA256[pinned.Platform] != pinned.SHA256 || e.Constraint != "^2" {
			t.Fatalf("Sync (%s) changed the pin: %+v", constraint, e)
		}
	}
}

// TestSyncUnreadableLock: a corrupt lock file is reported and left as it is.
func TestSyncUnreadableLock(t *testing.T) {
	s := newStore(t)
	if err := os.WriteFile(s.LockPath(), []byte(`{"version": 1, "plugins": {`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Sync(s, []Entry{enabledEntry(installed("acme", "1.0.0", "1"), "")})
	if !errors.Is(err, pluginstore.ErrInvalid) {
		t.Fatalf("Sync with a corrupt lock file: %v, want ErrInvalid", err)
	}
	if b, _ := os.ReadFile(s.LockPath()); string(b) != `{"version": 1, "plugins": {` {
		t.Fatalf("the corrupt lock file was rewritten: %s", b)
	}
}

// described is an enabled, runnable entry whose description declares deps.
func described(name, version string, deps ...sdk.Dependency) Entry {
	d := &sdk.Description{Name: name, Version: version, Dependencies: deps}
	return Entry{Name: name, Enabled: true, Description: d}
}

// TestDependencyProblems: an enabled plugin whose required dependency is
// disabled, unknown, unavailable (itself or through its own dependency) or
// of a version outside the declared constraint cannot run; optional
// dependencies may be absent. Each problem names the dependency and the fix.
func TestDependencyProblems(t *testing.T) {
	disabled := described("off", "1.0.0")
	disabled.Enabled = false
	broken := described("broken", "1.0.0")
	broken.Problem = "plugin broken is not installed; install it with `marina plugin install <source>`"
	entries := []Entry{
		described("base", "1.2.0"),
		described("ok", "1.0.0", sdk.Dependency{Name: "base", Version: "^1"}, sdk.Dependency{Name: "off", Optional: true}, sdk.Dependency{Name: "nowhere", Optional: true}),
		described("needs-off", "1.0.0", sdk.Dependency{Name: "off"}),
		described("needs-nowhere", "1.0.0", sdk.Dependency{Name: "nowhere"}),
		described("needs-broken", "1.0.0", sdk.Dependency{Name: "broken"}),
		described("needs-needs-off", "1.0.0", sdk.Dependency{Name: "needs-off"}),
		described("needs-base2", "1.0.0", sdk.Dependency{Name: "base", Version: "^2"}),
		described("optional-base2", "1.0.0", sdk.Dependency{Name: "base", Version: "^2", Optional: true}),
		disabled,
		broken,
	}
	// A disabled plugin or one with a problem of its own is not judged.
	off2 := described("off2", "1.0.0", sdk.Dependency{Name: "nowhere"})
	off2.Enabled = false
	entries = append(entries, off2)

	got := DependencyProblems(entries)
	want := map[string][]string{
		"needs-off":       {"requires plugin off, which is disabled", "`marina plugin enable off`", "or disable needs-off"},
		"needs-nowhere":   {"requires plugin nowhere, which is neither built in nor in the config", "`marina plugin enable nowhere`"},
		"needs-broken":    {"requires plugin broken, which cannot run: plugin broken is not installed"},
		"needs-needs-off": {"requires plugin needs-off, which cannot run: plugin needs-off requires plugin off", "`marina plugin enable off`"},
		"needs-base2":     {"requires base ^2, but base 1.2.0 is selected", "plugins.base.version"},
		"optional-base2":  {"requires base ^2, but base 1.2.0 is selected"},
	}
	for name, fragments := range want {
		msg, ok := got[name]
		if !ok {
			t.Errorf("%s: no dependency problem", name)
			continue
		}
		for _, f := range fragments {
			if !strings.Contains(msg, f) {
				t.Errorf("%s: %q does not contain %q", name, msg, f)
			}
		}
	}
	for name, msg := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected dependency problem %q", name, msg)
		}
	}
}
