package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bcollard/marina/core/fleet"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/core/suggest"
	"github.com/bcollard/marina/sdk/kube"
)

// Fleet membership is live state, never a state file: a cluster is a
// member of fleet F when its nodes carry LabelFleet=F (the marker
// ConfigMap's "fleet" key says the same, and answers for a cluster without
// nodes). SetFleet writes both.

// FleetInfo is one row of `marina fleet list`.
type FleetInfo struct {
	Name string `json:"name"`
	// Clusters are the members, in name order.
	Clusters []string `json:"clusters"`
	// Complete counts the members with the completion marker; the others
	// were left half-created by a failed run.
	Complete int `json:"complete"`
	// Nodes and Ready count the members' nodes and the ready ones.
	Nodes int `json:"nodes"`
	Ready int `json:"ready"`
	// Slots are the members' slots, ascending.
	Slots []int `json:"slots"`
}

// Fleets groups clusters (from ListClusters) by fleet, in name order;
// clusters in no fleet are left out.
func Fleets(infos []ClusterInfo) []FleetInfo {
	by := map[string]*FleetInfo{}
	for _, ci := range infos {
		if ci.Fleet == "" {
			continue
		}
		fi := by[ci.Fleet]
		if fi == nil {
			fi = &FleetInfo{Name: ci.Fleet, Clusters: []string{}, Slots: []int{}}
			by[ci.Fleet] = fi
		}
		fi.Clusters = append(fi.Clusters, ci.Name)
		if ci.Complete {
			fi.Complete++
		}
		fi.Nodes += ci.Nodes
		fi.Ready += ci.Ready
		fi.Slots = append(fi.Slots, ci.Slot)
	}
	out := make([]FleetInfo, 0, len(by))
	for _, name := range sortedKeys(by) {
		fi := by[name]
		sort.Strings(fi.Clusters)
		sort.Ints(fi.Slots)
		out = append(out, *fi)
	}
	return out
}

