package fleet

import (
	"slices"
	"sort"
)

// DeleteOrder returns the order in which `marina fleet delete` removes a
// fleet's live members, and for each member the members that depend on it.
//
// Every member comes before the members it depends on, directly or through
// manifest entries that are not live (a -> b -> c with b gone still deletes
// a before c). Among members free to go, the highest name goes first, so
// without a manifest (f nil) the order is reverse name order. Members that
// f does not list depend on nothing known. A dependency cycle (Validate
// refuses one, so only an unvalidated manifest has it) is broken at its
// highest name.
//
// dependents[b] lists the members that depend on b, directly or
// transitively, in name order: when one of them could not be deleted, b is
// kept, since a cluster that still exists may still need it.
func DeleteOrder(f *Fleet, members []string) (order []string, dependents map[string][]string) {
	isMember := make(map[string]bool, len(members))
	for _, m := range members {
		isMember[m] = true
	}
	// deps: the graph of the manifest plus the members, by name; edges to
	// names outside both are dropped.
	deps := map[string][]string{}
	for _, m := range members {
		deps[m] = nil
	}
	if f != nil {
		for _, e := range f.Spec.Clusters { // a repeated name (unvalidated) merges
			deps[e.Name] = append(deps[e.Name], e.DependsOn...)
		}
	}
	for n, ds := range deps {
		kept := ds[:0:0]
		for _, d := range ds {
			if _, known := deps[d]; known && d != n && !slices.Contains(kept, d) {
				kept = append(kept, d)
			}
		}
		deps[n] = kept
	}

	// Kahn's algorithm on "is depended on by": a node may go once every
	// node that depends on it has gone.
	pending := map[string]int{} // dependents not yet removed
	for _, ds := range deps {
		for _, d := range ds {
			pending[d]++
		}
	}
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	done := make(map[string]bool, len(names))
	for len(done) < len(names) {
		next := ""
		for _, n := range names { // highest name first
			if !done[n] && pending[n] == 0 {
				next = n
				break
			}
		}
		if next == "" { // a cycle: break it at its highest name
			for _, n := range names {
				if !done[n] {
					next = n
					break
				}
			}
		}
		done[next] = true
		for _, d := range deps[next] {
			pending[d]--
		}
		if isMember[next] {
			order = append(order, next)
		}
	}

	dependents = map[string][]string{}
	for _, m := range order {
		for _, d := range reachable(deps, m) {
			if isMember[d] {
				dependents[d] = append(dependents[d], m)
			}
		}
	}
	for _, ds := range dependents {
		sort.Strings(ds)
	}
	return order, dependents
}

// reachable returns every node from depends on, directly or transitively,
// without from itself.
func reachable(deps map[string][]string, from string) []string {
	seen := map[string]bool{from: true}
	var out []string
	stack := append([]string(nil), deps[from]...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		stack = append(stack, deps[n]...)
	}
	return out
}
