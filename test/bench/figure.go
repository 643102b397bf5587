// Package bench holds what marina's benchmarks share: the figure line that
// summary.sh (`make bench`) turns into its table.
package bench

import "testing"

// Figure logs one figure as a tab-separated line test/bench/summary.sh
// reads: "figure", what, value, goal, baseline, verdict (ASCII, so the
// table's columns line up whatever awk counts). Figures are reported, never
// asserted.
func Figure(b *testing.B, what, value, goal, baseline string, met bool) {
	b.Helper()
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	b.Logf("figure\t%s\t%s\t%s\t%s\t%s", what, value, goal, baseline, verdict)
}
