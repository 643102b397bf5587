package main

// The fleet commands besides create: list, describe, label, delete, adopt.
// Membership is live state (node label marina.dev/fleet and the completion
// marker's fleet key); the logic lives in core/lab (fleetops.go) and
// core/fleet (DeleteOrder, Compare).

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/fleet"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/lab"
)

func newFleetListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List fleets from live state: members, complete ones, ready nodes, slots",
		Long: `List the fleets of the lab. A cluster belongs to fleet F when its nodes carry the label
marina.dev/fleet=F; nothing is read from a state file. COMPLETE counts the members that
carry marina's completion marker (the others were left half-created by a failed run);
READY is ready nodes / all nodes of the members.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, c, err := a.labClusters(cmd.Context())
			if err != nil {
				return err
			}
			infos, err := lb.ListClusters(cmd.Context(), c)
			if err != nil {
				return err
			}
			fleetWarnUnreadable(a, infos)
			return writeFleetList(a.out, output, lab.Fleets(infos))
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// writeFleetList renders `fleet list`.
func writeFleetList(w io.Writer, format string, fleets []lab.FleetInfo) error {
	if format != "text" {
		if fleets == nil {
			fleets = []lab.FleetInfo{}
		}
		return PrintStructured(w, format, fleets)
	}
	if len(fleets) == 0 {
		_, err := fmt.Fprintln(w, "No fleets. Create one: marina fleet create -f FILE")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLEET\tCLUSTERS\tCOMPLETE\tREADY\tSLOTS")
	for _, f := range fleets {
		slots := make([]string, len(f.Slots))
		for i, n := range f.Slots {
			slots[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d/%d\t%s\n", f.Name, len(f.Clusters), f.Complete, f.Ready, f.Nodes, strings.Join(slots, ","))
	}
	return tw.Flush()
}

// fleetWarnUnreadable tells, on stderr, which clusters fleet commands cannot
// see: their fleet label could not be read.
func fleetWarnUnreadable(a *app, infos []lab.ClusterInfo) {
	for _, ci := range lab.Unreadable(infos) {
		fmt.Fprintf(a.err, "Warning: cluster %s cannot be read (%s): its fleet is unknown, fleet commands leave it out; see marina cluster list\n", ci.Name, ci.Problem)
	}
}

// fleetDescription is `fleet describe -o json|yaml`.
type fleetDescription struct {
	Name    string            `json:"name"`
	Members []lab.ClusterInfo `json:"members"`
	// Manifest is the comparison with -f.
	Manifest *fleetComparison `json:"manifest,omitempty"`
}

// fleetComparison is how the lab differs from the manifest given with -f.
type fleetComparison struct {
	Source string `json:"source"`
	InSync bool   `json:"inSync"`
	fleet.Drift
}

func newFleetDescribeCmd(a *app) *cobra.Command {
	var output, file string
	cmd := &cobra.Command{
		Use:   "describe NAME [-f FILE]",
		Short: "Show a fleet's members; with -f, how the lab differs from the manifest",
		Long: `Show every member of the fleet: slot, API port, nodes, ready nodes, version and status
(complete, or half-created by a failed run). With -f FILE (NAME may then be left out)
the lab is also compared with the manifest: clusters missing from the lab, half-created
ones, clusters of the manifest outside the fleet, members the manifest does not list,
and members whose slot is not the num the manifest pins.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lb, _, _, err := a.openLab(cmd.Context(), readOnly)
			if err != nil {
				return err
			}
			f, err := loadFleetManifest(a, file, lb.Config)
			if err != nil {
				return err
			}
			name, err := fleetName(args, f)
			if err != nil {
				return err
			}
			c, err := lb.OpenClusters(cmd.Context())
			if err != nil {
				return err
			}
			members, all, err := lb.FleetMembers(cmd.Context(), c, name)
			fleetWarnUnreadable(a, all)
			if err != nil {
				if f != nil {
					return fmt.Errorf("%w; create it: marina fleet create -f %s", err, file)
				}
				return err
			}
			desc := fleetDescription{Name: name, Members: members}
			if f != nil {
				d := fleet.Compare(f, lab.LiveState(all))
				desc.Manifest = &fleetComparison{Source: f.Source, InSync: d.InSync(), Drift: d}
			}
			return writeFleetDescription(a.out, output, desc, file)
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "compare with this Fleet manifest (- for stdin)")
	return cmd
}

