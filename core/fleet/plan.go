package fleet

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/slot"
)

// Action is what `fleet create` does to one cluster.
type Action string

// The actions.
const (
	// ActionCreate creates a cluster that does not exist.
	ActionCreate Action = "create"
	// ActionSkip leaves a complete live cluster as it is; it satisfies its
	// dependents.
	ActionSkip Action = "skip"
	// ActionAdopt labels a complete live cluster from outside the fleet as
	// a member (--adopt); it satisfies its dependents.
	ActionAdopt Action = "adopt"
	// ActionRecreate deletes a half-created cluster (no completion marker)
	// and creates it again.
	ActionRecreate Action = "recreate"
)

// LiveCluster is what marina reads from a live cluster (its node labels
// and docker labels, never a state file).
type LiveCluster struct {
	// Slot is the cluster's slot (label marina.dev/slot); 0 when unknown.
	Slot int
	// Complete is true once the cluster carries marina's completion
	// marker, which the core sets as the last step of a successful create.
	Complete bool
	// Fleet is the value of LabelFleet; "" when the cluster is in no fleet
	// (or too broken to tell).
	Fleet string
}

// LiveState is every live cluster marina manages, by name.
type LiveState struct {
	Clusters map[string]LiveCluster
}

// PlanOptions tune Plan.
type PlanOptions struct {
	// Adopt makes complete clusters from outside the fleet members (and
	// allows recreating a half-created cluster labelled with another fleet).
	Adopt bool
	// MaxParallel (> 0) overrides spec.maxParallel (--max-parallel).
	MaxParallel int
	// Bridge is the docker bridge slots are derived on; the zero value
	// means 172.30.0.0/16.
	Bridge netip.Prefix
	// BusyPorts are the API host ports (7001..7099) something other than
	// the lab's clusters holds on the Docker host, with the holder: no
	// cluster is planned on such a slot.
	BusyPorts map[int]string
}

// PlannedCluster is one cluster of a plan: the merged entry, its slot and
// what will be done to it.
type PlannedCluster struct {
	Cluster
	// Fleet is the fleet name, the value of LabelFleet for this cluster.
	Fleet string
	// Slot is the slot the cluster runs in (skip, adopt) or will be
	// created in (create, recreate); 0 only for a live cluster whose slot
	// is unknown.
	Slot   int
	Action Action
	// Reason explains skip, adopt and recreate.
	Reason string
}

// FleetPlan is what `fleet create` will do, fixed before anything runs.
type FleetPlan struct {
	Fleet  string
	Source string
	// Strategy and MaxParallel are the effective values (defaults applied).
	Strategy    Strategy
	MaxParallel int
	// Clusters are in manifest order.
	Clusters []PlannedCluster
	// Warnings are things the user should know before confirming.
	Warnings []string
}

