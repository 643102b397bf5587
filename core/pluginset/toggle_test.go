package pluginset

import (
	"errors"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/pluginstore"
)

var toggleBuiltins = []string{"metallb", "dns"}

// loaded is a loader of a config with plugins.
func loaded(plugins map[string]config.PluginConfig) ConfigLoader {
	return func() (*config.Loaded, error) {
		return &config.Loaded{Config: &config.Config{Plugins: plugins}}, nil
	}
}

// broken is a loader of a config that does not load.
func broken(err error) ConfigLoader {
	return func() (*config.Loaded, error) { return nil, err }
}

// never fails the test when the store or the config is asked for.
func never(t *testing.T) (StoreOpener, ConfigLoader) {
	return func() (*pluginstore.Store, error) {
			t.Error("the store was opened")
			return nil, errors.New("no store")
		}, func() (*config.Loaded, error) {
			t.Error("the config was loaded")
			return nil, errors.New("no config")
		}
}

// TestCheckToggle: enable refuses what no run could use (unknown, no
// installed version matching the constraint), disable only an unknown
// name; refusals are usage errors naming the choices; a built-in needs
// neither the store nor the config, and a broken config stays fixable
// with disable.
func TestCheckToggle(t *testing.T) {
	s := scriptStore(t)
	installScript(t, s, "acme", "1.0.0")
	open := func() (*pluginstore.Store, error) { return s, nil }
	noConfig := errors.New("config: broken")

	for _, enable := range []bool{true, false} {
		st, lc := never(t)
		if err := CheckToggle("dns", enable, toggleBuiltins, st, lc); err != nil {
			t.Errorf("built-in dns (enable %v): %v", enable, err)
		}
	}
	for _, tc := range []struct {
		name   string
		enable bool
		load   ConfigLoader
		usage  bool
		want   []string // fragments of the error; none: no error
	}{
		{"nosuch", true, loaded(nil), true, []string{`plugin enable nosuch: no plugin "nosuch" is built in or installed (built in: dns, metallb; installed: acme). Install a plugin first with ` + "`marina plugin install SOURCE`; nothing was changed"}},
		{"metalb", true, loaded(nil), true, []string{`plugin enable metalb: no plugin "metalb" is built in or installed; did you mean "metallb"? (built in`}},
		{"acmee", false, loaded(nil), true, []string{`plugin disable acmee: no plugin "acmee"`, `did you mean "acme"?`}},
		{"acme", true, loaded(map[string]config.PluginConfig{"acme": {Version: "^2"}}), true, []string{"plugin enable acme: ", `no installed version of plugin acme matches "^2"`, "; or change plugins.acme.version in the config (nothing was changed)"}},
		{"acme", true, loaded(map[string]config.PluginConfig{"acme": {Version: "^1"}}), false, nil},
		{"acme", true, broken(noConfig), false, []string{"config: broken"}},
		{"acme", false, broken(noConfig), false, nil},
		{"ghost", false, loaded(map[string]config.PluginConfig{"ghost": {Enabled: true}}), false, nil},
		{"ghost", false, broken(noConfig), false, nil},
	} {
		err := CheckToggle(tc.name, tc.enable, toggleBuiltins, open, tc.load)
		what := map[bool]string{true: "enable", false: "disable"}[tc.enable] + " " + tc.name
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want %q", what, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant %q", what, err, w)
			}
		}
		if code := exitcode.Of(err); (code == exitcode.Usage) != tc.usage {
			t.Errorf("%s: exit code %d (usage %v)", what, code, tc.usage)
		}
	}
	if err := CheckToggle("acme", true, nil, func() (*pluginstore.Store, error) { return nil, noConfig }, loaded(nil)); err != noConfig {
		t.Errorf("a store that does not open: %v", err)
	}
}

// TestRemoveOrphan: removing the last version an enabled plugin's
// constraint can select is reported, with the constraint; what is not
// installed, a built-in, a disabled plugin or a version left to select
// is not; a config that does not load is returned for the caller to warn.
func TestRemoveOrphan(t *testing.T) {
	s := scriptStore(t)
	installScript(t, s, "acme", "1.0.0")
	installScript(t, s, "acme", "1.1.0")
	enabled := loaded(map[string]config.PluginConfig{"acme": {Enabled: true}})
	for _, tc := range []struct {
		name, version string
		load          ConfigLoader
		want          string
	}{
		{"acme", "1.1.0", enabled, ""},
		{"acme", "", enabled, "plugin acme is enabled and, once every installed version of acme is removed, no installed version matches any version"},
		{"acme", "1.1.0", loaded(map[string]config.PluginConfig{"acme": {Enabled: true, Version: "^1.1"}}), `plugin acme is enabled and, once acme 1.1.0 is removed, no installed version matches plugins.acme.version "^1.1"`},
		{"acme", "", loaded(map[string]config.PluginConfig{"acme": {Version: "^1.1"}}), ""},
		{"acme", "", loaded(nil), ""},
	} {
		got, err := RemoveOrphan(s, tc.name, tc.version, toggleBuiltins, tc.load)
		if err != nil || got != tc.want {
			t.Errorf("remove %s@%s: %q, %v\nwant %q", tc.name, tc.version, got, err, tc.want)
		}
	}
	_, lc := never(t)
	for _, ref := range [][2]string{{"dns", ""}, {"acme", "9.9.9"}, {"ghost", ""}} {
		if got, err := RemoveOrphan(s, ref[0], ref[1], toggleBuiltins, lc); got != "" || err != nil {
			t.Errorf("remove %s@%s: %q, %v", ref[0], ref[1], got, err)
		}
	}
	noConfig := errors.New("config: broken")
	if got, err := RemoveOrphan(s, "acme", "", toggleBuiltins, broken(noConfig)); got != "" || err != noConfig {
		t.Errorf("with a broken config: %q, %v", got, err)
	}
}
