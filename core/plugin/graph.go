package plugin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/bcollard/marina/sdk"
)

// Member is one plugin of a set as DependencyProblems sees it.
type Member struct {
	Name    string
	Enabled bool
	// Problem says why it cannot run by itself ("" when it can).
	Problem string
	// Description is what it declares (its version and dependencies); nil
	// when not known.
	Description *sdk.Description
}

// DependencyProblems says, for each enabled member that could otherwise
// run, why its dependencies keep it from running, with the fix: a required
// dependency that is disabled, neither built in nor in the config, or
// cannot run itself (for its own problem or, in turn, its dependencies),
// and a dependency (required, or optional and running) whose selected
// version does not satisfy the declared constraint. It needs no plugin
// started: `plugin list` shows it for the configured set, and the
// dispatcher refuses a run on it (checkGraph, which adds cycles). Members
// without a problem are not in the map.
func DependencyProblems(members []Member) map[string]string {
	byName := make(map[string]*Member, len(members))
	for i := range members {
		byName[members[i].Name] = &members[i]
	}
	problems := map[string]string{}
	for changed := true; changed; {
		changed = false
		for i := range members {
			m := &members[i]
			if !m.Enabled || m.Problem != "" || m.Description == nil || problems[m.Name] != "" {
				continue
			}
			if msg := dependencyProblem(m, byName, problems); msg != "" {
				problems[m.Name], changed = msg, true
			}
		}
	}
	return problems
}

// dependencyProblem is DependencyProblems for m, given the problems found so far.
func dependencyProblem(m *Member, byName map[string]*Member, problems map[string]string) string {
	var msgs []string
	for _, dep := range m.Description.Dependencies {
		d, known := byName[dep.Name]
		if dep.Name == m.Name {
			continue
		}
		var blocked string
		switch {
		case !known:
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which is neither built in nor in the config: install it if it is not installed (`marina plugin install SOURCE`) and enable it with `marina plugin enable %s`, or disable %s", m.Name, dep.Name, dep.Name, m.Name)
		case !d.Enabled:
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which is disabled: enable it with `marina plugin enable %s`, or disable %s", m.Name, dep.Name, dep.Name, m.Name)
		case d.Problem != "":
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which cannot run: %s", m.Name, dep.Name, d.Problem)
		case problems[dep.Name] != "":
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which cannot run: %s", m.Name, dep.Name, problems[dep.Name])
		}
		if blocked != "" {
			if !dep.Optional {
				msgs = append(msgs, blocked)
			}
			continue
		}
		if dep.Version == "" || d.Description == nil {
			continue
		}
		c, err := semver.NewConstraint(dep.Version)
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("plugin %s declares dependency %s with version %q, which is not a semver constraint: report this to the plugin's maintainer", m.Name, dep.Name, dep.Version))
			continue
		}
		if v, err := semver.NewVersion(d.Description.Version); err != nil || !c.Check(v) {
			msgs = append(msgs, fmt.Sprintf("plugin %s requires %s %s, but %s %s is selected: select a matching version with plugins.%s.version in the config (or install one), or disable %s",
				m.Name, dep.Name, dep.Version, dep.Name, d.Description.Version, dep.Name, m.Name))
		}
	}
	return strings.Join(msgs, "; ")
}

// checkGraph returns every problem of the dependency graph of the
// configured plugins (names in config order, all enabled and described):
// DependencyProblems' for each plugin, then cycles.
func checkGraph(names []string, descs map[string]*sdk.Description) []error {
	members := make([]Member, len(names))
	for i, n := range names {
		members[i] = Member{Name: n, Enabled: true, Description: descs[n]}
	}
	problems := DependencyProblems(members)
	var errs []error
	for _, n := range names {
		if msg := problems[n]; msg != "" {
			errs = append(errs, &DependencyError{Plugin: n, Message: msg})
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
