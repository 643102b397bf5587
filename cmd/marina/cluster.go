package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/fleet"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/core/suggest"
)

func newClusterCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cluster",
		Aliases: []string{"cl"},
		GroupID: "lab",
		Short:   "Create, delete, list, label and check kind clusters on the lab",
	}
	cmd.AddCommand(newClusterCreateCmd(a), newClusterDeleteCmd(a), newClusterListCmd(a), newClusterLabelCmd(a), newClusterE2ECmd(a))
	return cmd
}

func newClusterCreateCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var spec lab.ClusterSpec
	var labels, noPlugins, onlyPlugins []string
	var nodeVersion, nodeImage string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a kind cluster on its own slot, with every enabled plugin's hooks",
		Long: `Create a kind cluster. The lowest free slot N (or --slot) fixes its API port (7000+N),
service and pod subnets and MetalLB pool; PreCluster hooks contribute to the kind config
(registry mirrors, ...), PostCluster hooks install into the cluster (MetalLB, CoreDNS
forwarding, ExternalDNS). The kubeconfig is written to ~/.kube/marina/NAME.kubeconfig and
merged into your kubeconfig when kind.autoMergeKubeconfig is set.

A failed create leaves nothing behind (nodes, node files, kubeconfig entries, DNS
records), unless --retain keeps it for debugging. Several creates may run at once: each
gets its own slot.

Every enabled plugin's hooks run for the cluster; --plugins NAME,... runs only those,
--no-plugin NAME skips one (the two do not mix).`,
		Example: `  marina cluster create dev
  marina cluster create eu --region europe-west1 --zone europe-west1-c -l team=a --workers 2
  marina cluster create bare --plugins registries,coredns`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Name = args[0]
			// Before anything runs (config, plugins, lock, slot, docker), --dry-run too.
			lbl, err := checkCreateFlags(cmd.Flags(), spec, nodeVersion, nodeImage, labels, onlyPlugins, noPlugins)
			if err != nil {
				return err
			}
			spec.Labels = lbl
			spec.NodeImage = nodeImage
			if nodeVersion != "" {
				spec.NodeImage = "kindest/node:" + nodeVersion
			}
			lb, l, closeLab, err := a.openLab(cmd.Context(), withPlugins)
			if err != nil {
				return err
			}
			defer closeLab()
			if spec.Exclude, err = pluginExclusions(knownPlugins(l.Config), onlyPlugins, noPlugins); err != nil {
				return exitcode.NewUsage(err)
			}
			renderer, err := a.renderer(f)
			if err != nil {
				return err
			}
			defer renderer.Close()
			c, err := lb.OpenClusters(cmd.Context())
			if err != nil {
				return err
			}
			cl, err := lb.CreateCluster(cmd.Context(), c, spec, f.options(renderer))
			for _, w := range lb.Warnings() {
				fmt.Fprintf(a.err, "Warning: %s\n", w)
			}
			if err != nil {
				return err
			}
			if !f.dryRun && f.output != "json" && cl != nil {
				fmt.Fprintf(a.out, "\nCluster %s is ready: slot %d, API https://…:%d\n  export KUBECONFIG=%s\n", cl.Name, cl.Slot, cl.APIPort, cl.KubeconfigPath)
			}
			return nil
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	const labelValue = "a label value: at most 63 letters, digits, '-', '_', '.'"
	fl.StringVar(&spec.Region, "region", "", "topology.kubernetes.io/region of the nodes, "+labelValue+" (default europe-west<N>)")
	fl.StringVar(&spec.Zone, "zone", "", "topology.kubernetes.io/zone of the nodes, "+labelValue+" (default <region>-b)")
	fl.StringArrayVarP(&labels, "label", "l", nil, "node label k=v (repeatable)")
	fl.StringVar(&nodeVersion, "node-version", "", "Kubernetes version of the node image, a kindest/node tag such as v1.37.0 (default kind.nodeVersion)")
	fl.StringVar(&nodeImage, "node-image", "", "the kind node image, e.g. one built locally (default images.kindNode; not with --node-version)")
	fl.IntVar(&spec.Workers, "workers", 0, fmt.Sprintf("worker nodes besides the control plane (0-%d)", fleet.MaxWorkers))
	fl.IntVar(&spec.Slot, "slot", 0, fmt.Sprintf("pin the slot (%d-%d) instead of taking the lowest free one", slot.Min, slot.Max))
	fl.StringArrayVar(&noPlugins, "no-plugin", nil, "skip this plugin's hooks for this cluster (repeatable)")
	fl.StringSliceVar(&onlyPlugins, "plugins", nil, "run only these plugins' hooks for this cluster (comma-separated)")
	fl.DurationVar(&spec.Wait, "wait", 5*time.Minute, "how long kind waits for the control plane (more than 0)")
	fl.BoolVar(&spec.Retain, "retain", false, "keep a failed cluster for debugging")
	return cmd
}