// Plan decides the action and slot of every cluster of a validated fleet
// against the live clusters (see the package doc for the rules). It fails
// with an *Error when the dependency graph is broken (so a cycle is
// rejected before anything runs), when a pinned num collides with a live
// cluster, when slots run out, or when a half-created cluster belongs to
// another fleet and opts.Adopt is false.
func Plan(f *Fleet, live LiveState, opts PlanOptions) (*FleetPlan, error) {
	if f == nil {
		return nil, &Error{Stage: "plan", Problems: []Problem{{Path: "(document)", Message: "no fleet to plan"}}}
	}
	ps := &problems{pos: f.pos}
	clusters := f.Clusters()
	names := make([]string, len(clusters))
	deps := make([][]string, len(clusters))
	for i, c := range clusters {
		names[i], deps[i] = c.Name, c.DependsOn
	}
	buildGraph(names, deps, ps.add)
	if err := ps.err(f.Source, "plan"); err != nil {
		return nil, err
	}
	bridge := opts.Bridge
	if !bridge.IsValid() {
		bridge = netip.MustParsePrefix(config.DefaultBridgeCIDR)
	}
	if _, err := slot.DockerIPRange(bridge); err != nil {
		return nil, &Error{Source: f.Source, Stage: "plan", Problems: []Problem{{Path: "(document)", Message: err.Error() + "; fix network.bridgeCIDR in marina's config"}}}
	}

	p := &FleetPlan{
		Fleet:       f.Metadata.Name,
		Source:      f.Source,
		Strategy:    f.Spec.Strategy,
		MaxParallel: f.Spec.MaxParallel,
		Clusters:    make([]PlannedCluster, len(clusters)),
	}
	if p.Strategy == "" {
		p.Strategy = FailFast
	}
	if opts.MaxParallel > 0 {
		p.MaxParallel = opts.MaxParallel
	}
	if p.MaxParallel <= 0 {
		p.MaxParallel = DefaultMaxParallel
	}

	inManifest := make(map[string]bool, len(clusters))
	for i, c := range clusters {
		inManifest[c.Name] = true
		pc := PlannedCluster{Cluster: c, Fleet: f.Metadata.Name, Action: ActionCreate}
		l, exists := live.Clusters[c.Name]
		switch {
		case !exists:
		case !l.Complete && l.Fleet != "" && l.Fleet != p.Fleet && !opts.Adopt:
			ps.add(fmt.Sprintf("spec.clusters[%d].name", i), "cluster %q exists half-created by fleet %q; delete it (marina cluster delete %s) or re-run with --adopt to recreate it as a member of %q", c.Name, l.Fleet, c.Name, p.Fleet)
		case !l.Complete:
			pc.Action = ActionRecreate
			pc.Reason = "left half-created by an earlier run (no completion marker): deleted and created again"
		case l.Fleet == p.Fleet:
			pc.Action, pc.Slot = ActionSkip, l.Slot
			pc.Reason = "exists, member of this fleet"
		case opts.Adopt:
			pc.Action, pc.Slot = ActionAdopt, l.Slot
			pc.Reason = "exists " + owner(l.Fleet) + ": labelled " + LabelFleet + "=" + p.Fleet
		default:
			pc.Action, pc.Slot = ActionSkip, l.Slot
			pc.Reason = "exists " + owner(l.Fleet) + ": used as is, not made a member"
			p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s exists %s: it is used as is (options of the manifest are not applied) and not labelled as a member; re-run with --adopt to make it a member of %s", c.Name, owner(l.Fleet), p.Fleet))
		}
		if (pc.Action == ActionSkip || pc.Action == ActionAdopt) && c.Num != 0 && c.Num != l.Slot {
			p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s: num %d ignored, the live cluster runs in slot %s; delete it and re-run to move it", c.Name, c.Num, slotText(l.Slot)))
		}
		p.Clusters[i] = pc
	}

	for _, name := range sortedKeys(live.Clusters) {
		if l := live.Clusters[name]; !inManifest[name] && l.Fleet != "" && l.Fleet == p.Fleet {
			p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s is a member of fleet %s but not in the manifest: fleet create leaves it alone (marina cluster delete %s removes it)", name, p.Fleet, name))
		}
	}

	// Slots of every live cluster are taken, including half-created ones
	// (they hold their resources until deleted).
	var liveTaken []int
	liveSlotOf := map[string]int{}
	for _, name := range sortedKeys(live.Clusters) {
		l := live.Clusters[name]
		switch {
		case l.Slot >= slot.Min && l.Slot <= slot.Max:
			liveTaken = append(liveTaken, l.Slot)
			liveSlotOf[name] = l.Slot
		case inManifest[name] && !l.Complete:
			// recreated: no resources to keep clear of that we know of
		default:
			p.Warnings = append(p.Warnings, fmt.Sprintf("live cluster %s has no readable slot (label %s): its resources are not reserved; check it with marina cluster list", name, slot.LabelSlot))
		}
	}
	assigned := make([]int, 0, len(clusters))
	takenFor := func(i int) []int {
		own := 0
		if p.Clusters[i].Action == ActionRecreate {
			own = liveSlotOf[p.Clusters[i].Name]
		}
		t := make([]int, 0, len(liveTaken)+len(assigned))
		dropped := false
		for _, n := range liveTaken {
			if n == own && !dropped { // the recreated cluster frees its own slot
				dropped = true
				continue
			}
			t = append(t, n)
		}
		return append(t, assigned...)
	}
	exhausted := false
	allocate := func(i, pinned int) {
		pc := &p.Clusters[i]
		path := fmt.Sprintf("spec.clusters[%d].num", i)
		if exhausted && pinned == 0 {
			ps.add(path, "%v: no slot is left for cluster %s; delete a cluster first or remove it from the manifest", slot.ErrExhausted, pc.Name)
			return
		}
		n, err := slot.Allocate(bridge, takenFor(i), opts.BusyPorts, pinned)
		if err != nil {
			if errors.Is(err, slot.ErrExhausted) {
				exhausted = true
			}
			ps.add(path, "cluster %s: %v", pc.Name, err)
			return
		}
		pc.Slot = n
		assigned = append(assigned, n)
	}
	needsSlot := func(pc PlannedCluster) bool {
		return pc.Action == ActionCreate || pc.Action == ActionRecreate
	}
	for i, pc := range p.Clusters { // pinned first, so no auto slot takes them
		if needsSlot(pc) && pc.Num != 0 {
			allocate(i, pc.Num)
		}
	}
	for i, pc := range p.Clusters {
		if !needsSlot(pc) || pc.Num != 0 {
			continue
		}
		if old := liveSlotOf[pc.Name]; pc.Action == ActionRecreate && old != 0 {
			if n, err := slot.Allocate(bridge, takenFor(i), opts.BusyPorts, old); err == nil {
				p.Clusters[i].Slot = n
				assigned = append(assigned, n)
				continue
			}
		}
		allocate(i, 0)
	}
	if err := ps.err(f.Source, "plan"); err != nil {
		return nil, err
	}
	return p, nil
}

