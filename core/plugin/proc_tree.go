//go:build unix

package plugin

import (
	"os"
	"syscall"
	"time"
)

// procEntry is one process of a snapshot of the process table.
type procEntry struct {
	pid, ppid, pgid int
	// start is when the process started, in the OS's units; with pid it
	// identifies the process across pid reuse.
	start  uint64
	zombie bool
}

func (e procEntry) key() procKey { return procKey{e.pid, e.start} }

// procKey identifies a process: its pid and start time.
type procKey struct {
	pid   int
	start uint64
}

// procTree is what marina knows of one plugin's processes. A member is
//
//   - the plugin itself, or in its process group;
//   - a process seen as a member before (same pid and start time), so
//     that a descendant re-parented away from the tree is still found;
//   - a child of marina started with the plugin's token in its
//     environment (go-plugin's PLUGIN_UNIX_SOCKET_DIR=<this instance's
//     socket dir>, which every descendant inherits unless it clears its
//     environment): an orphan marina adopted as a child subreaper;
//   - a descendant of any of these (found by walking parent pids), which
//     is how a grandchild that called setsid(2) — and so left the group —
//     is still found.
type procTree struct {
	root  int // the plugin's pid and process group id
	token string
	self  int
	known map[procKey]bool
}

func newProcTree(root int, token string) *procTree {
	t := &procTree{root: root, token: token, self: os.Getpid(), known: map[procKey]bool{}}
	if start, ok := procStart(root); ok {
		t.known[procKey{root, start}] = true
	}
	return t
}

// members returns the tree's live processes now, and its zombies that
// are marina's adopted children (to be reaped). It remembers every member.
func (t *procTree) members() (live []procEntry, adoptedZombies []int) {
	table := procTable(t.root, t.self)
	children := map[int][]int{}
	byPid := map[int]procEntry{}
	for _, e := range table {
		byPid[e.pid] = e
		children[e.ppid] = append(children[e.ppid], e.pid)
	}
	// The group id is the plugin's pid: if that pid now belongs to another
	// process, the id was reused and the group is not the plugin's.
	group := t.root > 0
	if leader, ok := byPid[t.root]; ok && !t.known[leader.key()] {
		group = false
	}
	in := map[int]bool{}
	var queue []int
	for _, e := range table {
		if e.pid == t.self || e.pid <= 1 {
			continue
		}
		if t.known[e.key()] || (group && e.pgid == t.root) ||
			(e.ppid == t.self && e.pid != t.root && !e.zombie && envHas(e.pid, t.token)) {
			in[e.pid] = true
			queue = append(queue, e.pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !in[c] && c != t.self {
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	for pid := range in {
		e := byPid[pid]
		t.known[e.key()] = true
		switch {
		case !e.zombie:
			live = append(live, e)
		case e.ppid == t.self && e.pid != t.root:
			// The plugin itself is reaped by its runner's Wait; any
			// other zombie child of marina here is an adopted orphan.
			adoptedZombies = append(adoptedZombies, e.pid)
		}
	}
	return live, adoptedZombies
}

// scan records the tree's current members (a snapshot taken before the
// plugin is asked to stop, while the tree is still connected).
func (t *procTree) scan() { t.members() }

// alive reports whether a member still runs, reaping adopted zombies.
func (t *procTree) alive() bool {
	live, zombies := t.members()
	for _, pid := range zombies {
		reap(pid)
	}
	return len(live) > 0
}

// waitGone polls until no member runs, up to d.
func (t *procTree) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for t.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// end stops every member: SIGTERM and up to grace for them to exit (when
// term), then SIGKILL until none is left, up to killWait. Each SIGKILL
// round first freezes the members it finds with SIGSTOP and looks again,
// so that a process cannot fork a child and exit between the look and the
// kill. It returns the number of members still alive.
func (t *procTree) end(grace time.Duration, term bool) int {
	if term {
		live, _ := t.members()
		if len(live) == 0 {
			return 0
		}
		for _, e := range live {
			_ = syscall.Kill(e.pid, syscall.SIGTERM)
		}
		if t.waitGone(grace) {
			return 0
		}
	}
	deadline := time.Now().Add(killWait)
	for {
		live, zombies := t.members()
		for _, pid := range zombies {
			reap(pid)
		}
		if len(live) == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			return len(live)
		}
		for _, e := range live {
			_ = syscall.Kill(e.pid, syscall.SIGSTOP)
		}
		again, _ := t.members()
		for _, e := range again {
			_ = syscall.Kill(e.pid, syscall.SIGSTOP)
		}
		for _, e := range append(live, again...) {
			_ = syscall.Kill(e.pid, syscall.SIGKILL)
		}
		time.Sleep(pollInterval)
	}
}