// createFlagOf names the flag of each of fleet.CheckSettings' settings.
var createFlagOf = map[string]string{
	fleet.SettingNum:         "--slot",
	fleet.SettingNodeVersion: "--node-version",
	fleet.SettingWorkers:     "--workers",
	fleet.SettingRegion:      "--region",
	fleet.SettingZone:        "--zone",
	fleet.SettingWait:        "--wait",
}

// checkCreateFlags checks the name and flags of `cluster create` with no lab
// at hand: the name, the settings a Fleet manifest's entry also gives (by
// the manifest's rules, fleet.CheckSettings), the labels and the plugin
// selection's form. It returns the labels, or a usage error listing every
// problem, each naming its flag. A pinned slot is checked when --slot is
// given (--slot 0 is refused, as num: 0 is in a manifest).
func checkCreateFlags(fl *pflag.FlagSet, spec lab.ClusterSpec, nodeVersion, nodeImage string, labels, only, skip []string) (map[string]string, error) {
	var errs []error
	if err := kind.ValidateName(spec.Name); err != nil {
		errs = append(errs, err)
	}
	switch {
	case nodeImage != "" && nodeVersion != "":
		errs = append(errs, errors.New("--node-image and --node-version do not mix: give the image, or the kindest/node version"))
	case fl.Changed("node-image") && !config.IsImageRef(nodeImage):
		errs = append(errs, fmt.Errorf("--node-image %q is not an image reference; write it like kindest/node:v1.37.0 or registry.example.com/team/node:v1.37.0", nodeImage))
	}
	s := fleet.Settings{NodeVersion: nodeVersion, Workers: &spec.Workers, Region: spec.Region, Zone: spec.Zone, Wait: &spec.Wait}
	if fl.Changed("slot") {
		s.Num = &spec.Slot
	}
	for _, p := range fleet.CheckSettings(s) {
		errs = append(errs, fmt.Errorf("%s: %s", createFlagOf[p.Path], p.Message))
	}
	lbl, err := parseLabels(labels)
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, e := range labelProblems(lbl) {
			errs = append(errs, fmt.Errorf("--label: %w", e))
		}
	}
	if len(only) > 0 && len(skip) > 0 {
		errs = append(errs, errors.New("--plugins and --no-plugin do not mix: list the plugins to run, or the ones to skip"))
	}
	return lbl, usageProblems(errs)
}

