//go:build linux

package plugin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// sysProcAttr puts the plugin in its own process group and has the kernel
// send it SIGTERM if marina dies. (Pdeathsig fires when the OS thread that
// started the plugin exits; the Go runtime only retires threads locked with
// runtime.LockOSThread, which marina does not use around Start. The SDK's
// parent watchdog covers the rest, and macOS.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// groupAlive reports whether a live (non-zombie) process is still in
// process group pgid. Zombies are ignored: an orphaned grandchild that has
// exited may wait to be reaped by an init that never does (containers).
func groupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	// Fast path: no process at all in the group (the common case once a
	// plugin exited and was reaped). Only when kill(2) still finds one do we
	// scan /proc to tell live members from zombies awaiting their reaper.
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err != nil || g != pgid {
			continue
		}
		if st := f[0]; len(st) == 1 && (st[0] == 'Z' || st[0] == 'X') {
			continue
		}
		return true
	}
	return false
}