func owner(fleet string) string {
	if fleet == "" {
		return "outside any fleet"
	}
	return "in fleet " + fleet
}

func slotText(n int) string {
	if n == 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

// Count returns how many clusters have action a.
func (p *FleetPlan) Count(a Action) int {
	n := 0
	for _, c := range p.Clusters {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Table writes the plan for humans:
//
//	fleet demo: 3 clusters (2 create, 1 skip), strategy FailFast, max parallel 4
//	NAME  SLOT  ACTION  DEPENDS-ON  OPTIONS
//	hub   1     skip    -           mirrors=all
//	...
//
// followed by one line per reason and warning.
func (p *FleetPlan) Table(w io.Writer) error {
	var counts []string
	for _, a := range []Action{ActionCreate, ActionRecreate, ActionAdopt, ActionSkip} {
		if n := p.Count(a); n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, a))
		}
	}
	noun := "clusters"
	if len(p.Clusters) == 1 {
		noun = "cluster"
	}
	what := ""
	if len(counts) > 0 {
		what = " (" + strings.Join(counts, ", ") + ")"
	}
	if _, err := fmt.Fprintf(w, "fleet %s: %d %s%s, strategy %s, max parallel %d\n", p.Fleet, len(p.Clusters), noun, what, p.Strategy, p.MaxParallel); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSLOT\tACTION\tDEPENDS-ON\tOPTIONS")
	for _, c := range p.Clusters {
		deps := "-"
		if len(c.DependsOn) > 0 {
			deps = strings.Join(c.DependsOn, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, slotText(c.Slot), c.Action, deps, c.Options())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range p.Clusters {
		if c.Reason != "" {
			if _, err := fmt.Fprintf(w, "%s: %s: %s\n", c.Name, c.Action, c.Reason); err != nil {
				return err
			}
		}
	}
	for _, warn := range p.Warnings {
		if _, err := fmt.Fprintf(w, "warning: %s\n", warn); err != nil {
			return err
		}
	}
	return nil
}

// Options renders the cluster's options as in the plan's OPTIONS column:
// node=, workers=, region=, zone= when set; mirrors= always; plugins= as
// +name (enabled), -name (disabled), name(config) when configured; labels=.
func (c Cluster) Options() string {
	var parts []string
	if c.NodeVersion != "" {
		parts = append(parts, "node="+c.NodeVersion)
	}
	if c.Workers > 0 {
		parts = append(parts, "workers="+strconv.Itoa(c.Workers))
	}
	if c.Region != "" {
		parts = append(parts, "region="+c.Region)
	}
	if c.Zone != "" {
		parts = append(parts, "zone="+c.Zone)
	}
	parts = append(parts, "mirrors="+c.Registries.String())
	if len(c.Plugins) > 0 {
		var ps []string
		for _, name := range sortedKeys(c.Plugins) {
			s := c.Plugins[name]
			p := name
			if s.Enabled != nil {
				if *s.Enabled {
					p = "+" + name
				} else {
					p = "-" + name
				}
			}
			if s.Config != nil {
				p += "(config)"
			}
			ps = append(ps, p)
		}
		parts = append(parts, "plugins="+strings.Join(ps, ","))
	}
	if len(c.Labels) > 0 {
		var ls []string
		for _, k := range sortedKeys(c.Labels) {
			ls = append(ls, k+"="+c.Labels[k])
		}
		parts = append(parts, "labels="+strings.Join(ls, ","))
	}
	return strings.Join(parts, " ")
}
