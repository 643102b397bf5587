package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bcollard/marina/core/cli"
	"github.com/bcollard/marina/core/pluginlist"
)

// pluginRows is `marina plugin list` for a lab whose plugins are all built
// in: the config names only built-in plugins (none by version constraint:
// cli.LoadConfig hands those over), nothing was ever installed (no
// ~/.marina/plugins) and there is no lock file (~/.marina/plugins.lock).
// The rows come from the built-ins' descriptions compiled in
// (pluginlist.Builtins) and their dependencies are checked as marina-core
// checks them. Every other set is marina-core's: the store's manifests, the
// lock file, the binaries' digests and signatures.
func pluginRows(g *cli.Global, errw io.Writer) func() ([]pluginlist.Row, []string, error) {
	return func() ([]pluginlist.Row, []string, error) {
		// The store first: with plugins installed, marina-core answers,
		// and the config is read once, there.
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, cli.ErrHandOver
		}
		for _, p := range []string{filepath.Join(home, ".marina", "plugins"), filepath.Join(home, ".marina", "plugins.lock")} {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, cli.ErrHandOver
			}
		}
		l, err := cli.LoadConfig(g, errw)
		if err != nil {
			return nil, nil, err
		}
		builtin := map[string]bool{}
		for _, b := range pluginlist.Builtins {
			builtin[b.Name] = true
		}
		for name := range l.Config.Plugins {
			if !builtin[name] {
				return nil, nil, cli.ErrHandOver
			}
		}
		nodes := make([]pluginlist.Node, 0, len(pluginlist.Builtins))
		for _, b := range pluginlist.Builtins {
			for _, dep := range b.Dependencies {
				if dep.Version != "" {
					return nil, nil, cli.ErrHandOver // only marina-core parses semver
				}
			}
			pc, configured := l.Config.Plugins[b.Name]
			nodes = append(nodes, pluginlist.Node{Name: b.Name, Enabled: configured && pc.Enabled, Described: true, Version: b.Version, Dependencies: b.Dependencies})
		}
		problems := pluginlist.DependencyProblems(nodes, nil)
		rows := make([]pluginlist.Row, 0, len(nodes))
		for i, b := range pluginlist.Builtins {
			r := pluginlist.RowOf(b, "built-in")
			r.Status = "disabled"
			if nodes[i].Enabled {
				r.Status = "active"
				if msg := problems[b.Name]; msg != "" {
					r.Status, r.Detail = "unavailable", msg
				}
			}
			rows = append(rows, r)
		}
		return rows, nil, nil
	}
}
