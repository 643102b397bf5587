//go:build linux

package plugin

import (
	"errors"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// procTable returns the processes procTree.members has to look at for the
// plugin whose pid is root, as seen by marina (self).
//
// While marina is a child subreaper, every live process descended from the
// plugin is in the plugin's subtree or, once orphaned, below one of
// marina's children: the kernel re-parents an orphan to its nearest living
// subreaper ancestor. So walking marina's children and their subtrees
// through the kernel's per-thread children lists
// (/proc/PID/task/TID/children) finds every member — and leaves out the
// rest of the machine, which reading every /proc/PID/stat would pay for at
// each stop (the walk costs a few dozen small reads). Other running plugins' subtrees are skipped:
// nothing of this plugin can be re-parented into them, as re-parenting
// only ever goes up the ancestor chain.
//
// The kernel documents the children lists as exact only for stopped tasks:
// a fork racing the read may be missed. So is a fork racing a read of the
// whole table; the stop sequence therefore freezes what it found and looks
// again before each SIGKILL, and loops until nothing is left (procTree.end).
//
// Without the subreaper status, or on a kernel built without the children
// lists (CONFIG_PROC_CHILDREN), it reads the whole table.
func procTable(root, self int) []procEntry {
	if adoptsOrphans() && childrenListed() {
		if table, ok := walkProcs(root, self, livePlugins.has); ok {
			return table
		}
	}
	return listProcs()
}

// childrenListed reports whether this kernel has /proc/PID/task/TID/children.
var childrenListed = sync.OnceValue(func() bool {
	pid := unix.Getpid()
	var st unix.Stat_t
	return unix.Stat("/proc/"+strconv.Itoa(pid)+"/task/"+strconv.Itoa(pid)+"/children", &st) == nil
})

// walkProcs returns the stat entries of every process below self (marina)
// except the subtrees of the children skip names (other running plugins;
// root is never skipped). ok is false when marina's own children cannot be
// listed.
func walkProcs(root, self int, skip func(int) bool) (table []procEntry, ok bool) {
	var buf [4096]byte
	kids, ok := childrenOf(self, buf[:])
	if !ok {
		return nil, false
	}
	queue := make([]int, 0, len(kids)+1)
	for _, c := range kids {
		if c == root || !skip(c) {
			queue = append(queue, c)
		}
	}
	seen := make(map[int]bool, len(queue))
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if pid <= 1 || pid == self || seen[pid] {
			continue
		}
		seen[pid] = true
		b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
		if !ok {
			continue // exited meanwhile
		}
		e, ok := parseStat(b)
		if !ok {
			continue
		}
		table = append(table, e)
		if e.zombie {
			continue // its children were re-parented when it exited
		}
		cs, ok := childrenOf(pid, buf[:])
		if !ok {
			// A live process whose children cannot be listed (its task
			// dir vanished between the reads: it exited): its children
			// went to marina, where the next look finds them.
			continue
		}
		queue = append(queue, cs...)
	}
	return table, true
}

// childrenOf returns the children of process pid: the union of its
// threads' children lists (a child is listed under the thread that
// forked it). ok is false if the process's task dir cannot be read, or a
// list does not fit in buf.
func childrenOf(pid int, buf []byte) (kids []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, ok := readDirNames(dir, buf)
	if !ok {
		return nil, false
	}
	for _, tid := range tids {
		b, ok := readOnce(dir+tid+"/children", buf) // empty for most threads
		if !ok {
			continue // the thread exited; its children went to a sibling thread
		}
		kids = appendPids(kids, b)
	}
	return kids, true
}

// appendPids appends the space-separated pids of b to pids.
func appendPids(pids []int, b []byte) []int {
	n, digits := 0, false
	for _, c := range b {
		if c >= '0' && c <= '9' {
			n = n*10 + int(c-'0')
			digits = true
			continue
		}
		if digits {
			pids = append(pids, n)
		}
		n, digits = 0, false
	}
	if digits {
		pids = append(pids, n)
	}
	return pids
}

// readDirNames lists a directory's entries (without . and ..) with one
// open and getdents calls, using buf.
func readDirNames(dir string, buf []byte) (names []string, ok bool) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n <= 0 {
			return names, true
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

// noChildren reports whether marina, a child subreaper, has no child
// process at all, live or exited: then nothing any plugin started is left
// anywhere (every such process would be below marina). The kernel answers
// (waitid with WNOWAIT reaps nothing, so os/exec's children keep their
// exit status).
func noChildren() bool {
	if !adoptsOrphans() {
		return false
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return errors.Is(err, unix.ECHILD)
	}
}
