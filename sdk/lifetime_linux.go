//go:build linux

package sdk

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process a child subreaper: an orphaned
// descendant is re-parented to it, not to init, so it stays in the tree
// killDescendants walks.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// listProcs reads the process table from /proc.
func listProcs() []proc {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]proc, 0, len(paths))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		open := bytes.IndexByte(b, '(')
		if i < 0 || open < 1 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		pid, err0 := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
		ppid, err1 := strconv.Atoi(string(f[1]))
		pgid, err2 := strconv.Atoi(string(f[2]))
		if err0 != nil || err1 != nil || err2 != nil {
			continue
		}
		z := len(f[0]) == 1 && (f[0][0] == 'Z' || f[0][0] == 'X')
		out = append(out, proc{pid: pid, ppid: ppid, pgid: pgid, zombie: z})
	}
	return out
}
