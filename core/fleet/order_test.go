package fleet

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestDeleteOrder(t *testing.T) {
	const chain = head + "spec:\n  clusters:\n  - hub\n  - {name: east, dependsOn: [hub]}\n  - {name: west, dependsOn: [hub]}\n  - {name: edge, dependsOn: [east]}\n"
	for _, tc := range []struct {
		name       string
		manifest   string // "" = no manifest
		members    []string
		want       []string
		dependents map[string][]string
	}{
		{"no manifest: reverse name order", "", []string{"a", "c", "b"}, []string{"c", "b", "a"}, map[string][]string{}},
		{"no members", chain, nil, nil, map[string][]string{}},
		{"dependents first", chain, []string{"hub", "east", "west", "edge"}, []string{"west", "edge", "east", "hub"},
			map[string][]string{"hub": {"east", "edge", "west"}, "east": {"edge"}}},
		{"through a cluster that is gone", chain, []string{"hub", "edge"}, []string{"edge", "hub"},
			map[string][]string{"hub": {"edge"}}},
		{"a member the manifest does not list is free", chain, []string{"hub", "aaa", "east"}, []string{"east", "hub", "aaa"},
			map[string][]string{"hub": {"east"}}},
		{"independent members in reverse name order", head + "spec:\n  clusters: [a, b, {name: c, dependsOn: [a]}]\n", []string{"a", "b", "c"},
			[]string{"c", "b", "a"}, map[string][]string{"a": {"c"}}},
		// An unvalidated manifest: the cycle is broken at its highest name
		// and unknown or repeated dependencies are ignored.
		{"cycle", head + "spec:\n  clusters:\n  - {name: a, dependsOn: [b, zz, b]}\n  - {name: b, dependsOn: [a]}\n", []string{"a", "b"},
			[]string{"b", "a"}, map[string][]string{"a": {"b"}, "b": {"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f *Fleet
			if tc.manifest != "" {
				f = parseOrFatal(t, tc.manifest)
			}
			order, deps := DeleteOrder(f, tc.members)
			if !slices.Equal(order, tc.want) {
				t.Errorf("order = %v, want %v", order, tc.want)
			}
			if !reflect.DeepEqual(deps, tc.dependents) {
				t.Errorf("dependents = %v, want %v", deps, tc.dependents)
			}
		})
	}
}

// TestDeleteOrderProperty: for random acyclic manifests and random sets of
// live members (some not in the manifest), the order holds every member
// exactly once, and no member comes after a cluster it depends on, directly
// or through entries that are not live.
func TestDeleteOrderProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		n := 1 + r.IntN(12)
		var b strings.Builder
		b.WriteString(head + "spec:\n  clusters:\n")
		deps := map[string][]string{}
		for i := range n {
			name := fmt.Sprintf("c%02d", i)
			var ds []string
			for j := range i { // only earlier entries: acyclic
				if r.IntN(4) == 0 {
					ds = append(ds, fmt.Sprintf("c%02d", j))
				}
			}
			deps[name] = ds
			fmt.Fprintf(&b, "  - {name: %s, dependsOn: [%s]}\n", name, strings.Join(ds, ", "))
		}
		f := parseOrFatal(t, b.String())
		var members []string
		for name := range deps {
			if r.IntN(3) > 0 {
				members = append(members, name)
			}
		}
		if r.IntN(2) == 0 {
			members = append(members, "zz-outside")
		}
		order, dependents := DeleteOrder(f, members)
		got, want := slices.Clone(order), slices.Clone(members)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d: order %v is not a permutation of %v", iter, order, members)
		}
		pos := map[string]int{}
		for i, m := range order {
			pos[m] = i
		}
		for _, m := range members {
			for _, d := range reachable(deps, m) {
				if p, live := pos[d]; live {
					if p < pos[m] {
						t.Fatalf("iter %d: %s is deleted before %s, which depends on it (order %v)\n%s", iter, d, m, order, b.String())
					}
					if !slices.Contains(dependents[d], m) {
						t.Fatalf("iter %d: dependents[%s] = %v lacks %s", iter, d, dependents[d], m)
					}
				}
			}
		}
	}
}
