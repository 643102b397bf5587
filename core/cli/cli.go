// Package cli is what marina's two command-line programs share: the root
// command (its global flags, groups and exit-status contract), -o handling,
// and the commands the front, cmd/marina, answers itself without starting
// marina-core (cmd/marina-core, every other command): version, config path
// and config view. Both programs build those commands from here, so the
// front cannot answer differently from the core.
//
// The package is light by rule: the front links it, and the front must
// start like a small CLI (issue 14). cmd/marina's TestFrontImportGraph
// lists every module the front may reach.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/homeenv"
)

// Global is the flags every command accepts.
type Global struct {
	ConfigPath string
	Sets       []string
	Debug      bool
	NoWait     bool
}

// NewRoot returns marina's root command with the global flags bound to g
// and no subcommands. Its PersistentPreRunE refuses, as a usage error,
// a command that needs a home directory when there is none (CheckHome).
func NewRoot(in io.Reader, out, errw io.Writer, g *Global) *cobra.Command {
	root := &cobra.Command{
		Use:   "marina",
		Short: "Local Kubernetes clusters reachable by IP and DNS name, on one VM",
		Long: `marina runs one VM (Lima on macOS; the host's own Docker on Linux) with Docker and a
shared bridge, and makes kind clusters on it whose LoadBalancer Services are reachable
from the host by IP and by name under a local DNS zone. Everything beyond the small
core is a plugin.

Exit status: 0 ok, 1 failure, 2 usage or configuration error, 130 interrupted.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return CheckHome(cmd) },
	}
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errw)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.NewUsage(err) })

	pf := root.PersistentFlags()
	pf.StringVarP(&g.ConfigPath, "config", "c", "", "config file (default $MARINA_CONFIG or ~/.marina/config.yaml)")
	pf.StringArrayVar(&g.Sets, "set", nil, "override a config key for this run, e.g. --set vm.cpus=6 (repeatable; highest precedence)")
	pf.BoolVar(&g.Debug, "debug", false, "show debug logs")
	pf.BoolVar(&g.NoWait, "no-wait", false, "fail at once if another marina process is changing state, instead of waiting for it")

	root.AddGroup(&cobra.Group{ID: "lab", Title: "The lab:"}, &cobra.Group{ID: GroupPlugins, Title: "Plugins:"}, &cobra.Group{ID: GroupSetup, Title: "Configuration and information:"})
	root.SetHelpCommandGroupID(GroupSetup)
	root.SetCompletionCommandGroupID(GroupSetup)
	return root
}

// The root's command groups.
const (
	GroupLab     = "lab"
	GroupPlugins = "plugins"
	GroupSetup   = "setup"
)

// CheckHome returns a usage error when marina has no home directory
// (homeenv.Problem) and cmd needs one: all but version, help and shell
// completion, which read nothing of ~/.marina.
func CheckHome(cmd *cobra.Command) error {
	if homeenv.Problem == "" {
		return nil
	}
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "version", "help", "completion", "__complete", "__completeNoDesc":
			return nil
		}
	}
	return exitcode.NewUsage(errors.New(homeenv.Problem))
}

// LoadConfig reads and validates the effective configuration for the
// global flags g, printing its warnings (e.g. stray MARINA_* variables) to
// errw. In a program without a constraint parser (the front), a config that
// selects a plugin version by constraint is ErrHandOver, before any output.
func LoadConfig(g *Global, errw io.Writer) (*config.Loaded, error) {
	l, err := config.Load(config.LoadOptions{Path: g.ConfigPath, Sets: g.Sets})
	if config.CheckConstraint == nil && l != nil && l.HasConstraints() {
		return nil, ErrHandOver
	}
	if l != nil {
		for _, w := range l.Warnings {
			fmt.Fprintf(errw, "Warning: %s\n", w)
		}
	}
	return l, err
}

// ErrHandOver is what a command of the front (cmd/marina) returns when it
// cannot answer for certain without marina-core: the front then hands the
// whole command line over, and marina-core answers it.
var ErrHandOver = errors.New("marina-core answers this")

// Report prints err as a command's error line ("Error: ...", nothing for
// an error with an empty message) and returns the exit status it means.
func Report(err error, errw io.Writer) int {
	if err != nil && err.Error() != "" {
		fmt.Fprintf(errw, "Error: %v\n", err)
	}
	return exitcode.Of(err)
}

// Dash is s, or "-" for an empty table cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
