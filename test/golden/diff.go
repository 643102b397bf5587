package golden

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// contextLines is the number of unchanged lines shown around a change.
	contextLines = 3
	// maxDiffLines caps the diff's length; the rest is counted.
	maxDiffLines = 200
	// maxCells caps the edit-distance table; beyond it the differing middle
	// of the two texts is shown as one replaced block.
	maxCells = 1 << 22
)

// op is one line of an edit script: ' ' kept, '-' only in want, '+' only
// in got.
type op struct {
	kind byte
	line string
}

// Diff is a unified line diff from want to got ("-" want, "+" got), with
// hunk headers, at most 200 lines long. A line with invisible differences
// (a carriage return, trailing blanks, control characters, invalid UTF-8)
// is shown Go-quoted, and a last line without a newline is marked.
func Diff(want, got []byte) string {
	a, b := splitLines(string(want)), splitLines(string(got))
	var b2 strings.Builder
	n := 0
	for _, h := range hunks(editScript(a, b)) {
		for _, l := range h {
			if n == maxDiffLines {
				fmt.Fprintf(&b2, "... (diff cut at %d lines)\n", maxDiffLines)
				return b2.String()
			}
			b2.WriteString(l)
			b2.WriteByte('\n')
			n++
		}
	}
	return b2.String()
}

// splitLines splits s after each newline; the last line has none if s
// does not end with one.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		lines = append(lines, s[:i])
		s = s[i:]
	}
	return lines
}

// editScript is a shortest edit script from a to b: common leading and
// trailing lines are kept, the middle is aligned by a longest common
// subsequence (or replaced wholesale when it is too large to align).
func editScript(a, b []string) []op {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	var ops []op
	for _, l := range a[:p] {
		ops = append(ops, op{' ', l})
	}
	ops = append(ops, align(a[p:len(a)-s], b[p:len(b)-s])...)
	for _, l := range a[len(a)-s:] {
		ops = append(ops, op{' ', l})
	}
	return ops
}

// align is the edit script of a to b by their longest common subsequence.
func align(a, b []string) []op {
	n, m := len(a), len(b)
	var ops []op
	if n*m > maxCells {
		for _, l := range a {
			ops = append(ops, op{'-', l})
		}
		for _, l := range b {
			ops = append(ops, op{'+', l})
		}
		return ops
	}
	// lcs[i*(m+1)+j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return lcs[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			v := max(at(i+1, j), at(i, j+1))
			if a[i] == b[j] {
				v = at(i+1, j+1) + 1
			}
			lcs[i*(m+1)+j] = v
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i]})
			i++
			j++
		case i < n && (j == m || at(i+1, j) >= at(i, j+1)):
			// On a tie the deletion goes first: "-" lines before "+" lines.
			ops = append(ops, op{'-', a[i]})
			i++
		default:
			ops = append(ops, op{'+', b[j]})
			j++
		}
	}
	return ops
}

// hunks renders the changes of ops with context lines, as unified diff
// hunks ("@@ -l,n +l,n @@" followed by their lines).
func hunks(ops []op) [][]string {
	var out [][]string
	for start := 0; start < len(ops); {
		// The next change, and the run of changes whose gaps of kept lines
		// are at most 2*contextLines.
		first := start
		for first < len(ops) && ops[first].kind == ' ' {
			first++
		}
		if first == len(ops) {
			break
		}
		last := first
		for k := first; k < len(ops); k++ {
			if ops[k].kind != ' ' {
				if k-last-1 > 2*contextLines {
					break
				}
				last = k
			}
		}
		lo, hi := max(first-contextLines, start), min(last+contextLines+1, len(ops))
		aLine, bLine := 1, 1
		for _, o := range ops[:lo] {
			if o.kind != '+' {
				aLine++
			}
			if o.kind != '-' {
				bLine++
			}
		}
		var aN, bN int
		var lines []string
		for _, o := range ops[lo:hi] {
			if o.kind != '+' {
				aN++
			}
			if o.kind != '-' {
				bN++
			}
			lines = append(lines, string(o.kind)+show(o.line))
			if !strings.HasSuffix(o.line, "\n") {
				lines = append(lines, `\ No newline at end of file`)
			}
		}
		if aN == 0 {
			aLine-- // unified diff's convention: the line before an insertion
		}
		if bN == 0 {
			bLine--
		}
		header := fmt.Sprintf("@@ -%d,%d +%d,%d @@", aLine, aN, bLine, bN)
		out = append(out, append([]string{header}, lines...))
		start = hi
	}
	return out
}

// show is a line without its newline, Go-quoted if it holds anything a
// terminal would not show plainly.
func show(line string) string {
	s := strings.TrimSuffix(line, "\n")
	if !utf8.ValidString(s) || strings.HasSuffix(s, " ") || strings.HasSuffix(s, "\t") {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r != '\t' && !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
