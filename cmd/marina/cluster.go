package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/lab"
)

func newClusterCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cluster",
		Aliases: []string{"cl"},
		GroupID: "lab",
		Short:   "Create, delete and list kind clusters on the lab",
	}
	cmd.AddCommand(newClusterCreateCmd(a), newClusterDeleteCmd(a), newClusterListCmd(a), newClusterLabelCmd(a))
	return cmd
}

func newClusterCreateCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var spec lab.ClusterSpec
	var labels, noPlugins []string
	var nodeVersion string
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
gets its own slot.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Name = args[0]
			if err := kind.ValidateName(spec.Name); err != nil {
				return exitcode.NewUsage(err)
			}
			lbl, err := parseLabels(labels)
			if err != nil {
				return exitcode.NewUsage(err)
			}
			if err := validateLabels(lbl); err != nil {
				return exitcode.NewUsage(err)
			}
			spec.Labels = lbl
			if nodeVersion != "" {
				spec.NodeImage = "kindest/node:" + nodeVersion
			}
			spec.Exclude = noPlugins
			lb, _, closeLab, err := a.openLab(cmd.Context())
			if err != nil {
				return err
			}
			defer closeLab()
			renderer, err := a.renderer(f)
			if err != nil {
				return err
			}
			defer renderer.Close()
			c, err := a.clusters(cmd.Context(), lb, nil)
			if err != nil {
				return err
			}
			cl, err := lb.CreateCluster(cmd.Context(), c, spec, f.options(renderer))
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
	fl.StringVar(&spec.Region, "region", "", "topology.kubernetes.io/region of the nodes (default europe-west<N>)")
	fl.StringVar(&spec.Zone, "zone", "", "topology.kubernetes.io/zone of the nodes (default <region>-b)")
	fl.StringArrayVarP(&labels, "label", "l", nil, "node label k=v (repeatable)")
	fl.StringVar(&nodeVersion, "node-version", "", "Kubernetes version of the node image (default kind.nodeVersion)")
	fl.IntVar(&spec.Workers, "workers", 0, "worker nodes besides the control plane")
	fl.IntVar(&spec.Slot, "slot", 0, "pin the slot (1-99) instead of taking the lowest free one")
	fl.StringArrayVar(&noPlugins, "no-plugin", nil, "skip this plugin's hooks for this cluster (repeatable)")
	fl.DurationVar(&spec.Wait, "wait", 5*time.Minute, "how long kind waits for the control plane")
	fl.BoolVar(&spec.Retain, "retain", false, "keep a failed cluster for debugging")
	return cmd
}

func newClusterDeleteCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var all, yes bool
	cmd := &cobra.Command{
		Use:   "delete NAME... | --all",
		Short: "Delete clusters: their plugins' cleanup (e.g. DNS records) first, then nodes and kubeconfig entries",
		Long: `Delete the named clusters. Each cluster's PreClusterDelete hooks run first (ExternalDNS's
records are removed from the local zone), then its nodes, node files, kubeconfig file and
kubeconfig entries. --all deletes every cluster and asks for confirmation on a terminal;
without one, --yes is required (exit 2 otherwise, nothing deleted).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return exitcode.NewUsage(errors.New("name the clusters to delete, or pass --all"))
			}
			for _, n := range args {
				if err := kind.ValidateName(n); err != nil {
					return exitcode.NewUsage(err)
				}
			}
			lb, _, closeLab, err := a.openLab(cmd.Context())
			if err != nil {
				return err
			}
			defer closeLab()
			c, err := a.clusters(cmd.Context(), lb, nil)
			if err != nil {
				return err
			}
			names := args
			if all {
				slots, err := c.Slots(cmd.Context())
				if err != nil {
					return err
				}
				for n := range slots {
					names = append(names, n)
				}
				slices.Sort(names)
				if len(names) == 0 {
					fmt.Fprintln(a.out, "No clusters.")
					return nil
				}
				if !yes {
					ok, err := confirm(a, fmt.Sprintf("Delete %d clusters (%s)?", len(names), strings.Join(names, ", ")))
					if err != nil {
						return err
					}
					if !ok {
						return exitcode.NewUsage(errors.New("not confirmed; nothing was deleted"))
					}
				}
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
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required for --all without a terminal)")
	return cmd
}

func newClusterListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List clusters from live state: slot, API port, nodes ready, version, fleet",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, err := a.statusLab()
			if err != nil {
				return err
			}
			c, err := a.clusters(cmd.Context(), lb, nil)
			if err != nil {
				return err
			}
			list, err := lb.ListClusters(cmd.Context(), c)
			if err != nil {
				return err
			}
			if output != "text" {
				return printStructured(a.out, output, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(a.out, "No clusters. Create one: marina cluster create NAME")
				return nil
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSLOT\tAPI\tNODES\tREADY\tVERSION\tFLEET\tSTATUS")
			for _, ci := range list {
				status := "complete"
				switch {
				case ci.Problem != "":
					status = ci.Problem
				case !ci.Complete:
					status = "incomplete (a failed create; delete it)"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", ci.Name, ci.Slot, ci.APIPort, ci.Nodes, ci.Ready, dash(ci.Version), dash(ci.Fleet), status)
			}
			return tw.Flush()
		},
	}
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
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
			if len(labels) == 0 {
				return exitcode.NewUsage(errors.New("give at least one -l k=v (set) or -l k- (remove)"))
			}
			set := map[string]string{}
			for _, l := range labels {
				if k, ok := strings.CutSuffix(l, "-"); ok && !strings.Contains(l, "=") {
					set[k] = "-"
					continue
				}
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return exitcode.NewUsage(fmt.Errorf("-l %q: use key=value to set or key- to remove", l))
				}
				set[k] = v
			}
			if errs := validateLabels(set); errs != nil {
				return exitcode.NewUsage(errs)
			}
			lb, err := a.statusLab()
			if err != nil {
				return err
			}
			c, err := a.clusters(cmd.Context(), lb, nil)
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
// (a value of "-" asks for the key's removal).
func validateLabels(labels map[string]string) error {
	var errs []error
	for k, v := range labels {
		if v == "-" {
			v = ""
		}
		if err := kind.ValidateLabel(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
