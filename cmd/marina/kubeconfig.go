package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/slot"
)

func newKubeconfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "kubeconfig",
		Aliases: []string{"kc"},
		GroupID: "lab",
		Short:   "Print, merge and remove the clusters' kubeconfigs",
		Long: fmt.Sprintf(`Every cluster has its own kubeconfig, ~/.kube/marina/NAME.kubeconfig, whose context,
cluster and user are all called NAME. Use it directly (marina kubeconfig env NAME) or
merge it into your own kubeconfig (marina kubeconfig merge|use NAME).

Merging edits the file kubectl would edit, honouring $KUBECONFIG like kubectl: an entry
that exists is updated in the file that defines it; a new entry and current-context go
to the first file of the list that exists (the last one if none does). Everything else
in your files is kept; comments are not (kubectl config drops them too). Before a
command first changes a file, its content is saved to <file>.marina.bak.<time> (UTC,
e.g. config.marina.bak.20250102T150405.000000000Z, next to the real file when <file> is
a symlink); the newest %d are kept. Writes are atomic and serialised, on the real file,
with other marina processes and with kubectl.

marina marks the entries it writes (a "marina.dev" extension). It never replaces an
entry of the same name that it did not write unless you pass --overwrite, and remove
never deletes one. What marina replaces is kept in <file>.marina.state (mode 0600): your
entries that --overwrite replaced, and the current-context before use. remove puts them
back: your entries, and the previous current-context if that context still exists.`, kubeconfig.KeepBackups),
	}
	cmd.AddCommand(
		newKubeconfigPathCmd(a),
		newKubeconfigEnvCmd(a),
		newKubeconfigMergeCmd(a, false),
		newKubeconfigMergeCmd(a, true),
		newKubeconfigRemoveCmd(a),
		newKubeconfigRefreshCmd(a),
	)
	return cmd
}

// clusterArg validates a cluster name argument (a usage error if invalid).
func clusterArg(name string) (string, error) {
	if err := kubeconfig.ValidateName(name); err != nil {
		return "", exitcode.NewUsage(err)
	}
	return name, nil
}

// clusterAndHome validates a cluster name argument and finds the home
// directory its kubeconfig lives under.
func clusterAndHome(arg string) (name, home string, err error) {
	if name, err = clusterArg(arg); err != nil {
		return "", "", err
	}
	home, err = homeDir()
	return name, home, err
}

// homeDir is the user's home directory, where ~/.kube lives.
func homeDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the home directory for ~/.kube: %w (set $HOME)", err)
	}
	return home, nil
}

// completeClusters offers the names of the clusters that have a kubeconfig.
func completeClusters(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	home, err := homeDir()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(slot.KubeconfigPath(home, "x")), "*.kubeconfig"))
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".kubeconfig"))
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// warnIfMissing tells stderr that a cluster's kubeconfig does not exist.
func warnIfMissing(w io.Writer, path, name string) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(w, "Warning: %s does not exist: cluster %q was not created yet, or was deleted\n", path, name)
	}
}

func newKubeconfigPathCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "path NAME",
		Short:             "Print the path of a cluster's kubeconfig",
		Long:              "Print ~/.kube/marina/NAME.kubeconfig, warning on stderr when the file does not exist.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeClusters,
		RunE: func(_ *cobra.Command, args []string) error {
			name, home, err := clusterAndHome(args[0])
			if err != nil {
				return err
			}
			path := slot.KubeconfigPath(home, name)
			fmt.Fprintln(a.out, path)
			warnIfMissing(a.err, path, name)
			return nil
		},
	}
}

func newKubeconfigEnvCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "env NAME",
		Short: "Print a shell line that points KUBECONFIG at a cluster's kubeconfig",
		Long: `Print "export KUBECONFIG=<path>" for a cluster's own kubeconfig, so that a shell
uses that cluster without touching ~/.kube/config:

  eval "$(marina kubeconfig env dev)"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeClusters,
		RunE: func(_ *cobra.Command, args []string) error {
			name, home, err := clusterAndHome(args[0])
			if err != nil {
				return err
			}
			path := slot.KubeconfigPath(home, name)
			fmt.Fprintf(a.out, "export KUBECONFIG=%s\n", shellQuote(path))
			warnIfMissing(a.err, path, name)
			return nil
		},
	}
}

// clusterKubeconfig returns the path of a cluster's own kubeconfig, or an
// error that says what to do when it is missing.
func clusterKubeconfig(home, name string) (string, error) {
	path := slot.KubeconfigPath(home, name)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cluster %q has no kubeconfig at %s: create the cluster first, or check the name (ls %s)", name, path, filepath.Dir(path))
	}
	return path, nil
}

func newKubeconfigMergeCmd(a *app, use bool) *cobra.Command {
	var output string
	var overwrite bool
	verb, short := "merge", "Merge a cluster's kubeconfig into yours (~/.kube/config or $KUBECONFIG)"
	long := `Merge the context, cluster and user NAME from ~/.kube/marina/NAME.kubeconfig into your
