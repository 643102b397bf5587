// Package pluginset decides which plugins a marina run uses: the built-ins
// compiled into the binary and the installed plugins the config enables,
// each resolved to one version, with its config and launch spec. It starts
// no process: descriptions come from the built-ins themselves (in-process)
// and from the store's manifests.
//
// It also holds the rules the plugin commands apply to the set: List (the
// rows and problems of `plugin list`), CheckToggle and RemoveOrphan (what
// `plugin enable`, `disable` and `remove` refuse) and ConfigFields (a
// plugin's config schema as the fields `plugin info` shows).
package pluginset

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/sdk"
)

// ServeArg is the hidden command under which the marina binary serves a
// built-in plugin: `marina plugin-server NAME`.
const ServeArg = "plugin-server"

// Builtins maps a built-in plugin's name to its constructor.
type Builtins map[string]func() sdk.Plugin

// Entry is one plugin as a run sees it.
type Entry struct {
	Name    string
	Builtin bool
	Enabled bool
	// Constraint is the configured version constraint ("" = any).
	Constraint string
	// Installed is the selected installed version (nil for built-ins and
	// for plugins that could not be resolved).
	Installed   *pluginstore.Installed
	Description *sdk.Description
	// Plugin is what the dispatcher runs (valid when Problem is "").
	Plugin plugin.Plugin
	// Problem says why an enabled plugin cannot run (not installed, no
	// version matches, ...), with the fix.
	Problem string
}

// Resolve builds the plugin set of cfg. self is the marina executable
// (built-ins re-execute it). Entries are sorted by name; disabled plugins
// are included (Enabled false) so listings can show them.
func Resolve(cfg *config.Config, builtins Builtins, store *pluginstore.Store, self string) ([]Entry, error) {
	names := map[string]bool{}
	for name := range builtins {
		names[name] = true
	}
	for name := range cfg.Plugins {
		names[name] = true
	}
	var out []Entry
	var errs []error
	for _, name := range sortedKeys(names) {
		pc, configured := cfg.Plugins[name]
		e := Entry{Name: name, Enabled: configured && pc.Enabled, Constraint: pc.Version}
		cfgJSON, err := configJSON(pc.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugins.%s.config: %w", name, err))
			continue
		}
		if newPlugin, ok := builtins[name]; ok {
			e.Builtin = true
			impl := newPlugin()
			d, err := sdk.Describe(impl)
			if err != nil {
				return nil, fmt.Errorf("built-in plugin %s: %w", name, err)
			}
			e.Description = d
			if pc.Version != "" {
				e.Problem = fmt.Sprintf("plugins.%s.version: %s is built into marina (version %s) and cannot be selected by version; remove the version key", name, name, d.Version)
			}
			e.Plugin = plugin.Plugin{Spec: plugin.Spec{Name: name, Path: self, Args: []string{ServeArg, name}, Version: d.Version}, Config: cfgJSON, Timeout: pc.Timeout, Description: d, Builtin: impl}
			out = append(out, e)
			continue
		}
		inst, err := store.Resolve(name, pc.Version)
		switch {
		case err == nil:
			e.Installed, e.Description = inst, inst.Description
			e.Plugin = plugin.Plugin{Spec: plugin.Spec{Name: name, Path: inst.Path, SHA256: inst.SHA256, Version: inst.Version}, Config: cfgJSON, Timeout: pc.Timeout, Description: inst.Description}
		case errors.Is(err, pluginstore.ErrNotInstalled) && config.IsBuiltinName(name):
			e.Problem = fmt.Sprintf("built-in plugin %s is not part of this marina build yet; disable it with `marina plugin disable %s`", name, name)
		case errors.Is(err, pluginstore.ErrNotInstalled):
			e.Problem = fmt.Sprintf("plugin %s is not installed; install it with `marina plugin install <source>` or remove plugins.%s from the config", name, name)
		default:
			e.Problem = err.Error()
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// Enabled returns the runnable enabled plugins, or an error listing every
// enabled plugin that cannot run.
func Enabled(entries []Entry) ([]plugin.Plugin, error) {
	var ps []plugin.Plugin
	var errs []error
	for _, e := range entries {
		if !e.Enabled {
			continue
		}
		if e.Problem != "" {
			errs = append(errs, errors.New(e.Problem))
			continue
		}
		ps = append(ps, e.Plugin)
	}
	return ps, errors.Join(errs...)
}

// DependencyProblems is plugin.DependencyProblems for entries.
func DependencyProblems(entries []Entry) map[string]string {
	members := make([]plugin.Member, len(entries))
	for i, e := range entries {
		members[i] = plugin.Member{Name: e.Name, Enabled: e.Enabled, Problem: e.Problem, Description: e.Description}
	}
	return plugin.DependencyProblems(members)
}

func configJSON(m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Sync makes the lock file follow the config: it pins the version the
// config selects for every enabled installed plugin that can run, with its
// constraint and sha256, when the lock file does not record exactly that
// already (no entry, another version, another constraint, or not this
// build's digest for this platform). Pinning another version replaces the
// entry; entries that agree are not rewritten, so nothing is written when
// all agree. As with Store.Pin, another build of the version the lock file
// pins is refused (errors.Is ErrLockMismatch) and the pin kept; Verify
// refuses to launch it. An unreadable lock file is returned as ReadLock's
// error (ErrInvalid when it does not parse) and nothing is pinned.
func Sync(store *pluginstore.Store, entries []Entry) error {
	lf, err := store.ReadLock()
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.Enabled || e.Installed == nil || e.Problem != "" || lf.Pins(e.Installed, e.Constraint) {
			continue
		}
		if err := store.Pin(e.Installed, e.Constraint); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Verify checks, before a run launches them, that every enabled installed
// plugin's binary still has the digest recorded at install and in the lock file.
func Verify(store *pluginstore.Store, entries []Entry) error {
	var errs []error
	for _, e := range entries {
		if e.Enabled && e.Installed != nil && e.Problem == "" {
			if err := store.Verify(e.Installed); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
