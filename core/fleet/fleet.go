// Package fleet owns Fleet manifests (apiVersion marina.dev/v1alpha1,
// kind Fleet): strict parsing, validation that reports every problem at
// once, the plan of what `marina fleet create -f` will do to each cluster,
// and the dependency-ordered scheduler that runs that plan.
//
// The flow of `fleet create -f FILE [--dry-run] [--max-parallel N] [--adopt]`:
//
//	f, err := fleet.Parse(data, "fleet.yaml")             // shape, unknown keys, types
//	err = fleet.Validate(f, fleet.ValidateContext{...})   // names, deps, cycles, slots, labels
//	p, err := fleet.Plan(f, live, fleet.PlanOptions{...}) // action and slot per cluster
//	p.Table(os.Stdout)                                    // --dry-run stops here
//	sum := fleet.Run(ctx, p, fleet.RunOptions{Create: ..., Adopt: ...})
//	sum.Write(os.Stdout); return sum.Failure()
//
// # Manifest
//
//	apiVersion: marina.dev/v1alpha1
//	kind: Fleet
//	metadata:
//	  name: demo                 # required; DNS label; nodes get marina.dev/fleet=demo
//	spec:
//	  maxParallel: 3             # optional; 0 or unset means DefaultMaxParallel (4)
//	  strategy: ContinueOnError  # FailFast (default) | ContinueOnError
//	  defaults:                  # any per-cluster option except name, num, dependsOn
//	    nodeVersion: v1.37.0
//	    labels: {team: platform}
//	  clusters:
//	  - hub                      # a bare name
//	  - name: east
//	    num: 3                   # pinned slot (1..99); unset = lowest free slot
//	    dependsOn: [hub]
//	    nodeVersion: v1.36.1     # unset = the config's kind.nodeVersion
//	    workers: 2               # worker nodes besides the control plane (0..10)
//	    region: us-east1         # unset = europe-west<N>; zone unset = <region>-b
//	    zone: us-east1-c
//	    registries: [docker-io]  # mirror names, or "all" (default), or "none" ([] = none)
//	    plugins:
//	      externaldns: {enabled: false}
//	      metallb: {config: {pool: small}}
//	    labels: {tier: edge}
//
// Defaults: for each entry a field it sets wins over spec.defaults; labels
// are merged key by key (the entry wins on a conflict); registries are
// replaced whole; plugins are merged by plugin name, and within one plugin
// `enabled` and `config` are each taken from the entry when it sets them
// (config is replaced whole, not deep-merged). A plugin that neither the
// entry nor the defaults mention keeps its setting from marina's config.
//
// # Decisions
//
//   - A live cluster that lacks marina's completion marker (LiveCluster.Complete
//     false: left half-created by an earlier failed or interrupted run) never
//     counts as existing: Plan marks it "recreate" (delete, then create) and
//     it does not satisfy its dependents until it has been created again. If
//     it carries another fleet's label, Plan refuses unless --adopt is given.
//   - A complete live cluster of this fleet is "skip": it keeps its live slot
//     (a different pinned num is ignored, with a warning) and satisfies its
//     dependents. Options in the manifest are not compared with it.
//   - A complete live cluster outside this fleet (another fleet's label, or
//     none) is "adopt" with --adopt (RunOptions.Adopt labels it), and "skip"
//     with a warning without --adopt: it is used as it is and still satisfies
//     its dependents, but is not labelled a member.
//   - Slots are fixed by Plan before anything runs, so parallel creates never
//     race for a slot: pinned nums first, then the remaining entries in
//     manifest order take the lowest free slot (slot.Allocate) around every
//     live cluster, every pinned slot and every slot already handed out. A
//     recreated cluster keeps its old slot when still free.
//   - Parallelism: --max-parallel N (N > 0) wins over spec.maxParallel, which
//     wins over DefaultMaxParallel (4). There is no "unlimited": 0 means unset.
//   - FailFast (the default): after the first failure nothing new starts,
//     running creates finish, the rest are "not-started". ContinueOnError:
//     independent branches continue; the dependents of a failed cluster are
//     "skipped" and name the dependency that failed.
//   - Cancellation: nothing new starts, running creates see the cancelled
//     context, Run returns once they have returned.
//   - Plan warns about live clusters labelled with this fleet that the
//     manifest no longer lists (left alone) and live clusters whose slot is
//     unknown (their resources cannot be reserved).
//   - In messages "a -> b" means "a depends on b".
package fleet

import (
	"sort"
	"strings"
)

// The manifest's type identity and the label that marks fleet members.
const (
	APIVersion = "marina.dev/v1alpha1"
	Kind       = "Fleet"
	// LabelFleet is the node label carrying the fleet name of a member cluster.
	LabelFleet = "marina.dev/fleet"
)

// Limits of the manifest.
const (
	// DefaultMaxParallel is how many clusters are created at once when
	// neither --max-parallel nor spec.maxParallel is set.
	DefaultMaxParallel = 4
	// MaxWorkers bounds workers per cluster: every node is a container in
	// the one VM.
	MaxWorkers = 10
	// MaxNameLength bounds cluster names: kind warns above 50 characters,
	// since node container hostnames (<name>-control-plane) must fit in 63.
	MaxNameLength = 50
)

// Strategy says what happens to the rest of the fleet when a cluster fails.
type Strategy string

// The strategies.
const (
	// FailFast starts nothing new after the first failure (the default).
	FailFast Strategy = "FailFast"
	// ContinueOnError keeps creating every cluster that does not depend on a
	// failed one.
	ContinueOnError Strategy = "ContinueOnError"
)

// Strategies lists the valid strategies.
var Strategies = []Strategy{FailFast, ContinueOnError}