// writeFleetDescription renders `fleet describe`; file is -f as given, for
// the commands it suggests.
func writeFleetDescription(w io.Writer, format string, d fleetDescription, file string) error {
	if format != "text" {
		if d.Members == nil {
			d.Members = []lab.ClusterInfo{}
		}
		return PrintStructured(w, format, d)
	}
	complete, nodes, ready := 0, 0, 0
	for _, m := range d.Members {
		if m.Complete {
			complete++
		}
		nodes += m.Nodes
		ready += m.Ready
	}
	fmt.Fprintf(w, "Fleet %s: %d clusters (%d complete), %d/%d nodes ready\n", d.Name, len(d.Members), complete, ready, nodes)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSLOT\tAPI\tNODES\tREADY\tVERSION\tSTATUS")
	for _, m := range d.Members {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", m.Name, m.Slot, m.APIPort, m.Nodes, m.Ready, Dash(m.Version), fleetMemberStatus(m))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d.Manifest == nil {
		return nil
	}
	m := d.Manifest
	if m.InSync {
		_, err := fmt.Fprintf(w, "\nCompared with %s: in sync.\n", m.Source)
		return err
	}
	if file == "" || file == "-" {
		file = "FILE"
	}
	fmt.Fprintf(w, "\nCompared with %s:\n", m.Source)
	for _, n := range m.Missing {
		fmt.Fprintf(w, "  %s: missing from the lab (marina fleet create -f %s creates it)\n", n, file)
	}
	for _, n := range m.Incomplete {
		fmt.Fprintf(w, "  %s: half-created by a failed run, not counted as existing (marina fleet create -f %s recreates it)\n", n, file)
	}
	for _, o := range m.NotMembers {
		if o.Fleet == "" {
			fmt.Fprintf(w, "  %s: exists but is in no fleet (marina fleet adopt %s %s)\n", o.Name, d.Name, o.Name)
		} else {
			fmt.Fprintf(w, "  %s: exists but belongs to fleet %s (marina fleet adopt %s %s --force)\n", o.Name, o.Fleet, d.Name, o.Name)
		}
	}
	for _, n := range m.NotInManifest {
		fmt.Fprintf(w, "  %s: a member the manifest does not list (fleet create leaves it alone; marina cluster delete %s removes it)\n", n, n)
	}
	for _, s := range m.SlotMismatch {
		fmt.Fprintf(w, "  %s: runs in slot %d, the manifest pins num %d (fleet create keeps the live slot; delete the cluster and re-run to move it)\n", s.Name, s.Slot, s.Num)
	}
	return nil
}

// fleetMemberStatus is the STATUS column of a member.
func fleetMemberStatus(ci lab.ClusterInfo) string {
	switch {
	case ci.Problem != "":
		return ci.Problem
	case !ci.Complete:
		return "incomplete (a failed create; delete or recreate it)"
	}
	return "complete"
}

