package fleet

import (
	"fmt"
	"strings"

	namesuggest "github.com/bcollard/marina/core/suggest"
)

// Problem is one thing wrong with a manifest or a plan.
type Problem struct {
	// Path is the key path, e.g. "spec.clusters[2].dependsOn[0]";
	// "(document)" for the file as a whole.
	Path string `json:"path"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
	// Line and Column locate the offending key or value in the manifest
	// (1-based); 0 when the fleet was not parsed from a file.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// String renders "path: message"; Error.Error puts "source:line:col: " in
// front of it.
func (p Problem) String() string {
	return p.Path + ": " + p.Message
}

// Error lists every problem found at once. Parse, Validate and Plan return it.
type Error struct {
	// Source is the manifest's name ("fleet.yaml", "stdin").
	Source string `json:"source,omitempty"`
	// Stage is what found the problems: "parse", "validate" or "plan".
	Stage    string    `json:"stage"`
	Problems []Problem `json:"problems"`
}

// Error renders one line per problem, compiler style:
//
//	invalid fleet manifest fleet.yaml: 2 problems
//	  fleet.yaml:12:7: spec.clusters[2].dependsOn[0]: unknown cluster "hbu"; did you mean "hub"?
func (e *Error) Error() string {
	var b strings.Builder
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	what := "invalid fleet manifest"
	if e.Stage == "plan" {
		what = "cannot plan fleet"
	}
	if e.Source != "" {
		fmt.Fprintf(&b, "%s %s: %d %s", what, e.Source, len(e.Problems), noun)
	} else {
		fmt.Fprintf(&b, "%s: %d %s", what, len(e.Problems), noun)
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		if p.Line > 0 {
			src := e.Source
			if src == "" {
				src = "line"
			}
			if p.Column > 0 {
				fmt.Fprintf(&b, "%s:%d:%d: ", src, p.Line, p.Column)
			} else {
				fmt.Fprintf(&b, "%s:%d: ", src, p.Line)
			}
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// ExitCode makes a manifest error a usage error (exit status 2).
func (e *Error) ExitCode() int { return 2 }

// pos is where a key or value is written.
type pos struct{ line, col int }

// problems collects Problems, locating each path through a position table.
type problems struct {
	pos  map[string]pos
	list []Problem
}

func (ps *problems) add(path, format string, args ...any) {
	// The path can hold a user's key (a label, a plugin name): never whole.
	p := Problem{Path: clipText(path, 200), Message: fmt.Sprintf(format, args...)}
	p.Line, p.Column = ps.locate(path)
	if p.Path == "" {
		p.Path = "(document)"
	}
	ps.list = append(ps.list, p)
}

// locate finds the position of path, or of its nearest written parent.
func (ps *problems) locate(path string) (line, col int) {
	if ps.pos == nil {
		return 0, 0
	}
	for {
		if p, ok := ps.pos[path]; ok {
			return p.line, p.col
		}
		if path == "" {
			return 0, 0
		}
		path = parentPath(path)
	}
}

// parentPath strips the last ".key" or "[i]" of path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func (ps *problems) err(source, stage string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return &Error{Source: source, Stage: stage, Problems: ps.list}
}

// suggest returns "; did you mean X?" for s among candidates, or "".
// A candidate that differs only in case wins; otherwise the closest one by
// edit distance if it is a plausible typo.
func suggest(s string, candidates []string) string {
	for _, c := range candidates {
		if strings.EqualFold(c, s) {
			return fmt.Sprintf("; did you mean %q? (case matters)", c)
		}
	}
	if best := closest(s, candidates); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// closest is suggest.Closest (the same rule as core/config's key
// suggestions).
func closest(s string, candidates []string) string { return namesuggest.Closest(s, candidates) }
