package main

import (
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/cli"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/homeenv"
)

// streams are the standard streams a command uses (swapped in tests).
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// app is what every command gets: its streams, global flags and logger.
type app struct {
	*streams
	global cli.Global
	log    *slog.Logger
	runLog runLog
}

// loadConfig reads and validates the effective configuration, printing
// warnings (e.g. stray MARINA_* variables) to stderr.
func (a *app) loadConfig() (*config.Loaded, error) {
	return cli.LoadConfig(&a.global, a.err)
}

func newRootCmd(s *streams) *cobra.Command {
	a := &app{streams: s}
	root := cli.NewRoot(s.in, s.out, s.err, &a.global)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		level := slog.LevelInfo
		if a.global.Debug {
			level = slog.LevelDebug
		}
		a.log = slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: level}))
		if homeenv.Derived != "" {
			a.log.Debug("HOME was not set; using the home directory of the user database", "home", homeenv.Derived)
		}
		return cli.CheckHome(cmd)
	}
	root.PersistentPostRun = func(*cobra.Command, []string) { a.runLog.close() }
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
		cli.NewVersionCmd(a.out),
		newConfigCmd(a),
		newMigrateCmd(a),
		newSudoersCmd(a),
	)
	return root
}