func newFleetLabelCmd(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "label NAME -l k=v|k- ...",
		Short: "Set (k=v) or remove (k-) labels on every node of every member of a fleet",
		Long: `Set or remove node labels on every node of every member of the fleet, with the same
rules as marina cluster label. The fleet label itself (marina.dev/fleet) is not changed
this way: marina fleet adopt moves clusters between fleets and keeps the completion
marker in step; other marina.dev/ labels are marina's own.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFleetName(args[0]); err != nil {
				return err
			}
			set, err := fleetLabelEdits(labels)
			if err != nil {
				return err
			}
			return a.withLock(cmd.Context(), func() error {
				lb, c, err := a.labClusters(cmd.Context())
				if err != nil {
					return err
				}
				done, err := lb.LabelFleetNodes(cmd.Context(), c, args[0], set)
				if len(done) > 0 {
					fmt.Fprintf(a.out, "fleet %s: labelled the nodes of %s\n", args[0], strings.Join(done, ", "))
				}
				return err
			})
		},
	}
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "k=v to set, k- to remove (repeatable)")
	return cmd
}

// fleetLabelEdits is labelEdits plus the fleet rule: no marina.dev/ keys.
func fleetLabelEdits(labels []string) (map[string]string, error) {
	set, err := labelEdits(labels)
	if err != nil {
		return nil, err
	}
	if err := lab.CheckFleetNodeLabels(set); err != nil {
		return nil, exitcode.NewUsage(err)
	}
	return set, nil
}

func newFleetDeleteCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var file string
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete NAME [-f FILE] [--yes]",
		Short: "Delete every member of a fleet, dependents before their dependencies",
		Long: `Delete every member of the fleet like marina cluster delete does: plugins' cleanup (e.g.
DNS records) first, then nodes, node files and kubeconfig entries. With -f FILE (NAME
may then be left out) the manifest's dependsOn orders the deletes: a cluster goes
before the clusters it depends on; without it, the order is reverse name order. When a
member cannot be deleted, the others still are, except those it depends on.

Asks for confirmation on a terminal; without one, --yes is required (exit 2 otherwise,
nothing deleted). --dry-run prints the order and deletes nothing.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes && !f.dryRun && terminalInput(a) == nil {
				return exitcode.NewUsage(errors.New("no terminal to confirm on: pass --yes to delete the fleet's clusters; nothing was deleted"))
			}
			return a.withLock(cmd.Context(), func() error {
				lb, _, closeLab, err := a.openLab(cmd.Context(), withPlugins)
				if err != nil {
					return err
				}
				defer closeLab()
				m, err := loadFleetManifest(a, file, lb.Config)
				if err != nil {
					return err
				}
				name, err := fleetName(args, m)
				if err != nil {
					return err
				}
				c, err := lb.OpenClusters(cmd.Context())
				if err != nil {
					return err
				}
				d, err := lb.PlanFleetDelete(cmd.Context(), c, name, m)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.out, "fleet %s: %d clusters to delete, in this order: %s\n", name, len(d.Order), strings.Join(d.Order, ", "))
				if f.dryRun {
					return nil
				}
				if !yes {
					ok, err := confirm(a, fmt.Sprintf("Delete the %d clusters of fleet %s?", len(d.Order), name))
					if err != nil {
						return err
					}
					if !ok {
						return exitcode.NewUsage(errors.New("not confirmed; nothing was deleted"))
					}
				}
				r, err := a.renderer(f)
				if err != nil {
					return err
				}
				defer r.Close()
				deleted, err := lb.DeleteFleet(cmd.Context(), c, d, f.options(r))
				fmt.Fprintf(a.out, "fleet %s: deleted %d of %d clusters\n", name, len(deleted), len(d.Order))
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&file, "filename", "f", "", "Fleet manifest whose dependsOn orders the deletes (- for stdin)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required without a terminal)")
	return cmd
}

