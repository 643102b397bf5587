#!/usr/bin/env bash
# summary.sh — the figures of a `go test -bench` run that have a goal, as a
# table (`make bench` pipes its output through here). A benchmark states a
# figure by logging one tab-separated line (test/bench.Figure):
#
#   figure<TAB>what<TAB>value<TAB>goal<TAB>baseline<TAB>verdict
#
# Figures are reported, never asserted: this prints them and exits 0.
# Usage: go test -run '^$' -bench . ./... | tee out.txt; bash test/bench/summary.sh <out.txt
set -euo pipefail

awk -F'\t' '
  $1 ~ /(^|: )figure$/ && NF >= 6 {
    n++
    for (i = 2; i <= 6; i++) {
      cell[n, i] = $i
      if (length($i) > w[i]) w[i] = length($i)
    }
  }
  END {
    if (n == 0) { print "summary.sh: no figures in this output (no benchmark logged a figure line)"; exit }
    split("FIGURE VALUE GOAL BASELINE VERDICT", head, " ")
    for (i = 2; i <= 6; i++) if (length(head[i-1]) > w[i]) w[i] = length(head[i-1])
    print ""
    print "Figures with a goal (medians; each baseline measured in the same run; never asserted):"
    fmt = "  %-" w[2] "s  %-" w[3] "s  %-" w[4] "s  %-" w[5] "s  %s\n"
    printf fmt, head[1], head[2], head[3], head[4], head[5]
    for (r = 1; r <= n; r++) printf fmt, cell[r, 2], cell[r, 3], cell[r, 4], cell[r, 5], cell[r, 6]
  }
'