// Fleet is a parsed Fleet manifest.
type Fleet struct {
	APIVersion string
	Kind       string
	Metadata   Metadata
	Spec       Spec
	// Source names where the manifest came from ("fleet.yaml", "stdin"),
	// for messages.
	Source string

	// pos maps key paths (as in Problem.Path) to where they are written.
	pos map[string]pos
}

// Metadata identifies the fleet.
type Metadata struct {
	// Name is the fleet name: a DNS label, also the value of LabelFleet.
	Name string
}

// Spec is the fleet's desired state.
type Spec struct {
	// Defaults apply to every entry (see the package doc for merge rules).
	Defaults Options
	// MaxParallel bounds concurrent creates; 0 means DefaultMaxParallel.
	MaxParallel int
	// Strategy is FailFast when empty.
	Strategy Strategy
	// Clusters are the entries in manifest order.
	Clusters []Entry
}

// Options are the per-cluster settings that spec.defaults may also set.
// Zero values mean "not set".
type Options struct {
	// NodeVersion is the kind node image version, e.g. v1.37.0.
	NodeVersion string
	// Workers is the number of worker nodes besides the control plane.
	Workers *int
	// Region and Zone become the topology labels.
	Region string
	Zone   string
	// Registries selects pull-through mirrors; nil means not set.
	Registries *Registries
	// Plugins enable, disable or configure plugins for this cluster.
	Plugins map[string]PluginSetting
	// Labels are extra node labels.
	Labels map[string]string
}

// Entry is one item of spec.clusters as written.
type Entry struct {
	Name string
	// Num pins the slot; 0 means the lowest free one, unless the manifest
	// wrote num: 0 (refused by Validate, not taken as unset).
	Num       int
	DependsOn []string
	Options

	// numSet says the manifest wrote num.
	numSet bool
}

// RegistryMode says which mirrors a cluster uses.
type RegistryMode string

// The registry modes.
const (
	RegistriesAll    RegistryMode = "all"
	RegistriesNone   RegistryMode = "none"
	RegistriesSubset RegistryMode = "subset"
)

// Registries selects the pull-through mirrors a cluster is configured with.
type Registries struct {
	Mode RegistryMode
	// Names are the mirrors of a subset, in manifest order.
	Names []string
}

// String renders the selection as in the plan: "all", "none" or "a+b".
func (r Registries) String() string {
	if r.Mode == RegistriesSubset {
		if len(r.Names) == 0 {
			return string(RegistriesNone)
		}
		return strings.Join(r.Names, "+")
	}
	if r.Mode == "" {
		return string(RegistriesAll)
	}
	return string(r.Mode)
}

// PluginSetting is one plugin's setting for a cluster.
type PluginSetting struct {
	// Enabled turns the plugin on or off for this cluster; nil keeps
	// marina's config.
	Enabled *bool
	// Config is the plugin's own settings (JSON-compatible values), checked
	// against the plugin's schema when the cluster is created; nil keeps
	// marina's config.
	Config map[string]any
}

// Cluster is an entry with spec.defaults applied.
type Cluster struct {
	Name      string
	Num       int
	DependsOn []string
	// NodeVersion is empty for the config's kind.nodeVersion.
	NodeVersion string
	Workers     int
	// Region and Zone are empty for the slot's defaults.
	Region, Zone string
	// Registries is never unset: Mode is all when nothing chose otherwise.
	Registries Registries
	Plugins    map[string]PluginSetting
	// Labels are the user's labels (defaults merged with the entry's), not
	// the ones marina adds itself.
	Labels map[string]string
}

// Clusters returns the entries with spec.defaults applied, in manifest order.
func (f *Fleet) Clusters() []Cluster {
	d := f.Spec.Defaults
	out := make([]Cluster, 0, len(f.Spec.Clusters))
	for _, e := range f.Spec.Clusters {
		c := Cluster{
			Name:        e.Name,
			Num:         e.Num,
			DependsOn:   append([]string(nil), e.DependsOn...),
			NodeVersion: first(e.NodeVersion, d.NodeVersion),
			Region:      first(e.Region, d.Region),
			Zone:        first(e.Zone, d.Zone),
			Registries:  Registries{Mode: RegistriesAll},
		}
		switch {
		case e.Workers != nil:
			c.Workers = *e.Workers
		case d.Workers != nil:
			c.Workers = *d.Workers
		}
		switch {
		case e.Registries != nil:
			c.Registries = copyRegistries(*e.Registries)
		case d.Registries != nil:
			c.Registries = copyRegistries(*d.Registries)
		}
		c.Plugins = mergePlugins(d.Plugins, e.Plugins)
		c.Labels = mergeLabels(d.Labels, e.Labels)
		out = append(out, c)
	}
	return out
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func copyRegistries(r Registries) Registries {
	r.Names = append([]string(nil), r.Names...)
	if r.Mode == "" {
		r.Mode = RegistriesAll
	}
	return r
}

func mergePlugins(def, entry map[string]PluginSetting) map[string]PluginSetting {
	if len(def) == 0 && len(entry) == 0 {
		return nil
	}
	out := make(map[string]PluginSetting, len(def)+len(entry))
	for k, v := range def {
		out[k] = v
	}
	for k, v := range entry {
		m := out[k]
		if v.Enabled != nil {
			m.Enabled = v.Enabled
		}
		if v.Config != nil {
			m.Config = v.Config
		}
		out[k] = m
	}
	return out
}

func mergeLabels(def, entry map[string]string) map[string]string {
	if len(def) == 0 && len(entry) == 0 {
		return nil
	}
	out := make(map[string]string, len(def)+len(entry))
	for k, v := range def {
		out[k] = v
	}
	for k, v := range entry {
		out[k] = v
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
