package fleet

import (
	"fmt"
	"strings"
)

// graph is the dependency graph of a list of clusters, by index.
type graph struct {
	names []string
	index map[string]int // first entry of each name
	// deps[i] are the distinct, known, non-self dependencies of i, in the
	// order written.
	deps [][]edge
	// dependents[i] are the entries that depend on i, in manifest order.
	dependents [][]int
}

// edge is a dependency of an entry on entry `to`, written at dependsOn[at].
type edge struct{ to, at int }

// maxSuggestNames bounds "did you mean" searches for dependency names, so
// that huge hostile manifests stay cheap.
const maxSuggestNames = 1000

// buildGraph checks the names and dependencies of a list of clusters and
// reports every problem through add, with paths spec.clusters[i].… :
// duplicate names, empty/self/unknown/repeated dependencies and dependency
// cycles (one problem per cycle, naming it). The graph it returns leaves
// out the bad edges.
func buildGraph(names []string, dependsOn [][]string, add func(path, format string, args ...any)) *graph {
	g := &graph{names: names, index: make(map[string]int, len(names)), deps: make([][]edge, len(names)), dependents: make([][]int, len(names))}
	for i, n := range names {
		if n == "" {
			continue
		}
		if first, dup := g.index[n]; dup {
			add(fmt.Sprintf("spec.clusters[%d].name", i), "duplicate cluster name %s (also spec.clusters[%d]); give each cluster its own name", excerpt(n), first)
			continue
		}
		g.index[n] = i
	}
	for i, deps := range dependsOn {
		seen := map[string]bool{}
		for j, d := range deps {
			path := fmt.Sprintf("spec.clusters[%d].dependsOn[%d]", i, j)
			to, known := g.index[d]
			switch {
			case d == "":
				add(path, "empty dependency; name a cluster of this manifest or remove the item")
			case d == names[i]:
				add(path, "cluster %s depends on itself; remove this dependency", excerpt(d))
			case !known:
				hint := ""
				if len(names) <= maxSuggestNames {
					hint = suggest(d, names)
				}
				add(path, "unknown cluster %s%s; dependsOn names clusters of this manifest", excerpt(d), hint)
			case seen[d]:
				add(path, "%s is listed twice; keep one", excerpt(d))
			default:
				g.deps[i] = append(g.deps[i], edge{to: to, at: j})
				g.dependents[to] = append(g.dependents[to], i)
			}
			seen[d] = true
		}
	}
	for _, c := range g.cycles() {
		add(fmt.Sprintf("spec.clusters[%d].dependsOn[%d]", c.from, c.at), "dependency cycle %s; remove one of these dependencies", c.String())
	}
	return g
}

// cycle is a cycle found through the dependency written at
// spec.clusters[from].dependsOn[at]; names[0] == names[len-1].
type cycle struct {
	from, at int
	names    []string
}

// String renders "a -> b -> c -> a" (a depends on b, ...).
func (c cycle) String() string { return strings.Join(c.names, " -> ") }

// cycles finds the dependency cycles by depth-first search in manifest
// order (white/grey/black): one per edge that closes a cycle.
func (g *graph) cycles() []cycle {
	const (
		white = iota
		grey
		black
	)
	n := len(g.names)
	color := make([]uint8, n)
	onStack := make([]int, n) // position in stack while grey
	var stack []int
	var found []cycle
	// Iterative DFS: a long chain must not grow the goroutine stack.
	type frame struct{ node, next int }
	for root := range n {
		if color[root] != white {
			continue
		}
		frames := []frame{{root, 0}}
		color[root], onStack[root] = grey, 0
		stack = append(stack[:0], root)
		for len(frames) > 0 {
			top := &frames[len(frames)-1]
			u := top.node
			if top.next == len(g.deps[u]) {
				color[u] = black
				frames = frames[:len(frames)-1]
				stack = stack[:len(stack)-1]
				continue
			}
			e := g.deps[u][top.next]
			top.next++
			switch color[e.to] {
			case white:
				color[e.to], onStack[e.to] = grey, len(stack)
				stack = append(stack, e.to)
				frames = append(frames, frame{e.to, 0})
			case grey:
				path := stack[onStack[e.to]:]
				names := make([]string, 0, len(path)+1)
				for _, i := range path {
					names = append(names, g.names[i])
				}
				found = append(found, cycle{from: u, at: e.at, names: append(names, g.names[e.to])})
			}
		}
	}
	return found
}
