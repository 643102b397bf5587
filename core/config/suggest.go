package config

import (
	"fmt"
	"strings"

	namesuggest "github.com/bcollard/marina/core/suggest"
)

// suggest returns a "did you mean" hint for an unknown key under parent, or "".
// It prefers, in order: a sibling that differs only in case, the closest
// sibling by edit distance, and a key of the same name elsewhere in the schema
// (a key put in the wrong section).
func suggest(unknown string, parent *field) string {
	var candidates []string
	for _, c := range parent.Children {
		candidates = append(candidates, c.Key)
	}
	for _, c := range candidates {
		if strings.EqualFold(c, unknown) {
			return fmt.Sprintf("did you mean %q? (keys are case-sensitive)", c)
		}
	}
	if best := closest(unknown, candidates); best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	for _, f := range schema().allKeyPaths() {
		if strings.EqualFold(f.Key, unknown) && f.Path != joinPath(parent.Path, unknown) {
			return fmt.Sprintf("did you mean %q? (it belongs under %s)", f.Path, sectionOf(f.Path))
		}
	}
	if len(candidates) > 0 {
		return fmt.Sprintf("valid keys here: %s", strings.Join(candidates, ", "))
	}
	return ""
}

func sectionOf(path string) string {
	i := strings.LastIndex(path, ".")
	if i < 0 {
		return "the top level"
	}
	return path[:i] + ":"
}

// closest is suggest.Closest (shared with the Fleet parser).
func closest(s string, candidates []string) string { return namesuggest.Closest(s, candidates) }
