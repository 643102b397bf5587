package fleet

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/slot"
)

// ValidateContext is what Validate checks a manifest against.
type ValidateContext struct {
	// KnownMirrors are the mirror names of marina's config
	// (registries.mirrors[].name). A manifest may only select these; an
	// empty list means no mirror is known.
	KnownMirrors []string
	// KnownPlugins are the plugins marina can run (built-in and
	// installed); an empty list means none is known.
	KnownPlugins []string
	// Bridge is the shared docker bridge (network.bridgeCIDR); the zero
	// value means the default, 172.30.0.0/16.
	Bridge netip.Prefix
}

// Validate checks everything Parse does not: the fleet name, strategy and
// maxParallel; cluster names (DNS-1123 labels of at most MaxNameLength
// characters, unique); dependencies (known, not self, no cycle: each cycle
// is named, "a -> b -> a"); pinned nums (1..99, a written 0 included,
// unique, not sharing any resource with another pinned num or the bridge,
// see slot.Conflict); node versions; workers; region and zone (the ranges
// and syntax of these are CheckSettings', the rules `cluster create`'s
// flags share); mirror and plugin names against ctx; and labels
// (Kubernetes syntax, no keys that marina or Kubernetes set).
// It returns nil or an *Error with every problem, each with its path and,
// for a parsed manifest, its line:column.
func Validate(f *Fleet, ctx ValidateContext) error {
	if f == nil {
		return &Error{Stage: "validate", Problems: []Problem{{Path: "(document)", Message: "no fleet to validate"}}}
	}
	v := &validator{ctx: ctx, ps: problems{pos: f.pos}}
	v.fleet(f)
	return v.ps.err(f.Source, "validate")
}

type validator struct {
	ctx ValidateContext
	ps  problems
}

func (v *validator) add(path, format string, args ...any) { v.ps.add(path, format, args...) }

func (v *validator) fleet(f *Fleet) {
	if f.APIVersion != APIVersion {
		v.add("apiVersion", "must be %s, got %s", APIVersion, excerpt(f.APIVersion))
	}
	if f.Kind != Kind {
		v.add("kind", "must be %s, got %s", Kind, excerpt(f.Kind))
	}
	switch name := f.Metadata.Name; {
	case name == "":
		v.add("metadata.name", "is required: it names the fleet and labels its nodes %s=<name>; add metadata: {name: my-fleet}", LabelFleet)
	default:
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			v.add("metadata.name", "fleet name %s is not a DNS label (%s); use lower-case letters, digits and '-', e.g. my-fleet", excerpt(name), strings.Join(errs, "; "))
		}
	}
	s := f.Spec
	if msg := CheckMaxParallel(s.MaxParallel); msg != "" {
		v.add("spec.maxParallel", "%s", msg)
	}
	if s.Strategy != "" && !contains(Strategies, s.Strategy) {
		v.add("spec.strategy", "unknown strategy %s%s; use %s (the default) or %s", excerpt(string(s.Strategy)), suggest(string(s.Strategy), []string{string(FailFast), string(ContinueOnError)}), FailFast, ContinueOnError)
	}
	if len(s.Clusters) == 0 {
		v.add("spec.clusters", "a fleet needs at least one cluster; add spec.clusters: [my-cluster]")
	}
	v.options("spec.defaults", s.Defaults)

	names := make([]string, len(s.Clusters))
	deps := make([][]string, len(s.Clusters))
	for i, e := range s.Clusters {
		path := fmt.Sprintf("spec.clusters[%d]", i)
		names[i], deps[i] = e.Name, e.DependsOn
		v.name(path+".name", e.Name)
		v.options(path, e.Options)
	}
	buildGraph(names, deps, v.add)
	v.nums(s.Clusters)
}

func (v *validator) name(path, name string) {
	if name == "" {
		v.add(path, "a cluster needs a name; write the entry as a bare name or add name:")
		return
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		v.add(path, "cluster name %s is not a DNS label (%s); use lower-case letters, digits and '-', e.g. east-1", excerpt(name), strings.Join(errs, "; "))
		return
	}
	if len(name) > MaxNameLength {
		v.add(path, "cluster name %s has %d characters; use at most %d (node hostnames are <name>-control-plane)", excerpt(name), len(name), MaxNameLength)
	}
}

func (v *validator) bridge() (netip.Prefix, bool) {
	b := v.ctx.Bridge
	if !b.IsValid() {
		b = netip.MustParsePrefix(config.DefaultBridgeCIDR)
	}
	if _, err := slot.DockerIPRange(b); err != nil {
		return b, false
	}
	return b, true
}