// usageProblems is nil, the one problem, or every problem one per line
// under a count; a usage error (exit 2) either way.
func usageProblems(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return exitcode.NewUsage(errs[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems with the command line; nothing was done:", len(errs))
	for _, e := range errs {
		b.WriteString("\n  " + e.Error())
	}
	return exitcode.NewUsage(errors.New(b.String()))
}

func newClusterDeleteCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var all, yes, force bool
	var selector string
	cmd := &cobra.Command{
		Use:     "delete [NAME... | -l SELECTOR | --all]",
		Aliases: []string{"rm"},
		Short:   "Delete clusters: their plugins' cleanup (e.g. DNS records) first, then nodes and kubeconfig entries",
		Long: `Delete clusters. Each cluster's PreClusterDelete hooks run first (ExternalDNS's records
are removed from the local zone), then its nodes, node files, kubeconfig file and
kubeconfig entries. A failing PreClusterDelete hook stops that cluster's delete before
anything is removed (fix the cause and run it again); --force deletes it anyway and
reports the hook's error as a warning.

Say which clusters in exactly one way:
  NAME...         the named clusters (all must exist, or nothing is deleted)
  -l SELECTOR     the clusters whose control-plane labels match a Kubernetes label
                  selector (team=a, 'env in (dev,qa)', '!keep'), as marina cluster list -l shows
  --all           every cluster
  (nothing)       on a terminal, pick from a numbered list ("1 3", "2-4", "all")

-l, --all and picking ask for confirmation on a terminal unless --yes. Without a
terminal, -l and --all need --yes, and picking is not possible: the command exits with
status 2 and deletes nothing.`,
		Example: `  marina cluster delete dev qa
  marina cluster delete -l marina.dev/fleet=demo --yes
  marina cluster delete           # pick on the terminal`,
		ValidArgsFunction: completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			form, err := deleteFormOf(args, selector, cmd.Flags().Changed("selector"), all)
			if err != nil {
				return err
			}
			for _, n := range args {
				if err := kind.ValidateName(n); err != nil {
					return exitcode.NewUsage(err)
				}
			}
			sel, err := parseSelector(selector)
			if err != nil {
				return err
			}
			if form == deleteSelector && sel.Empty() {
				return exitcode.NewUsage(fmt.Errorf("-l/--selector %q selects every cluster: say --all if you mean it", selector))
			}
			tty := terminalInput(a)
			if err := checkCanAsk(form, yes, tty != nil); err != nil {
				return err
			}
			lb, _, closeLab, err := a.openLab(cmd.Context(), withPlugins)
			if err != nil {
				return err
			}
			defer closeLab()
			c, err := lb.OpenClusters(cmd.Context())
			if err != nil {
				return err
			}
			c.ForceDelete = force
			req := deleteRequest{form: form, names: args, sel: sel, selector: selector, tty: tty, yes: yes}
			names, err := a.clustersToDelete(cmd.Context(), lb, c, req)
			if err != nil || len(names) == 0 {
				return err
			}
			renderer, err := a.renderer(f)
			if err != nil {
				return err
			}
			defer renderer.Close()
			var errs []error
			for _, n := range names {
				if err := lb.DeleteCluster(cmd.Context(), c, n, f.options(renderer)); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", n, err))
				}
			}
			return errors.Join(errs...)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "delete every cluster")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "delete the clusters whose labels match this label selector (e.g. team=a)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required for --all and -l without a terminal)")
	cmd.Flags().BoolVar(&force, "force", false, "delete even when a plugin's PreClusterDelete hook fails (its error becomes a warning; what it made may be left behind)")
	return cmd
}

// deleteRequest is what `cluster delete` was asked to delete.
type deleteRequest struct {
	form deleteForm
	// names are the clusters named on the command line.
	names []string
	// sel is -l parsed; selector is -l as given (for messages).
	sel      labels.Selector
	selector string
	// tty reads the terminal; nil without one.
	tty *bufio.Reader
	yes bool
}

