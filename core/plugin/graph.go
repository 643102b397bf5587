package plugin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/bcollard/marina/sdk"
)

// checkGraph returns every problem of the dependency graph of the
// configured plugins (names in config order): a required dependency that
// is not configured, a dependency whose version does not satisfy the
// constraint, and cycles. Optional dependencies that are absent are fine.
func checkGraph(names []string, descs map[string]*sdk.Description) []error {
	var errs []error
	for _, n := range names {
		for _, dep := range descs[n].Dependencies {
			dd, ok := descs[dep.Name]
			if !ok {
				if !dep.Optional {
					errs = append(errs, &DependencyError{Plugin: n, Message: fmt.Sprintf(
						"plugin %s requires plugin %s, which is not installed or not enabled: install it (marina plugin install) and enable it, or disable %s",
						n, dep.Name, n)})
				}
				continue
			}
			if dep.Version == "" {
				continue
			}
			c, err := semver.NewConstraint(dep.Version)
			if err != nil {
				errs = append(errs, &DependencyError{Plugin: n, Message: fmt.Sprintf(
					"plugin %s declares dependency %s with version %q, which is not a semver constraint: report this to the plugin's maintainer", n, dep.Name, dep.Version)})
				continue
			}
			v, err := semver.NewVersion(dd.Version)
			if err != nil || !c.Check(v) {
				errs = append(errs, &DependencyError{Plugin: n, Message: fmt.Sprintf(
					"plugin %s requires %s %s, but %s %s is selected: select a matching version of %s in the config (or install one)",
					n, dep.Name, dep.Version, dep.Name, dd.Version, dep.Name)})
			}
		}
	}
	for _, c := range findCycles(names, descs) {
		errs = append(errs, &DependencyError{Cycle: c, Message: fmt.Sprintf(
			"plugin dependency cycle: %s; no plugin in a cycle can run first: disable one of them or ask their maintainers",
			strings.Join(c, " -> "))})
	}
	return errs
}

// edges returns the configured plugins n depends on (required, or optional
// and present), sorted.
func edges(n string, descs map[string]*sdk.Description) []string {
	var out []string
	seen := map[string]bool{}
	for _, dep := range descs[n].Dependencies {
		if _, ok := descs[dep.Name]; ok && !seen[dep.Name] && dep.Name != n {
			seen[dep.Name] = true
			out = append(out, dep.Name)
		}
	}
	sort.Strings(out)
	return out
}

// findCycles returns each distinct cycle once, rotated to start at its
// smallest name and closed: [a b a].
func findCycles(names []string, descs map[string]*sdk.Description) [][]string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	seen := map[string]bool{}
	var cycles [][]string
	var visit func(n string)
	visit = func(n string) {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range edges(n, descs) {
			switch color[m] {
			case white:
				visit(m)
			case grey:
				i := len(stack) - 1
				for stack[i] != m {
					i--
				}
				c := rotate(stack[i:])
				key := strings.Join(c, ",")
				if !seen[key] {
					seen[key] = true
					cycles = append(cycles, append(c, c[0]))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		if color[n] == white {
			visit(n)
		}
	}
	return cycles
}

// rotate returns a copy of cycle c starting at its smallest element.
func rotate(c []string) []string {
	min := 0
	for i := range c {
		if c[i] < c[min] {
			min = i
		}
	}
	return append(append([]string(nil), c[min:]...), c[:min]...)
}

// predecessors returns, for each participant of a hook, the participants
// it must wait for: those among its transitive dependencies (a dependency
// that does not implement the hook still orders the plugins around it).
// The graph must be acyclic.
func predecessors(participants []string, descs map[string]*sdk.Description) map[string][]string {
	isPart := map[string]bool{}
	for _, p := range participants {
		isPart[p] = true
	}
	out := map[string][]string{}
	for _, p := range participants {
		seen := map[string]bool{p: true}
		queue := edges(p, descs)
		var wait []string
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			if seen[n] {
				continue
			}
			seen[n] = true
			if isPart[n] {
				wait = append(wait, n)
			}
			queue = append(queue, edges(n, descs)...)
		}
		sort.Strings(wait)
		out[p] = wait
	}
	return out
}
