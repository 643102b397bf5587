package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/buildinfo"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/homeenv"
)

// streams are the standard streams a command uses (swapped in tests).
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// globalFlags are the flags every command accepts.
type globalFlags struct {
	ConfigPath string
	Sets       []string
	Debug      bool
	NoWait     bool
}

// app is what every command gets: its streams, global flags and logger.
type app struct {
	*streams
	global globalFlags
	log    *slog.Logger
	runLog runLog
}

// loadConfig reads and validates the effective configuration, printing
// its warnings (e.g. stray MARINA_* variables) to stderr.
func (a *app) loadConfig() (*config.Loaded, error) {
	l, err := config.Load(config.LoadOptions{Path: a.global.ConfigPath, Sets: a.global.Sets})
	if l != nil {
		for _, w := range l.Warnings {
			fmt.Fprintf(a.err, "Warning: %s\n", w)
		}
	}
	return l, err
}

// The root's command groups.
const (
	GroupLab     = "lab"
	GroupPlugins = "plugins"
	GroupSetup   = "setup"
)

// newRootCmd is marina's command tree. Its PersistentPreRunE sets up the
// logger and refuses, as a usage error, a command that needs a home
// directory when there is none (checkHome).
func newRootCmd(s *streams) *cobra.Command {
	a := &app{streams: s}
	root := &cobra.Command{
		Use:   "marina",
		Short: "Local Kubernetes clusters reachable by IP and DNS name, on one VM",
		Long: `marina runs one VM (Lima on macOS; the host's own Docker on Linux) with Docker and a
shared bridge, and makes kind clusters on it whose LoadBalancer Services are reachable
from the host by IP and by name under a local DNS zone. Everything beyond the small
core is a plugin.

Exit status: 0 ok, 1 failure, 2 usage or configuration error, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if a.global.Debug {
				level = slog.LevelDebug
			}
			a.log = slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: level}))
			if homeenv.Derived != "" {
				a.log.Debug("HOME was not set; using the home directory of the user database", "home", homeenv.Derived)
			}
			return checkHome(cmd)
		},
		PersistentPostRun: func(*cobra.Command, []string) { a.runLog.close() },
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.NewUsage(err) })

	pf := root.PersistentFlags()
	pf.StringVarP(&a.global.ConfigPath, "config", "c", "", "config file (default $MARINA_CONFIG or ~/.marina/config.yaml)")
	pf.StringArrayVar(&a.global.Sets, "set", nil, "override a config key for this run, e.g. --set vm.cpus=6 (repeatable; highest precedence)")
	pf.BoolVar(&a.global.Debug, "debug", false, "show debug logs")
	pf.BoolVar(&a.global.NoWait, "no-wait", false, "fail at once if another marina process is changing state, instead of waiting for it")

	root.AddGroup(&cobra.Group{ID: GroupLab, Title: "The lab:"}, &cobra.Group{ID: GroupPlugins, Title: "Plugins:"}, &cobra.Group{ID: GroupSetup, Title: "Configuration and information:"})
	root.SetHelpCommandGroupID(GroupSetup)
	root.SetCompletionCommandGroupID(GroupSetup)
	root.AddCommand(
		newUpCmd(a),
		newClusterCmd(a),
		newKubeconfigCmd(a),
		newFleetCmd(a),
		newStatusCmd(a),
		newDoctorCmd(a),
		newRegistryCmd(a),
		newDNSCmd(a),
		newDockerEnvCmd(a),
		newDockerContextCmd(a),
		newShellCmd(a),
		newDownCmd(a),
		newDestroyCmd(a),
		newPluginCmd(a),
		newVersionCmd(a),
		newConfigCmd(a),
		newMigrateCmd(a),
		newSudoersCmd(a),
		newTrustCmd(a),
	)
	return root
}

// checkHome returns a usage error when marina has no home directory
// (homeenv.Problem) and cmd needs one: all but version, help and shell
// completion, which read nothing of ~/.marina.
func checkHome(cmd *cobra.Command) error {
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

// report prints err as a command's error line ("Error: ...", nothing for
// an error with an empty message) and returns the exit status it means.
func report(err error, errw io.Writer) int {
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

// newVersionCmd is `marina version`.
func newVersionCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print marina's version, commit, build date, Go version and platform",
		GroupID: GroupSetup,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			i := buildinfo.Get()
			if output != "text" {
				return PrintStructured(a.out, output, i)
			}
			fmt.Fprintf(a.out, "marina %s\n  commit:     %s\n  built:      %s\n  go:         %s\n  platform:   %s/%s\n",
				i.Version, i.Commit, i.BuildDate, i.GoVersion, i.OS, i.Arch)
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}
