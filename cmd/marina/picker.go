package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/lifecycle"
)

// pickTries bounds how many invalid answers the picker accepts before it
// gives up (a script feeding a terminal must not loop forever).
const pickTries = 3

// errPickCancelled is the picker's answer to an empty line, "q", or the end
// of the input.
var errPickCancelled = errors.New("cancelled")

// terminalInput returns a reader over a.in when both a.in and a.err (where
// questions go) are terminals, as confirm requires; nil otherwise.
func terminalInput(a *app) *bufio.Reader {
	in, ok := a.in.(*os.File)
	if !ok || !lifecycle.IsTerminal(in) || !lifecycle.IsTerminal(a.err) {
		return nil
	}
	return bufio.NewReader(in)
}

// pickClusters shows list on w as a numbered table (name, slot, fleet, age)
// and reads from r which of them to take: numbers and ranges separated by
// spaces or commas ("1 3", "2-4"), or "all". An empty answer, "q" or the
// end of the input cancels (errPickCancelled); an invalid answer is
// explained and asked again, at most pickTries times in all.
func pickClusters(r *bufio.Reader, w io.Writer, verb string, list []lab.ClusterInfo) ([]lab.ClusterInfo, error) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tNAME\tSLOT\tFLEET\tAGE")
	for i, ci := range list {
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\n", i+1, ci.Name, ci.Slot, Dash(ci.Fleet), Dash(ci.Age))
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		fmt.Fprintf(w, "Clusters to %s (e.g. 1 3, 2-4, all; empty or q to cancel): ", verb)
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(w)
			return nil, errPickCancelled
		}
		answer := strings.TrimSpace(line)
		if answer == "" || strings.EqualFold(answer, "q") || strings.EqualFold(answer, "quit") {
			return nil, errPickCancelled
		}
		idx, perr := parseSelection(answer, len(list))
		if perr == nil {
			picked := make([]lab.ClusterInfo, 0, len(idx))
			for _, i := range idx {
				picked = append(picked, list[i])
			}
			return picked, nil
		}
		if try >= pickTries {
			return nil, fmt.Errorf("no valid choice after %d tries (last: %v)", pickTries, perr)
		}
		fmt.Fprintf(w, "%v; try again (%d of %d tries left)\n", perr, pickTries-try, pickTries)
	}
}

// parseSelection parses a picker answer for a list of n items: "all", or
// numbers (1..n) and ranges ("2-4") separated by spaces or commas. It
// returns 0-based indexes, sorted, without duplicates.
func parseSelection(s string, n int) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(fields) == 0 {
		return nil, errors.New("nothing chosen")
	}
	if len(fields) == 1 && strings.EqualFold(fields[0], "all") {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	chosen := make([]bool, n)
	for _, f := range fields {
		lo, hi, isRange := strings.Cut(f, "-")
		if !isRange {
			hi = lo
		}
		first, err1 := strconv.Atoi(lo)
		last, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not a number, a range like 2-4, or all", f)
		}
		if first > last {
			return nil, fmt.Errorf("range %q goes backwards; write %d-%d", f, last, first)
		}
		if first < 1 || last > n {
			return nil, fmt.Errorf("%q is out of range: choose between 1 and %d", f, n)
		}
		for i := first; i <= last; i++ {
			chosen[i-1] = true
		}
	}
	var out []int
	for i, ok := range chosen {
		if ok {
			out = append(out, i)
		}
	}
	return out, nil
}

// confirmOn asks question on w and reads a y/yes answer from r (anything else,
// or the end of the input, is no).
func confirmOn(r *bufio.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, err := r.ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(w)
		return false
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes"
}

// deleteForm is how `cluster delete` was told which clusters to delete.
type deleteForm int

const (
	// deletePick: no names, no -l, no --all: pick on the terminal.
	deletePick deleteForm = iota
	// deleteNames: clusters named on the command line.
	deleteNames
	// deleteSelector: clusters whose labels match -l.
	deleteSelector
	// deleteAll: --all.
	deleteAll
)

// deleteFormOf checks that at most one of the three ways to name clusters
// was used (a usage error otherwise) and says which.
func deleteFormOf(args []string, selector string, selectorSet, all bool) (deleteForm, error) {
	var forms []string
	form := deletePick
	if len(args) > 0 {
		forms, form = append(forms, "cluster names"), deleteNames
	}
	if selectorSet {
		if strings.TrimSpace(selector) == "" {
			return 0, exitcode.NewUsage(errors.New("-l/--selector is empty: give a label selector, e.g. -l team=a (use --all to delete every cluster)"))
		}
		forms, form = append(forms, "-l/--selector"), deleteSelector
	}
	if all {
		forms, form = append(forms, "--all"), deleteAll
	}
	if len(forms) > 1 {
		return 0, exitcode.NewUsage(fmt.Errorf("%s cannot be combined: name the clusters, or pass -l SELECTOR, or --all", strings.Join(forms, " and ")))
	}
	return form, nil
}

// checkCanAsk refuses, before anything is read or deleted, a delete that
// would have to ask on a terminal when there is none: picking always asks;
// -l and --all ask for confirmation unless --yes.
func checkCanAsk(form deleteForm, yes, terminal bool) error {
	if terminal {
		return nil
	}
	switch {
	case form == deletePick:
		return exitcode.NewUsage(errors.New("no terminal to pick clusters on: name the clusters (marina cluster delete NAME...), or pass --all or -l SELECTOR with --yes; nothing was deleted"))
	case (form == deleteAll || form == deleteSelector) && !yes:
		return exitcode.NewUsage(errors.New("no terminal to confirm on: pass --yes to delete with --all or -l without asking; nothing was deleted"))
	}
	return nil
}

// unknownClusters returns the names (in the order given, once each) that
// are not in live.
func unknownClusters(names []string, live map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if _, ok := live[n]; !ok && !seen[n] {
			out = append(out, n)
		}
		seen[n] = true
	}
	return out
}

// errUnknownClusters is the error for names that are no cluster.
func errUnknownClusters(names []string) error {
	noun := "no cluster named"
	if len(names) > 1 {
		noun = "no clusters named"
	}
	return fmt.Errorf("%s %s (see marina cluster list); nothing was deleted", noun, strings.Join(names, ", "))
}
