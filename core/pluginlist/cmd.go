package pluginlist

import (
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/cli"
)

// NewCmd is `marina plugin list`; rows makes its rows and the problems
// (one line each) that make it exit 1. The front's rows returns
// cli.ErrHandOver for a plugin set it cannot list for certain.
func NewCmd(out io.Writer, rows func() ([]Row, []string, error)) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List built-in and installed plugins with their versions, hooks and status",
		Long: `List every built-in plugin and every installed version: NAME, VERSION, SOURCE (long
ones shortened to their end), the number of HOOKS and STATUS, then below the table each
detail (why a plugin cannot run, what to run about it). -o wide adds PROTOCOL, the HOOKS by
name and DEPENDS (? marks an optional dependency), and shows SOURCE whole and the details
in the STATUS column; -o json and -o yaml give every field; marina plugin info NAME shows
one plugin in full.

STATUS is active (enabled and selected by the config's version constraint), installed
(another version is selected, or the plugin is not enabled), disabled, unavailable (enabled
but cannot run: not installed, no version matches, or a plugin it requires is disabled or
cannot run), modified (the binary no longer has the sha256 recorded at install or pinned
in the lock file: it will not be launched), lock unreadable (the lock file
~/.marina/plugins.lock cannot be read, so no installed plugin can be checked and run) or
shadowed (installed under the name of a built-in, which always wins). Exit status 1 when
any binary is modified or the lock file is unreadable. It reads the store's manifests,
hashes the installed binaries and starts no plugin. Like every command that resolves the
plugins, it first pins in the lock file the versions the config selects, when they changed.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			list, problems, err := rows()
			if err != nil {
				return err
			}
			if output == "json" || output == "yaml" {
				if err := cli.PrintStructured(out, output, list); err != nil {
					return err
				}
			} else if err := WriteTable(out, list, output == "wide"); err != nil {
				return err
			}
			if len(problems) > 0 {
				return errors.New(strings.Join(problems, "\n"))
			}
			return nil
		},
	}
	cli.OutputFlag(cmd, &output, "text", "text", "wide", "json", "yaml")
	return cmd
}
