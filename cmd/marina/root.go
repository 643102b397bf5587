package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

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

// globalOptions are the flags every command accepts.
type globalOptions struct {
	configPath string
	sets       []string
	debug      bool
	noWait     bool
}

// app is what every command gets: its streams, global flags and logger.
type app struct {
	*streams
	global globalOptions
	log    *slog.Logger
	runLog runLog
}

// loadConfig reads and validates the effective configuration, printing
// warnings (e.g. stray MARINA_* variables) to stderr.
func (a *app) loadConfig() (*config.Loaded, error) {
	l, err := config.Load(config.LoadOptions{Path: a.global.configPath, Sets: a.global.sets})
	if l != nil {
		for _, w := range l.Warnings {
			fmt.Fprintf(a.err, "Warning: %s\n", w)
		}
	}
	return l, err
}

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
			if a.global.debug {
				level = slog.LevelDebug
			}
			a.log = slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: level}))
			if homeenv.Derived != "" {
				a.log.Debug("HOME was not set; using the home directory of the user database", "home", homeenv.Derived)
			}
			if homeenv.Problem != "" && !needsNoHome(cmd) {
				return exitcode.NewUsage(errors.New(homeenv.Problem))
			}
			return nil
		},
		PersistentPostRun: func(*cobra.Command, []string) { a.runLog.close() },
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.NewUsage(err) })

	pf := root.PersistentFlags()
	pf.StringVarP(&a.global.configPath, "config", "c", "", "config file (default $MARINA_CONFIG or ~/.marina/config.yaml)")
	pf.StringArrayVar(&a.global.sets, "set", nil, "override a config key for this run, e.g. --set vm.cpus=6 (repeatable; highest precedence)")
	pf.BoolVar(&a.global.debug, "debug", false, "show debug logs")
	pf.BoolVar(&a.global.noWait, "no-wait", false, "fail at once if another marina process is changing state, instead of waiting for it")

	root.AddGroup(&cobra.Group{ID: "lab", Title: "The lab:"}, &cobra.Group{ID: "plugins", Title: "Plugins:"}, &cobra.Group{ID: "setup", Title: "Configuration and information:"})
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
	)
	root.SetHelpCommandGroupID("setup")
	root.SetCompletionCommandGroupID("setup")
	return root
}

// needsNoHome reports whether cmd works without a home directory: version,
// help and shell completion read nothing of ~/.marina.
func needsNoHome(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "version", "help", "completion", "__complete", "__completeNoDesc":
			return true
		}
	}
	return false
}
