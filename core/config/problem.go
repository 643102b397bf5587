package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Path is the dotted key path, e.g. "registries.mirrors[2].port".
	Path string `json:"path"`
	// Message says what is wrong and, where possible, how to fix it.
	Message string `json:"message"`
	// Where says where the value came from: "config.yaml:12:5", "env MARINA_VM_CPUS",
	// "--set vm.cpus=0", or "" for a default.
	Where string `json:"where,omitempty"`
}

func (p Problem) String() string {
	if p.Where != "" {
		return fmt.Sprintf("%s: %s (%s)", p.Path, p.Message, p.Where)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Message)
}

// ValidationError reports every problem found in a configuration at once.
type ValidationError struct {
	// File is the config file involved, if any.
	File     string    `json:"file,omitempty"`
	Problems []Problem `json:"problems"`
}

// Error lists the problems, one a line. The header names the config file
// only when a problem is located in it: a bad --set or MARINA_* variable
// is not the file's fault.
func (e *ValidationError) Error() string {
	var b strings.Builder
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	if e.File != "" && e.inFile() {
		fmt.Fprintf(&b, "invalid configuration (%s): %d %s", e.File, len(e.Problems), noun)
	} else {
		fmt.Fprintf(&b, "invalid configuration: %d %s", len(e.Problems), noun)
	}
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// inFile reports whether a problem is located in e.File (or names no source).
func (e *ValidationError) inFile() bool {
	for _, p := range e.Problems {
		if p.Where == "" || p.Where == e.File || strings.HasPrefix(p.Where, e.File+":") {
			return true
		}
	}
	return false
}

// ExitCode makes a configuration error a usage error (exit status 2).
func (e *ValidationError) ExitCode() int { return 2 }

// SortProblems orders problems by source: the config file's in line order,
// then environment variables, then --set flags, then the rest (defaults and
// problems of no one key), each group by path. file is the config file.
func SortProblems(file string, ps []Problem) {
	type key struct {
		rank, line, col int
	}
	keyOf := func(p Problem) key {
		switch {
		case file != "" && (p.Where == file || strings.HasPrefix(p.Where, file+":")):
			k := key{rank: 0}
			parts := strings.Split(strings.TrimPrefix(p.Where, file), ":")
			if len(parts) > 1 {
				k.line, _ = strconv.Atoi(parts[1])
			}
			if len(parts) > 2 {
				k.col, _ = strconv.Atoi(parts[2])
			}
			return k
		case strings.HasPrefix(p.Where, "env "):
			return key{rank: 1}
		case strings.HasPrefix(p.Where, "--set "):
			return key{rank: 2}
		default:
			return key{rank: 3}
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := keyOf(ps[i]), keyOf(ps[j])
		if a != b {
			if a.rank != b.rank {
				return a.rank < b.rank
			}
			if a.line != b.line {
				return a.line < b.line
			}
			return a.col < b.col
		}
		return a.rank != 0 && ps[i].Path < ps[j].Path
	})
}

// maxEcho is the most of a value a message repeats. Values come from the
// user's file, flags and environment, and can be megabytes long: longer
// ones are shown by their beginning and their length, never whole.
const maxEcho = 64

// excerpt returns s, or when s is longer than maxEcho bytes its beginning
// followed by "... (N bytes)".
func excerpt(s string) string {
	return clip(s, maxEcho)
}

// clip cuts s to at most n bytes (on a character boundary), saying how long it was.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// clipArgs replaces every string argument of a message by its excerpt.
func clipArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = excerpt(s)
		}
		out[i] = a
	}
	return out
}

// The most a problem's path, source and message may hold, whatever built
// them (a 1 MiB key is a 1 MiB path; a --set flag carries its value).
const (
	maxPath    = 200
	maxWhere   = 200
	maxMessage = 2000
)

// Bounded returns p with its path, source and message clipped to a few
// hundred bytes (the message to 2000): for problems built from untrusted
// or very long text.
func (p Problem) Bounded() Problem {
	p.Path = clip(p.Path, maxPath)
	p.Where = clip(p.Where, maxWhere)
	p.Message = clip(p.Message, maxMessage)
	return p
}
