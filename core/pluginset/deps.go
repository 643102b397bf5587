package pluginset

import (
	"fmt"
	"strings"
)

// Dependency is one plugin a plugin declares it needs (sdk.Dependency).
type Dependency struct {
	Name     string `json:"name"`
	Version  string `json:"version,omitempty"`
	Optional bool   `json:"optional,omitempty"`
}

// Node is one plugin of a set as DependencyProblems sees it.
type Node struct {
	Name    string
	Enabled bool
	// Problem says why it cannot run by itself ("" when it can).
	Problem string
	// Described: its description is known; Version and Dependencies are
	// the description's.
	Described    bool
	Version      string
	Dependencies []Dependency
}

// nodeProblems says, for each enabled plugin that could otherwise run,
// why its dependencies keep it from running, with the fix: a required
// dependency that is disabled, neither built in nor in the config, or
// cannot run itself (for its own problem or, in turn, its dependencies),
// and a dependency (required, or optional and running) whose selected
// version does not satisfy the declared constraint. These are the checks
// the dispatcher makes before a run (core/plugin's dependency graph, but
// for cycles), made from the set alone: no plugin is started. Plugins
// without a problem are not in the map.
func nodeProblems(nodes []Node) map[string]string {
	byName := make(map[string]*Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	problems := map[string]string{}
	for changed := true; changed; {
		changed = false
		for i := range nodes {
			n := &nodes[i]
			if !n.Enabled || n.Problem != "" || !n.Described || problems[n.Name] != "" {
				continue
			}
			if msg := dependencyProblem(n, byName, problems); msg != "" {
				problems[n.Name], changed = msg, true
			}
		}
	}
	return problems
}

// dependencyProblem is DependencyProblems for n, given the problems found so far.
func dependencyProblem(n *Node, byName map[string]*Node, problems map[string]string) string {
	var msgs []string
	for _, dep := range n.Dependencies {
		d, known := byName[dep.Name]
		if dep.Name == n.Name {
			continue
		}
		var blocked string
		switch {
		case !known:
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which is neither built in nor in the config: install it if it is not installed (`marina plugin install SOURCE`) and enable it with `marina plugin enable %s`, or disable %s", n.Name, dep.Name, dep.Name, n.Name)
		case !d.Enabled:
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which is disabled: enable it with `marina plugin enable %s`, or disable %s", n.Name, dep.Name, dep.Name, n.Name)
		case d.Problem != "":
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which cannot run: %s", n.Name, dep.Name, d.Problem)
		case problems[dep.Name] != "":
			blocked = fmt.Sprintf("plugin %s requires plugin %s, which cannot run: %s", n.Name, dep.Name, problems[dep.Name])
		}
		if blocked != "" {
			if !dep.Optional {
				msgs = append(msgs, blocked)
			}
			continue
		}
		if dep.Version == "" || !d.Described {
			continue
		}
		ok, err := satisfies(dep.Version, d.Version)
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("plugin %s declares dependency %s with version %q, which is not a semver constraint: report this to the plugin's maintainer", n.Name, dep.Name, dep.Version))
			continue
		}
		if !ok {
			msgs = append(msgs, fmt.Sprintf("plugin %s requires %s %s, but %s %s is selected: select a matching version with plugins.%s.version in the config (or install one), or disable %s",
				n.Name, dep.Name, dep.Version, dep.Name, d.Version, dep.Name, n.Name))
		}
	}
	return strings.Join(msgs, "; ")
}

// Summary is the part of a plugin's sdk.Description that plugin list shows
// (pluginset.Summarize makes it from one).
type Summary struct {
	Name         string
	Version      string
	Protocol     string
	Hooks        []string
	Dependencies []Dependency
}
