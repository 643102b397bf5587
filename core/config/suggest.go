package config

import (
	"fmt"
	"strings"
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

// closest returns the candidate nearest to s by edit distance, if near enough
// to be a plausible typo (at most a third of the length, and at most 3 edits).
func closest(s string, candidates []string) string {
	best, bestDist := "", 1<<30
	limit := len(s) / 3
	if limit < 1 {
		limit = 1
	}
	if limit > 3 {
		limit = 3
	}
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(s), strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist <= limit {
		return best
	}
	return ""
}

// levenshtein is the edit distance between a and b (runes).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