// Members returns the clusters of fleet name, in name order.
func Members(infos []ClusterInfo, name string) []ClusterInfo {
	var out []ClusterInfo
	for _, ci := range infos {
		if ci.Fleet == name && name != "" {
			out = append(out, ci)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Unreadable returns the clusters whose state could not be read: their
// fleet is unknown, so fleet commands can neither count nor change them.
func Unreadable(infos []ClusterInfo) []ClusterInfo {
	var out []ClusterInfo
	for _, ci := range infos {
		if ci.Problem != "" {
			out = append(out, ci)
		}
	}
	return out
}

// LiveState is infos as the fleet planner sees them.
func LiveState(infos []ClusterInfo) fleet.LiveState {
	live := fleet.LiveState{Clusters: make(map[string]fleet.LiveCluster, len(infos))}
	for _, ci := range infos {
		live.Clusters[ci.Name] = fleet.LiveCluster{Slot: ci.Slot, Complete: ci.Complete, Fleet: ci.Fleet}
	}
	return live
}

// NoFleetError says that no live cluster belongs to a fleet.
type NoFleetError struct {
	Name string
	// Known are the fleets that exist.
	Known []string
}

func (e *NoFleetError) Error() string {
	msg := fmt.Sprintf("no fleet named %q", e.Name)
	if s := suggest.Closest(e.Name, e.Known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + ": no cluster is labelled " + LabelFleet + "=" + e.Name + "; see marina fleet list"
}

// FleetMembers reads every cluster's live state and returns the members of
// fleet name (in name order) and every cluster. A fleet without members is
// a *NoFleetError.
func (l *Lab) FleetMembers(ctx context.Context, c *Clusters, name string) (members, all []ClusterInfo, err error) {
	all, err = l.ListClusters(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	members = Members(all, name)
	if len(members) == 0 {
		var known []string
		for _, fi := range Fleets(all) {
			known = append(known, fi.Name)
		}
		return nil, all, &NoFleetError{Name: name, Known: known}
	}
	return members, all, nil
}

// CheckFleetNodeLabels refuses labels that `fleet label` must not touch:
// LabelFleet (membership changes through fleet adopt, which also keeps
// the marker in step) and the rest of marina.dev/, which marina sets
// itself. Label syntax is the caller's to check.
func CheckFleetNodeLabels(labels map[string]string) error {
	var errs []error
	for _, k := range sortedKeys(labels) {
		prefix, _, found := strings.Cut(k, "/")
		switch {
		case k == LabelFleet:
			errs = append(errs, fmt.Errorf("label %s names the fleet and cannot be set with fleet label: move a cluster with marina fleet adopt FLEET CLUSTER --force", k))
		case found && (prefix == "marina.dev" || strings.HasSuffix(prefix, ".marina.dev")):
			errs = append(errs, fmt.Errorf("label %s is reserved: marina sets marina.dev/ labels itself; use your own prefix, e.g. example.com/", k))
		}
	}
	return errors.Join(errs...)
}

// LabelFleetNodes sets labels on every node of every member of fleet name
// (a value of "-" removes the key), like LabelNodes does for one cluster.
// It refuses what CheckFleetNodeLabels refuses before changing anything.
// It returns the members it labelled; the errors of several members are
// joined, each naming its cluster.
func (l *Lab) LabelFleetNodes(ctx context.Context, c *Clusters, name string, labels map[string]string) ([]string, error) {
	if err := CheckFleetNodeLabels(labels); err != nil {
		return nil, err
	}
	if len(labels) == 0 {
		return nil, errors.New("no labels to set or remove")
	}
	members, _, err := l.FleetMembers(ctx, c, name)
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, m := range members {
		if err := l.LabelNodes(ctx, c, m.Name, labels); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", m.Name, err))
			continue
		}
		done = append(done, m.Name)
	}
	return done, errors.Join(errs...)
}

// SetFleet makes cluster a member of fleet (fleet "" takes it out of any
// fleet): it sets the completion marker's "fleet" key, then LabelFleet on
// every node. It checks nothing beyond the marker's existence — a cluster
// without it is half-created and is refused — so callers decide who may
// be moved (AdoptClusters, or the fleet create plan for --adopt).
func (l *Lab) SetFleet(ctx context.Context, c *Clusters, cluster, fleetName string) error {
	b, err := os.ReadFile(slot.KubeconfigPath(c.Home, cluster))
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	dyn, err := clientFor(b)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{"fleet": fleetName}})
	_, err = kube.NewTyped[corev1.ConfigMap](dyn, kube.ConfigMaps, "kube-system").Patch(ctx, MarkerConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("cluster %s has no completion marker (kube-system/%s): it is a half-created cluster; delete or recreate it (marina cluster delete %s)", cluster, MarkerConfigMap, cluster)
	case err != nil:
		return fmt.Errorf("cluster %s: set the fleet in kube-system/%s: %w", cluster, MarkerConfigMap, err)
	}
	value := fleetName
	if value == "" {
		value = "-"
	}
	return labelNodes(ctx, b, cluster, map[string]string{LabelFleet: value})
}

// AdoptOptions tune AdoptClusters.
type AdoptOptions struct {
	// Force moves clusters that belong to another fleet.
	Force bool
	// SkipMissing reports clusters that do not exist (outcome
	// AdoptMissing) instead of refusing them: adopting a manifest's
	// clusters, some of which fleet create has not made yet.
	SkipMissing bool
}

// The outcomes of AdoptClusters.
const (
	// AdoptAdopted: the cluster was in no fleet and is now a member.
	AdoptAdopted = "adopted"
	// AdoptMoved: the cluster was moved from another fleet (Force).
	AdoptMoved = "moved"
	// AdoptMember: the cluster was a member already; nothing changed.
	AdoptMember = "member"
	// AdoptMissing: no such cluster (SkipMissing).
	AdoptMissing = "missing"
)

// AdoptResult is what AdoptClusters did to one cluster.
type AdoptResult struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	// From is the fleet a moved cluster left.
	From string `json:"from,omitempty"`
}

// AdoptClusters makes existing complete clusters members of fleetName
// (SetFleet). It checks every cluster first and changes nothing when one
// is refused: a cluster that does not exist (unless SkipMissing), one whose
// state cannot be read, a half-created one (no completion marker), or one
// that belongs to another fleet (unless Force). Members already are left
// alone. Results follow names' order; the errors of refused clusters are
// joined.
func (l *Lab) AdoptClusters(ctx context.Context, c *Clusters, fleetName string, names []string, opts AdoptOptions) ([]AdoptResult, error) {
	if fleetName == "" {
		return nil, errors.New("adopt: no fleet name")
	}
	infos, err := l.ListClusters(ctx, c)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]ClusterInfo, len(infos))
	var existing []string
	for _, ci := range infos {
		byName[ci.Name] = ci
		existing = append(existing, ci.Name)
	}
	results := make([]AdoptResult, 0, len(names))
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		ci, ok := byName[n]
		res := AdoptResult{Name: n}
		switch {
		case !ok && opts.SkipMissing:
			res.Outcome = AdoptMissing
		case !ok:
			hint := ""
			if s := suggest.Closest(n, existing); s != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", s)
			}
			errs = append(errs, fmt.Errorf("no cluster named %s%s; see marina cluster list", n, hint))
		case ci.Problem != "":
			errs = append(errs, fmt.Errorf("cluster %s cannot be read (%s); fix it or delete it (marina cluster delete %s)", n, ci.Problem, n))
		case !ci.Complete:
			errs = append(errs, fmt.Errorf("cluster %s is a half-created cluster (left by a failed create, no completion marker); delete or recreate it (marina cluster delete %s)", n, n))
		case ci.Fleet == fleetName:
			res.Outcome = AdoptMember
		case ci.Fleet != "" && !opts.Force:
			errs = append(errs, fmt.Errorf("cluster %s belongs to fleet %s; move it with --force", n, ci.Fleet))
		case ci.Fleet != "":
			res.Outcome, res.From = AdoptMoved, ci.Fleet
		default:
			res.Outcome = AdoptAdopted
		}
		results = append(results, res)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("nothing was adopted:\n%w", errors.Join(errs...))
	}
	for i, r := range results {
		if r.Outcome != AdoptAdopted && r.Outcome != AdoptMoved {
			continue
		}
		if err := l.SetFleet(ctx, c, r.Name, fleetName); err != nil {
			// Those before it were adopted: report them.
			return results[:i], err
		}
	}
	return results, nil
}