// clustersToDelete resolves req to cluster names, asking on the terminal
// where req's form calls for it. An empty result with a nil error means
// there is nothing to do (and it was said).
func (a *app) clustersToDelete(ctx context.Context, lb *lab.Lab, c *lab.Clusters, req deleteRequest) ([]string, error) {
	var names []string
	switch req.form {
	case deleteNames:
		live, err := c.Slots(ctx)
		if err != nil {
			return nil, err
		}
		if unknown := unknownClusters(req.names, live); len(unknown) > 0 {
			return nil, errUnknownClusters(unknown)
		}
		for _, n := range req.names {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		return names, nil // named on the command line: no question
	case deleteAll:
		live, err := c.Slots(ctx)
		if err != nil {
			return nil, err
		}
		for n := range live {
			names = append(names, n)
		}
		slices.Sort(names)
		if len(names) == 0 {
			fmt.Fprintln(a.out, "No clusters.")
			return nil, nil
		}
	case deleteSelector, deletePick:
		list, err := lb.ListClusters(ctx, c)
		if err != nil {
			return nil, err
		}
		matched, unread := lab.SelectClusters(list, req.sel)
		warnUnread(a, unread)
		if len(matched) == 0 {
			if req.form == deletePick {
				fmt.Fprintln(a.out, "No clusters.")
			} else {
				fmt.Fprintf(a.out, "No clusters match -l %s; nothing was deleted.\n", req.selector)
			}
			return nil, nil
		}
		if req.form == deletePick {
			matched, err = pickClusters(req.tty, a.err, "delete", matched)
			if errors.Is(err, errPickCancelled) {
				return nil, exitcode.NewUsage(errors.New("cancelled; nothing was deleted"))
			}
			if err != nil {
				return nil, exitcode.NewUsage(fmt.Errorf("%w; nothing was deleted", err))
			}
		}
		for _, ci := range matched {
			names = append(names, ci.Name)
		}
	}
	if req.yes {
		return names, nil
	}
	noun := "clusters"
	if len(names) == 1 {
		noun = "cluster"
	}
	if !confirmOn(req.tty, a.err, fmt.Sprintf("Delete %d %s (%s)?", len(names), noun, strings.Join(names, ", "))) {
		return nil, exitcode.NewUsage(errors.New("not confirmed; nothing was deleted"))
	}
	return names, nil
}

// parseSelector parses the -l/--selector flag with Kubernetes' label
// selector syntax (a usage error naming the flag when invalid).
func parseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, exitcode.NewUsage(fmt.Errorf("-l/--selector %q: %w (e.g. -l team=a, -l 'env in (dev,qa)', -l '!keep')", s, err))
	}
	return sel, nil
}

// warnUnread tells stderr which clusters could not be read, so no selector
// matched them.
func warnUnread(a *app, unread []string) {
	if len(unread) > 0 {
		fmt.Fprintf(a.err, "Warning: the labels of %s could not be read (see marina cluster list), so -l did not match them\n", strings.Join(unread, ", "))
	}
}

