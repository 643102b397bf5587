package pluginset

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/core/suggest"
)

// The store and the config are asked for only when a rule needs them (a
// built-in's name needs neither): the callers' loaders open the store and
// load the config, with what that prints (the config's warnings), as a
// command would.
type (
	// StoreOpener opens the plugin store.
	StoreOpener func() (*pluginstore.Store, error)
	// ConfigLoader loads the effective config. It may return a config
	// with an error (problems elsewhere in it), or none.
	ConfigLoader func() (*config.Loaded, error)
)

// CheckToggle refuses, before the config file is touched, to enable a
// plugin that no run could use: not built in, not installed, or with no
// installed version matching plugins.NAME.version. Disabling needs only a
// name marina knows (built in, installed or in the config), so a typo is
// not written. builtins are the names of the plugins built into marina.
// A refusal is a usage error (exitcode.UsageError); an enable with a
// config that does not load fails with the loader's error, while a
// disable goes ahead (a broken config must stay fixable).
func CheckToggle(name string, enable bool, builtins []string, openStore StoreOpener, loadConfig ConfigLoader) error {
	if slices.Contains(builtins, name) {
		return nil
	}
	store, err := openStore()
	if err != nil {
		return err
	}
	installed, _ := store.List()
	known := map[string]bool{}
	for _, inst := range installed {
		known[inst.Name] = true
	}
	l, lerr := loadConfig()
	if !enable {
		if known[name] || lerr != nil {
			return nil // a broken config must stay fixable with disable
		}
		if _, ok := l.Config.Plugins[name]; ok {
			return nil
		}
		return exitcode.NewUsage(unknownPlugin("disable", name, builtins, installed))
	}
	if !known[name] {
		return exitcode.NewUsage(unknownPlugin("enable", name, builtins, installed))
	}
	if lerr != nil {
		return lerr
	}
	constraint := l.Config.Plugins[name].Version
	if _, err := store.Resolve(name, constraint); err != nil {
		return exitcode.NewUsage(fmt.Errorf("plugin enable %s: %w; or change plugins.%s.version in the config (nothing was changed)", name, err, name))
	}
	return nil
}

// unknownPlugin is the error for a name that is neither built in nor
// installed, with the nearest known name and the list to choose from.
func unknownPlugin(verb, name string, builtins []string, installed []pluginstore.Installed) error {
	builtin := slices.Sorted(slices.Values(builtins))
	names := slices.Clone(builtin)
	seen := map[string]bool{}
	for _, n := range builtin {
		seen[n] = true
	}
	var inst []string
	for _, i := range installed {
		if !seen[i.Name] {
			names, seen[i.Name] = append(names, i.Name), true
			inst = append(inst, i.Name)
		}
	}
	msg := fmt.Sprintf("plugin %s %s: no plugin %q is built in or installed", verb, name, name)
	if s := suggest.Closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	installedList := "none"
	if len(inst) > 0 {
		installedList = strings.Join(inst, ", ")
	}
	msg += fmt.Sprintf(" (built in: %s; installed: %s). Install a plugin first with `marina plugin install SOURCE`; nothing was changed", strings.Join(builtin, ", "), installedList)
	return errors.New(msg)
}

// RemoveOrphan says, when removing version of name ("" = every version)
// from store would leave the config enabling a plugin with no installed
// version to select, why ("" otherwise). builtins are the names of the
// plugins built into marina. Nothing that is not installed counts: the
// store's own error for that is clearer. The config is loaded only when
// the plugin is installed; when it does not load, RemoveOrphan returns
// "" and the loader's error: whether the config still needs the plugin
// cannot be told, and removing must stay possible (callers warn and go
// on).
func RemoveOrphan(store *pluginstore.Store, name, version string, builtins []string, loadConfig ConfigLoader) (string, error) {
	if slices.Contains(builtins, name) {
		return "", nil
	}
	installed, _ := store.List()
	present := false
	for _, inst := range installed {
		if inst.Name == name && (version == "" || inst.Version == version) {
			present = true
		}
	}
	if !present {
		return "", nil
	}
	l, err := loadConfig()
	if err != nil {
		return "", err
	}
	pc, ok := l.Config.Plugins[name]
	if !ok || !pc.Enabled {
		return "", nil
	}
	if _, err := store.ResolveAfterRemove(name, pc.Version, version); err == nil {
		return "", nil
	}
	what := "every installed version of " + name
	if version != "" {
		what = name + " " + version
	}
	constraint := "any version"
	if pc.Version != "" {
		constraint = fmt.Sprintf("plugins.%s.version %q", name, pc.Version)
	}
	return fmt.Sprintf("plugin %s is enabled and, once %s is removed, no installed version matches %s", name, what, constraint), nil
}
