//go:build unix

package sdk

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// proc is one process of the process table.
type proc struct {
	pid, ppid, pgid int
	zombie          bool
}

// descendants returns the live processes below self, and those in self's
// process group when self leads it (marina starts plugins with Setpgid).
func descendants(self int) []int {
	table := listProcs()
	children := map[int][]int{}
	in := map[int]bool{}
	var queue []int
	leader := syscall.Getpgrp() == self
	for _, p := range table {
		children[p.ppid] = append(children[p.ppid], p.pid)
		if leader && p.pgid == self && p.pid != self {
			in[p.pid] = true
			queue = append(queue, p.pid)
		}
	}
	queue = append(queue, children[self]...)
	for _, c := range children[self] {
		in[c] = true
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !in[c] {
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	var live []int
	for _, p := range table {
		if in[p.pid] && !p.zombie && p.pid != self {
			live = append(live, p.pid)
		}
	}
	return live
}

// killDescendants ends every descendant of this process: SIGTERM, up to
// grace for them to exit, then SIGKILL (each round freezing what it finds
// with SIGSTOP first, so nothing forks between the look and the kill),
// up to kill. It reaps its zombie children as it goes: the process is
// about to exit, so no os/exec Wait is left to need them.
func killDescendants(grace, kill time.Duration) {
	self := os.Getpid()
	if !reapChildren() && subreaper {
		// A subreaper without a child has no descendant: every process
		// below it is its child or under one (the common case: a plugin
		// whose hooks started nothing that is still there), so the
		// process table need not be read.
		return
	}
	live := descendants(self)
	if len(live) == 0 {
		return
	}
	for _, pid := range live {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		reapChildren()
		if len(descendants(self)) == 0 {
			return
		}
	}
	deadline = time.Now().Add(kill)
	for {
		reapChildren()
		live := descendants(self)
		if len(live) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range live {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		for _, pid := range append(live, descendants(self)...) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapChildren collects every exited child without blocking; it reports
// whether a child may be left (false only when the kernel says there is
// none: ECHILD).
func reapChildren() (children bool) {
	for range 1000 {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.ECHILD) {
			return false
		}
		if pid <= 0 || err != nil {
			return true
		}
	}
	return true
}