// FleetDeletion is what DeleteFleet will do, fixed before it starts (and
// before the user confirms it).
type FleetDeletion struct {
	Fleet string
	// Order is the members in the order they are deleted (dependents
	// first, see fleet.DeleteOrder).
	Order []string
	// Dependents are, per member, the members that depend on it: it is
	// kept when one of them could not be deleted.
	Dependents map[string][]string
}

// PlanFleetDelete returns the deletion of fleet name's members, ordered by
// the dependsOn of manifest f (nil: reverse name order). A fleet without
// members is a *NoFleetError.
func (l *Lab) PlanFleetDelete(ctx context.Context, c *Clusters, name string, f *fleet.Fleet) (*FleetDeletion, error) {
	members, _, err := l.FleetMembers(ctx, c, name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name
	}
	order, deps := fleet.DeleteOrder(f, names)
	return &FleetDeletion{Fleet: name, Order: order, Dependents: deps}, nil
}

// DeleteFleet deletes the members of d in order with DeleteCluster. After a
// failure it goes on with the others, but keeps every member that a member
// which could not be deleted depends on. It stops starting deletes when
// ctx ends. It returns the members deleted; the errors (one per failed or
// kept member, each naming its cluster) are joined.
func (l *Lab) DeleteFleet(ctx context.Context, c *Clusters, d *FleetDeletion, opts lifecycle.Options) ([]string, error) {
	failed := map[string]bool{}
	var deleted []string
	var errs []error
	for _, n := range d.Order {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("fleet %s: stopped before deleting %s: %w", d.Fleet, n, err))
			break
		}
		var blockers []string
		for _, dep := range d.Dependents[n] {
			if failed[dep] {
				blockers = append(blockers, dep)
			}
		}
		if len(blockers) > 0 {
			failed[n] = true
			errs = append(errs, fmt.Errorf("cluster %s: kept, because %s (which depends on it) could not be deleted; fix that and run marina fleet delete %s again", n, strings.Join(blockers, ", "), d.Fleet))
			continue
		}
		if err := l.DeleteCluster(ctx, c, n, opts); err != nil {
			failed[n] = true
			errs = append(errs, fmt.Errorf("cluster %s: %w", n, err))
			continue
		}
		deleted = append(deleted, n)
	}
	return deleted, errors.Join(errs...)
}
