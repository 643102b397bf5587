package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/buildinfo"
	"github.com/bcollard/marina/core/config"
)

// NewVersionCmd is `marina version`.
func NewVersionCmd(out io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print marina's version, commit, build date, Go version and platform",
		GroupID: GroupSetup,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			i := buildinfo.Get()
			if output != "text" {
				return PrintStructured(out, output, i)
			}
			fmt.Fprintf(out, "marina %s\n  commit:     %s\n  built:      %s\n  go:         %s\n  platform:   %s/%s\n",
				i.Version, i.Commit, i.BuildDate, i.GoVersion, i.OS, i.Arch)
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// NewConfigCmd is `marina config`, without its subcommands.
func NewConfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "config",
		Short:   "Show, check, create and edit marina's configuration",
		GroupID: GroupSetup,
		Long: `marina reads ~/.marina/config.yaml (or --config, or $MARINA_CONFIG), then MARINA_*
environment variables, then --set key=value flags; later layers win.
See docs/config.md for every key.`,
	}
}

// NewConfigPathCmd is `marina config path`.
func NewConfigPathCmd(out, errw io.Writer, g *Global) *cobra.Command {
	return &cobra.Command{
		Use:   "path",
		Short: "Print the path of the config file marina reads",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, _, err := config.ResolvePath(g.ConfigPath, "")
			if err != nil {
				return err
			}
			fmt.Fprintln(out, path)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(errw, "note: %s does not exist yet; defaults apply (create it with `marina config init`)\n", path)
			}
			return nil
		},
	}
}

// NewConfigViewCmd is `marina config view`.
func NewConfigViewCmd(out, errw io.Writer, g *Global) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Show the effective configuration and where each value came from",
		Long: `Show the effective configuration. Each value is annotated with its source: default,
file (with line), env (the MARINA_* variable) or flag (--set). Secrets are redacted.
-o json|yaml prints a list of {key, value, source}.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			l, err := LoadConfig(g, errw)
			if err != nil {
				return err
			}
			if output != "annotated" {
				return PrintStructured(out, output, l.Entries())
			}
			b, err := l.AnnotatedYAML()
			if err != nil {
				return err
			}
			if l.FileExists {
				fmt.Fprintf(out, "# effective configuration (file: %s)\n", l.Path)
			} else {
				fmt.Fprintf(out, "# effective configuration (no file at %s: defaults)\n", l.Path)
			}
			_, err = out.Write(b)
			return err
		},
	}
	OutputFlag(cmd, &output, "annotated", "annotated", "json", "yaml")
	return cmd
}

// NewStatusCmd is `marina status`; run does the work with the -o value
// (the front's run answers only for a machine that is certainly not
// running, and returns ErrHandOver otherwise).
func NewStatusCmd(run func(cmd *cobra.Command, output string) error) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "status",
		Aliases: []string{"st"},
		GroupID: GroupLab,
		Short:   "Show the machine, the bridge network and the services marina runs",
		Long: `Show the lab's state without changing anything: the machine (VM or this host's Docker),
the shared bridge network (and whether it matches the config), and every service
container marina's plugins run (registry mirrors, the local DNS pair, ...).

Exit status is 0 when the status could be read, whatever it says; use
marina doctor for a pass/fail check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd, output) },
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// NewPluginCmd is `marina plugin`, without its subcommands.
func NewPluginCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "plugin",
		Short:   "List, install, select and write plugins",
		GroupID: GroupPlugins,
		Long: `Plugins are separate programs marina runs over gRPC at lifecycle hooks (PostUp,
PreCluster, PostCluster, PreClusterDelete, PreDown, PreDestroy). Installed plugins live in
~/.marina/plugins/<name>/<version>/, several versions side by side; the config selects one
with plugins.<name>.version (a semver constraint) and ~/.marina/plugins.lock records the
choice and the binary's sha256, checked before every launch. See docs/plugins.md.`,
	}
}
