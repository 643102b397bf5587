//go:build linux

package plugin

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the plugin in its own process group and has the kernel
// send it SIGTERM if marina dies; the SDK's Serve then kills every
// descendant of the plugin before exiting. (Pdeathsig fires when the OS
// thread that started the plugin exits; the Go runtime only retires threads
// locked with runtime.LockOSThread, which marina does not use around Start.
// The SDK's parent watchdog covers the rest, and macOS.)
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
	for _, p := range listProcs() {
		if p.pgid == pgid && !p.zombie {
			return true
		}
	}
	return false
}

// listProcs reads the process table from /proc: one directory read, then
// open, one read and close of each /proc/PID/stat (a stat line is a few
// hundred bytes). Every plugin stop reads the table a few times, so it
// avoids what a Glob (an lstat per process) and os.ReadFile (a stat and a
// second read per file) add to each entry.
func listProcs() []procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	out := make([]procEntry, 0, len(names))
	var buf [2048]byte
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, ok := readSmall("/proc/"+n+"/stat", buf[:])
		if !ok {
			continue // exited meanwhile
		}
		if e, ok := parseStat(b); ok {
			out = append(out, e)
		}
	}
	return out
}

// readSmall reads the file at path, which must fit in buf and not be
// empty, with one read.
func readSmall(path string, buf []byte) ([]byte, bool) {
	b, ok := readOnce(path, buf)
	return b, ok && len(b) > 0
}

// readOnce reads the file at path, which must fit in buf, with one read
// (a /proc file is produced whole by its first read).
func readOnce(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	n, err := unix.Read(fd, buf)
	_ = unix.Close(fd)
	if err != nil || n < 0 || n == len(buf) {
		return nil, false
	}
	return buf[:n], true
}

// parseStat parses /proc/PID/stat: "pid (comm) state ppid pgrp session
// ... starttime(22nd field) ..."; comm may contain spaces and ')'.
func parseStat(b []byte) (procEntry, bool) {
	open := bytes.IndexByte(b, '(')
	i := bytes.LastIndexByte(b, ')')
	if open < 1 || i < open {
		return procEntry{}, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return procEntry{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procEntry{}, false
	}
	st := f[0]
	zombie := len(st) == 1 && (st[0] == 'Z' || st[0] == 'X')
	return procEntry{pid: pid, ppid: ppid, pgid: pgid, start: start, zombie: zombie}, true
}

// procStart returns the start time of process pid (clock ticks since boot).
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	e, ok := parseStat(b)
	if !ok || e.zombie {
		return 0, false
	}
	return e.start, true
}

// envHas reports whether process pid was started with the environment
// entry kv ("KEY=value"). Processes of other users are unreadable: false.
func envHas(pid int, kv string) bool {
	if kv == "" {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// reap collects the exit status of pid, a process marina adopted as a
// child subreaper, if it has exited. Only pids marina identified as
// adopted plugin descendants are passed here: never wait(-1), which would
// steal the exit status of os/exec's children.
func reap(pid int) {
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
}

// subreaper counts the running plugins; while there is one, marina is a
// child subreaper (PR_SET_CHILD_SUBREAPER): descendants a plugin orphans
// (its hook's setsid'd daemons, or every child when the plugin itself
// crashed) are re-parented to marina instead of init, where the stop
// sequence finds and kills them.
var subreaper struct {
	sync.Mutex
	n int
	// on is whether the kernel accepted PR_SET_CHILD_SUBREAPER.
	on bool
}

// adoptsOrphans reports whether marina is a child subreaper now: then
// every live process descended from a plugin it started is below marina
// (re-parenting goes to the nearest living subreaper ancestor).
func adoptsOrphans() bool {
	subreaper.Lock()
	defer subreaper.Unlock()
	return subreaper.on
}

// holdSubreaper makes marina a child subreaper until release is called
// as many times as holdSubreaper was.
func holdSubreaper() (release func()) {
	subreaper.Lock()
	defer subreaper.Unlock()
	if subreaper.n == 0 {
		subreaper.on = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
	}
	subreaper.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			subreaper.Lock()
			defer subreaper.Unlock()
			subreaper.n--
			if subreaper.n == 0 {
				_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
				subreaper.on = false
			}
		})
	}
}