func newFleetAdoptCmd(a *app) *cobra.Command {
	var file string
	var force bool
	cmd := &cobra.Command{
		Use:   "adopt NAME CLUSTER... | adopt -f FILE",
		Short: "Make existing complete clusters members of a fleet",
		Long: `Make existing clusters members of the fleet: their nodes get the label
marina.dev/fleet=NAME and their completion marker the fleet's name. With -f FILE the
clusters are those of the manifest that exist (the others are reported; marina fleet
create -f FILE makes them). Every cluster is checked first and nothing changes when one
is refused: a cluster that does not exist, a half-created one (left by a failed create;
delete or recreate it), or one of another fleet (unless --force moves it).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			switch {
			case file != "" && len(args) > 1:
				return exitcode.NewUsage(errors.New("with -f the clusters come from the manifest: name no clusters"))
			case file == "" && len(args) < 2:
				return exitcode.NewUsage(errors.New("name the fleet and the clusters to adopt (adopt NAME CLUSTER...), or give the manifest (adopt -f FILE)"))
			case file == "":
				names = args[1:]
				for _, n := range names {
					if err := kind.ValidateName(n); err != nil {
						return exitcode.NewUsage(err)
					}
				}
			}
			if len(args) > 0 {
				if err := checkFleetName(args[0]); err != nil {
					return err
				}
			}
			return a.withLock(cmd.Context(), func() error {
				lb, _, _, err := a.openLab(cmd.Context(), readOnly)
				if err != nil {
					return err
				}
				m, err := loadFleetManifest(a, file, lb.Config)
				if err != nil {
					return err
				}
				name, err := fleetName(args[:min(len(args), 1)], m)
				if err != nil {
					return err
				}
				if m != nil {
					for _, e := range m.Spec.Clusters {
						names = append(names, e.Name)
					}
				}
				c, err := lb.OpenClusters(cmd.Context())
				if err != nil {
					return err
				}
				res, err := lb.AdoptClusters(cmd.Context(), c, name, names, lab.AdoptOptions{Force: force, SkipMissing: m != nil})
				for _, r := range res {
					switch r.Outcome {
					case lab.AdoptAdopted:
						fmt.Fprintf(a.out, "%s: adopted into fleet %s\n", r.Name, name)
					case lab.AdoptMoved:
						fmt.Fprintf(a.out, "%s: moved from fleet %s to fleet %s\n", r.Name, r.From, name)
					case lab.AdoptMember:
						fmt.Fprintf(a.out, "%s: already a member of fleet %s\n", r.Name, name)
					case lab.AdoptMissing:
						fmt.Fprintf(a.out, "%s: not in the lab (marina fleet create -f %s creates it)\n", r.Name, file)
					}
				}
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "adopt the clusters of this Fleet manifest that exist (- for stdin)")
	cmd.Flags().BoolVar(&force, "force", false, "move clusters that belong to another fleet")
	return cmd
}

// checkFleetName checks a fleet name given on the command line: fleet
// names are DNS labels (metadata.name of a manifest).
func checkFleetName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return exitcode.NewUsage(fmt.Errorf("fleet name %q is not a DNS label (%s); see marina fleet list", name, strings.Join(errs, "; ")))
	}
	return nil
}

// fleetName is the fleet a command works on: NAME, or the manifest's
// metadata.name; both must agree when both are given.
func fleetName(args []string, f *fleet.Fleet) (string, error) {
	switch {
	case len(args) == 0 && f == nil:
		return "", exitcode.NewUsage(errors.New("name the fleet (see marina fleet list), or give its manifest with -f FILE"))
	case len(args) == 0:
		return f.Metadata.Name, nil
	}
	if err := checkFleetName(args[0]); err != nil {
		return "", err
	}
	if f != nil && f.Metadata.Name != args[0] {
		return "", exitcode.NewUsage(fmt.Errorf("the manifest %s is fleet %q, not %q; drop NAME or give that fleet's manifest", f.Source, f.Metadata.Name, args[0]))
	}
	return args[0], nil
}

// loadFleetManifest reads, parses and validates -f FILE against marina's
// config (mirrors, plugins, bridge), as fleet create does. No file is a nil
// fleet; a bad manifest is a usage error.
func loadFleetManifest(a *app, file string, cfg *config.Config) (*fleet.Fleet, error) {
	if file == "" {
		return nil, nil
	}
	data, source, err := readManifest(a, file)
	if err != nil {
		return nil, err
	}
	f, err := fleet.Parse(data, source)
	if err != nil {
		return nil, exitcode.NewUsage(err)
	}
	bridge, err := netip.ParsePrefix(cfg.Network.BridgeCIDR)
	if err != nil {
		return nil, fmt.Errorf("network.bridgeCIDR %q: %w; fix marina's config (marina config edit)", cfg.Network.BridgeCIDR, err)
	}
	vctx := fleet.ValidateContext{Bridge: bridge, KnownPlugins: knownPlugins(cfg)}
	for _, m := range cfg.Registries.Mirrors {
		vctx.KnownMirrors = append(vctx.KnownMirrors, m.Name)
	}
	if err := fleet.Validate(f, vctx); err != nil {
		return nil, exitcode.NewUsage(err)
	}
	return f, nil
}