kubeconfig, where kubectl would put them (see marina kubeconfig --help). Re-running it
updates them; the current context is left as it is.`
	if use {
		verb, short = "use", "Merge a cluster's kubeconfig into yours and make it the current context"
		long = `Merge like marina kubeconfig merge NAME, and set current-context to NAME (in the file
kubectl would write it to), so that kubectl talks to the cluster. marina kubeconfig
remove NAME sets it back to the context that was current before.`
	}
	cmd := &cobra.Command{
		Use:               verb + " NAME",
		Short:             short,
		Long:              long,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, home, err := clusterAndHome(args[0])
			if err != nil {
				return err
			}
			path, err := clusterKubeconfig(home, name)
			if err != nil {
				return err
			}
			cfg, err := kubeconfig.ReadCluster(path)
			if err != nil {
				return err
			}
			target := kubeconfig.DefaultTarget(home)
			rep, err := kubeconfig.Merge(cmd.Context(), target, cfg, name, kubeconfig.MergeOptions{SetCurrent: use, Overwrite: overwrite})
			if err != nil {
				printPartial(a.err, rep)
				return err
			}
			printWarnings(a.err, rep)
			if output != "text" {
				return PrintStructured(a.out, output, rep)
			}
			if len(rep.Written) == 0 {
				fmt.Fprintf(a.out, "%q is already up to date in %s\n", name, strings.Join(target.Files, ", "))
			} else {
				fmt.Fprintf(a.out, "Merged %q into %s\n", name, strings.Join(rep.Written, ", "))
			}
			printBackups(a.out, rep)
			for _, e := range rep.Replaced {
				fmt.Fprintf(a.out, "Replaced your %s (kept in %s; marina kubeconfig remove %s puts it back)\n", e, kubeconfig.StateFile(e.File), name)
			}
			if use {
				fmt.Fprintf(a.out, "Current context: %s\n", name)
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace entries named NAME that marina did not write (kept in <file>.marina.state; remove puts them back)")
	return cmd
}

// printWarnings writes what a rewrite dropped to stderr.
func printWarnings(w io.Writer, rep kubeconfig.Report) {
	for _, m := range rep.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", m)
	}
}

// printPartial tells w which files a failed change wrote before it failed.
func printPartial(w io.Writer, rep kubeconfig.Report) {
	if len(rep.Written) > 0 {
		fmt.Fprintf(w, "Written before the error: %s\n", strings.Join(rep.Written, ", "))
		printBackups(w, rep)
	}
}

// printBackups lists the backups a change made.
func printBackups(w io.Writer, rep kubeconfig.Report) {
	for _, b := range rep.Backups {
		fmt.Fprintf(w, "Previous content saved to %s\n", b)
	}
}

func newKubeconfigRemoveCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a cluster's entries from your kubeconfig",
		Long: `Remove the context, cluster and user named exactly NAME that marina wrote from every