// nums checks pinned slots: range, duplicates, the bridge, and pairs.
func (v *validator) nums(entries []Entry) {
	bridge, bridgeOK := v.bridge()
	if !bridgeOK {
		_, err := slot.DockerIPRange(bridge)
		v.add("(document)", "cannot check pinned nums: %v; fix network.bridgeCIDR in marina's config", err)
	}
	type pinned struct {
		idx int
		res slot.Resources
	}
	var pins []pinned
	first := map[int]int{}
	for i, e := range entries {
		if e.Num == 0 && !e.numSet {
			continue
		}
		path := fmt.Sprintf("spec.clusters[%d].num", i)
		if bad := CheckSettings(Settings{Num: &e.Num}); len(bad) > 0 {
			v.add(path, "%s", bad[0].Message)
			continue
		}
		if j, dup := first[e.Num]; dup {
			v.add(path, "num %d is also pinned by spec.clusters[%d] (%s); each cluster needs its own slot: pin another or leave num unset", e.Num, j, entries[j].Name)
			continue
		}
		first[e.Num] = i
		if !bridgeOK {
			continue
		}
		r, err := slot.Derive(e.Num, bridge)
		if err != nil {
			v.add(path, "%v", err)
			continue
		}
		if reason, bad := slot.BridgeConflict(r, bridge); bad {
			v.add(path, "num %d cannot be used on bridge %s: %s; pin another slot or leave num unset", e.Num, bridge, reason)
			continue
		}
		for _, p := range pins {
			if reason, bad := slot.Conflict(r, p.res); bad {
				v.add(path, "num %d conflicts with num %d of %s: %s; pin another slot or leave num unset", e.Num, p.res.Slot, entries[p.idx].Name, reason)
			}
		}
		pins = append(pins, pinned{i, r})
	}
}

func (v *validator) options(path string, o Options) {
	for _, p := range CheckSettings(Settings{NodeVersion: o.NodeVersion, Workers: o.Workers, Region: o.Region, Zone: o.Zone}) {
		v.add(path+"."+p.Path, "%s", p.Message)
	}
	if o.Registries != nil {
		seen := map[string]bool{}
		for i, m := range o.Registries.Names {
			mp := fmt.Sprintf("%s.registries[%d]", path, i)
			switch {
			case seen[m]:
				v.add(mp, "mirror %s is listed twice; keep one", excerpt(m))
			case !contains(v.ctx.KnownMirrors, m):
				v.add(mp, "unknown mirror %s%s; %s", excerpt(m), suggest(m, v.ctx.KnownMirrors), known("mirrors in marina's config (registries.mirrors)", v.ctx.KnownMirrors))
			}
			seen[m] = true
		}
	}
	for _, name := range sortedKeys(o.Plugins) {
		if !contains(v.ctx.KnownPlugins, name) {
			v.add(path+".plugins."+name, "unknown plugin %s%s; %s", excerpt(name), suggest(name, v.ctx.KnownPlugins), known("plugins (see marina plugin list)", v.ctx.KnownPlugins))
		}
	}
	v.labels(path+".labels", o.Labels)
}

func known(what string, names []string) string {
	if len(names) == 0 {
		return "there are no " + what
	}
	return "known " + what + ": " + strings.Join(names, ", ")
}

// labels checks Kubernetes label syntax and keeps keys marina or
// Kubernetes set themselves out of user hands.
func (v *validator) labels(path string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		kp := path + "." + k
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.add(kp, "label key %s is not valid (%s); use [prefix/]name, e.g. example.com/team", excerpt(k), strings.Join(errs, "; "))
			continue
		}
		prefix := ""
		if i := strings.Index(k, "/"); i >= 0 {
			prefix = k[:i]
		}
		switch {
		case k == slot.LabelRegion:
			v.add(kp, "label %q is set from region:; write region: instead", k)
			continue
		case k == slot.LabelZone:
			v.add(kp, "label %q is set from zone:; write zone: instead", k)
			continue
		case inDomain(prefix, "marina.dev"):
			v.add(kp, "label %q is reserved: marina sets marina.dev/ labels itself (the fleet label comes from metadata.name); use your own prefix, e.g. example.com/", k)
			continue
		case inDomain(prefix, "kubernetes.io") || inDomain(prefix, "k8s.io"):
			v.add(kp, "label %q is in a namespace reserved for Kubernetes (the kubelet refuses it on nodes); use your own prefix, e.g. example.com/", k)
			continue
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			v.add(kp, "label value %s is not valid (%s); use at most 63 letters, digits, '-', '_' or '.'", excerpt(labels[k]), strings.Join(errs, "; "))
		}
	}
}

// inDomain reports whether prefix is domain or a subdomain of it.
func inDomain(prefix, domain string) bool {
	return prefix == domain || strings.HasSuffix(prefix, "."+domain)
}