func newClusterListCmd(a *app) *cobra.Command {
	var output, selector string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List clusters from live state: slot, API port, nodes ready, version, fleet, age",
		Long: `List the clusters from live state: their nodes' containers (slot, API port) and each
cluster's API (nodes, readiness, version, control-plane labels, fleet, completion).
Clusters are read concurrently, each for at most a few seconds. A STATUS column appears
when a cluster could not be read or was left incomplete by a failed create.

-l filters by the control-plane node's labels with Kubernetes' label selector syntax;
-o json|yaml include each cluster's labels and createdAt.`,
		Example: `  marina cluster list
  marina cluster list -l marina.dev/fleet=demo
  marina cluster list -l 'topology.kubernetes.io/region in (europe-west1,europe-west2)' -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := parseSelector(selector)
			if err != nil {
				return err
			}
			lb, c, err := a.labClusters(cmd.Context())
			if err != nil {
				return err
			}
			list, err := lb.ListClusters(cmd.Context(), c)
			if err != nil {
				return err
			}
			list, unread := lab.SelectClusters(list, sel)
			warnUnread(a, unread)
			if output != "text" {
				return PrintStructured(a.out, output, list)
			}
			if len(list) == 0 {
				if !sel.Empty() {
					fmt.Fprintf(a.out, "No clusters match -l %s.\n", selector)
					return nil
				}
				fmt.Fprintln(a.out, "No clusters. Create one: marina cluster create NAME")
				return nil
			}
			return printClusterTable(a.out, list)
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only the clusters whose labels match this label selector (e.g. team=a, 'env in (dev,qa)')")
	return cmd
}

// printClusterTable writes the clusters as `cluster list` shows them: a
// STATUS column only when one of them is unreadable or incomplete.
func printClusterTable(w io.Writer, list []lab.ClusterInfo) error {
	withStatus := false
	for _, ci := range list {
		if clusterStatus(ci) != "" {
			withStatus = true
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tSLOT\tAPI\tNODES\tREADY\tVERSION\tFLEET\tAGE"
	if withStatus {
		header += "\tSTATUS"
	}
	fmt.Fprintln(tw, header)
	for _, ci := range list {
		line := fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s", ci.Name, ci.Slot, ci.APIPort, ci.Nodes, ci.Ready, Dash(ci.Version), Dash(ci.Fleet), Dash(ci.Age))
		if withStatus {
			line += "\t" + Dash(clusterStatus(ci))
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// clusterStatus is what is wrong with a cluster ("" when nothing is).
func clusterStatus(ci lab.ClusterInfo) string {
	switch {
	case ci.Problem != "":
		return ci.Problem
	case !ci.Complete:
		return "incomplete (a failed create; delete it: marina cluster delete " + ci.Name + ")"
	}
	return ""
}

// parseLabels parses k=v pairs.
func parseLabels(in []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range in {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: use key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func newClusterLabelCmd(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "label NAME -l k=v|k- ...",
		Short: "Set (k=v) or remove (k-) labels on every node of a cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kind.ValidateName(args[0]); err != nil {
				return exitcode.NewUsage(err)
			}
			set, err := labelEdits(labels)
			if err != nil {
				return err
			}
			lb, c, err := a.labClusters(cmd.Context())
			if err != nil {
				return err
			}
			return lb.LabelNodes(cmd.Context(), c, args[0], set)
		},
	}
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "k=v to set, k- to remove (repeatable)")
	return cmd
}

// validateLabels checks label keys and values with Kubernetes' own rules

// labelEdits parses -l k=v (set) and -l k- (remove) into LabelNodes' form
// ("-" removes) and checks their Kubernetes syntax; usage errors name the
// flag.
func labelEdits(labels []string) (map[string]string, error) {
	if len(labels) == 0 {
		return nil, exitcode.NewUsage(errors.New("give at least one -l k=v (set) or -l k- (remove)"))
	}
	set := map[string]string{}
	for _, l := range labels {
		if k, ok := strings.CutSuffix(l, "-"); ok && !strings.Contains(l, "=") {
			set[k] = "-"
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, exitcode.NewUsage(fmt.Errorf("-l %q: use key=value to set or key- to remove", l))
		}
		set[k] = v
	}
	if err := errors.Join(labelProblems(set)...); err != nil {
		return nil, exitcode.NewUsage(err)
	}
	return set, nil
}

// labelProblems checks each label by Kubernetes' rules (kind.ValidateLabel),
// one error per bad label (a value of "-" asks for the key's removal).
func labelProblems(labels map[string]string) []error {
	var errs []error
	for k, v := range labels {
		if v == "-" {
			v = ""
		}
		if err := kind.ValidateLabel(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// pluginExclusions turns --plugins (only) or --no-plugin (skip) into the
// plugins whose hooks do not run; every name must be a known plugin.
func pluginExclusions(known, only, skip []string) ([]string, error) {
	var errs []error
	for _, flag := range []struct {
		name  string
		names []string
	}{{"--plugins", only}, {"--no-plugin", skip}} {
		for _, n := range flag.names {
			if slices.Contains(known, n) {
				continue
			}
			hint := ""
			if best := suggest.Closest(n, known); best != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", best)
			}
			errs = append(errs, fmt.Errorf("%s %q: no such plugin%s; plugins: %s", flag.name, n, hint, strings.Join(known, ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(only) == 0 {
		return skip, nil
	}
	var exclude []string
	for _, n := range known {
		if !slices.Contains(only, n) {
			exclude = append(exclude, n)
		}
	}
	return exclude, nil
}