file of your kubeconfig (~/.kube/config or $KUBECONFIG). Your own entries called NAME that
merge --overwrite replaced are put back (from <file>.marina.state). Where current-context
names NAME, it goes back to the context that was current before marina kubeconfig use
NAME, if that context still exists, or is cleared. Entries called NAME that marina did
not write are left alone (with a warning). The cluster and its own kubeconfig are not
touched.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, home, err := clusterAndHome(args[0])
			if err != nil {
				return err
			}
			target := kubeconfig.DefaultTarget(home)
			rep, err := kubeconfig.Remove(cmd.Context(), target, name)
			if err != nil {
				printPartial(a.err, rep)
				return err
			}
			printWarnings(a.err, rep)
			for _, s := range rep.Skipped {
				fmt.Fprintf(a.err, "Warning: left %s: marina did not write it (delete it yourself with kubectl config delete-%s %s)\n", s, s.Kind, s.Name)
			}
			if output != "text" {
				return PrintStructured(a.out, output, rep)
			}
			if len(rep.Written) == 0 {
				fmt.Fprintf(a.out, "Nothing of marina's named %q in %s\n", name, strings.Join(target.Files, ", "))
				return nil
			}
			fmt.Fprintf(a.out, "Removed %q from %s\n", name, strings.Join(rep.Written, ", "))
			for _, e := range rep.Restored {
				if e.Kind == kubeconfig.KindCurrentContext {
					fmt.Fprintf(a.out, "Current context in %s: %s again\n", e.File, e.Name)
				} else {
					fmt.Fprintf(a.out, "Put back your %s\n", e)
				}
			}
			printBackups(a.out, rep)
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func newKubeconfigRefreshCmd(a *app) *cobra.Command {
	var output, server string
	cmd := &cobra.Command{
		Use:   "refresh [NAME]",
		Short: "Point clusters' kubeconfigs at their API servers' current address",
		Long: `After the VM's address changed (for instance after a restart), point NAME's kubeconfig
at the API server's current address: ~/.kube/marina/NAME.kubeconfig is rewritten, and
marina's entries for NAME in your kubeconfig are updated too if they are there
(current-context is left alone; entries you removed are not added back).

marina looks the address up itself: the cluster's slot N (from its nodes) gives the port,
7000+N, and the lab gives the host (the VM's address with lima, 127.0.0.1 with the host
driver). Without NAME, every cluster that has a kubeconfig is refreshed; leftover files
of deleted clusters and clusters without a kubeconfig are listed as skipped.

When NAME's kubeconfig is missing or unreadable, it is exported again from the cluster
(the lab must be running), named and addressed as marina cluster create writes it.

--server URL overrides the address (one NAME only); it needs no running lab when the
kubeconfig exists. Only the address changes: the API server's certificate must be valid
for it (marina's kubeconfigs on lima verify the server as "kubernetes", which is), or
kubectl reports an x509 error.`,
		Example: `  marina kubeconfig refresh            # every cluster
  marina kubeconfig refresh dev
  marina kubeconfig refresh dev --server https://192.168.105.3:7001`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			var name string
			if len(args) == 1 {
				n, err := clusterArg(args[0])
				if err != nil {
					return err
				}
				name = n
			}
			if server != "" {
				if name == "" {
					return exitcode.NewUsage(errors.New("--server overrides the address of one cluster: give its NAME, e.g. marina kubeconfig refresh dev --server https://192.168.105.3:7001 (without --server, refresh looks every cluster's address up)"))
				}
				if err := kubeconfig.ValidateServer(server); err != nil {
					return exitcode.NewUsage(fmt.Errorf("--server: %w", err))
				}
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			lb, _, _, err := a.openLab(cmd.Context(), readOnly)
			if err != nil {
				return err
			}
			var results []lab.KubeconfigRefresh
			// The process lock: cluster create and delete write and remove
			// these files; a refresh must not resurrect a deleted cluster's.
			err = a.withLock(cmd.Context(), func() error {
				c, err := a.refreshClusters(cmd, lb, home, name, server)
				if err != nil {
					return err
				}
				if name == "" {
					results, err = lb.RefreshKubeconfigs(cmd.Context(), c)
					return err
				}
				res, err := lb.RefreshKubeconfig(cmd.Context(), c, name, server)
				if err == nil {
					results = append(results, res)
				}
				return err
			})
			for _, r := range results {
				printWarnings(a.err, r.Merged)
			}
			if err != nil && len(results) == 0 {
				return err
			}
			if output != "text" {
				var v any = results
				if name != "" {
					v = results[0]
				}
				if perr := PrintStructured(a.out, output, v); perr != nil {
					return perr
				}
				return err
			}
			printRefreshes(a.out, results)
			return err
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	cmd.Flags().StringVar(&server, "server", "", "use this API server URL instead of looking it up, e.g. https://192.168.105.3:7001 (with one NAME)")
	return cmd
}

// refreshClusters returns what a refresh needs: the running lab's clusters,
// or, when --server gives the address of a cluster whose kubeconfig can be
// read, only the kubeconfig files (no lab needed).
func (a *app) refreshClusters(cmd *cobra.Command, lb *lab.Lab, home, name, server string) (*lab.Clusters, error) {
	path := slot.KubeconfigPath(home, name)
	if server != "" {
		if _, err := kubeconfig.ReadCluster(path); err == nil {
			target := kubeconfig.DefaultTarget(home)
			return &lab.Clusters{Home: home, Target: &target}, nil
		}
	}
	c, err := lb.OpenClusters(cmd.Context())
	if err != nil && name != "" {
		if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("cluster %q has no kubeconfig at %s, and the lab cannot export it again: %w", name, path, err)
		}
	}
	return c, err
}

// printRefreshes writes what refresh did, one cluster per line.
func printRefreshes(w io.Writer, results []lab.KubeconfigRefresh) {
	for _, r := range results {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(w, "Skipped %s: %s\n", r.Name, r.Skipped)
			continue
		case r.Server == "":
			continue // failed: the error says why
		case r.Exported:
			fmt.Fprintf(w, "%s exported again from the cluster, pointing at %s\n", r.Kubeconfig, r.Server)
		default:
			fmt.Fprintf(w, "%s now points at %s\n", r.Kubeconfig, r.Server)
		}
		if len(r.Merged.Written) > 0 {
			fmt.Fprintf(w, "Updated %q in %s\n", r.Name, strings.Join(r.Merged.Written, ", "))
			printBackups(w, r.Merged)
		}
	}
}
