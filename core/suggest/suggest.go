// Package suggest finds the "did you mean" for a misspelled name: the
// candidate nearest by edit distance when it is a plausible typo. The config
// loader and the Fleet parser share it, so both suggest alike.
package suggest

import "strings"

// maxRunes bounds the work on hostile input: longer strings are compared by
// their first maxRunes runes.
const maxRunes = 256

// Closest returns the candidate nearest to s (case-insensitively) by edit
// distance, if near enough to be a typo: at most a third of s's length, and
// between 1 and 3 edits. It returns "" otherwise.
func Closest(s string, candidates []string) string {
	best, bestDist := "", 1<<30
	limit := min(max(len(s)/3, 1), 3)
	for _, c := range candidates {
		if d := Distance(strings.ToLower(s), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist <= limit {
		return best
	}
	return ""
}

// Distance is the Levenshtein edit distance between a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > maxRunes {
		ra = ra[:maxRunes]
	}
	if len(rb) > maxRunes {
		rb = rb[:maxRunes]
	}
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
