//go:build linux

package plugin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// descendantsInTable returns the pids below self according to the whole
// process table (parent pids), the reference walkProcs must agree with.
func descendantsInTable(self int) map[int]bool {
	table := listProcs()
	children := map[int][]int{}
	for _, e := range table {
		children[e.ppid] = append(children[e.ppid], e.pid)
	}
	out := map[int]bool{}
	queue := slices.Clone(children[self])
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if out[pid] {
			continue
		}
		out[pid] = true
		queue = append(queue, children[pid]...)
	}
	return out
}

// startFromThread starts cmd from an OS thread other than the main one, so
// that the child is listed under that thread's children file, not the main
// thread's, until the test ends. A goroutine that finds itself on the main
// thread stays locked there until the test ends, so the next one runs
// elsewhere.
func startFromThread(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for range 10 {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			if unix.Gettid() == os.Getpid() {
				errc <- errMainThread
				<-release
				return
			}
			errc <- cmd.Start()
			// The thread stays: when a thread exits, the kernel moves
			// its children to another thread of the process.
			<-release
		}()
		err := <-errc
		if errors.Is(err, errMainThread) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return
	}
	t.Fatal("every goroutine ran on the main thread")
}

var errMainThread = errors.New("on the main thread")

// TestWalkMatchesProcessTable: with marina a child subreaper, the walk over
// the kernel's children lists finds exactly the processes below marina
// that the whole process table shows — children started from different
// threads, a setsid(2) grandchild, an orphan marina adopted and its child —
// and leaves out the subtree of a process skip names.
func TestWalkMatchesProcessTable(t *testing.T) {
	if !childrenListed() {
		t.Fatal("this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): procTable reads the whole table here, and this test cannot check the walk")
	}
	release := holdSubreaper()
	defer release()
	if !adoptsOrphans() {
		t.Fatal("PR_SET_CHILD_SUBREAPER was refused")
	}
	self := os.Getpid()
	marker := newMarker(t)

	// The test's sleeps run as a symlink named after the marker, so that
	// their command lines carry it.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	s := filepath.Join(t.TempDir(), "sleep-"+marker)
	if err := os.Symlink(sleep, s); err != nil {
		t.Fatal(err)
	}
	// A plain child, started from another thread.
	plain := exec.Command(s, "60")
	startFromThread(t, plain)
	// A child with a setsid grandchild that has a child of its own.
	tree := exec.Command("sh", "-c", `setsid sh -c '"$1" 61 & exec "$1" 62' sh "$1" & exec "$1" 63`, "sh", s)
	startFromThread(t, tree)
	// An orphan: its parent exits at once, so it is re-parented to us.
	orphan := exec.Command("sh", "-c", `sh -c '"$1" 64 & exec "$1" 65' sh "$1" & exit 0`, "sh", s)
	if err := orphan.Run(); err != nil {
		t.Fatal(err)
	}
	// Another plugin's subtree, to be skipped.
	other := exec.Command("sh", "-c", `"$1" 66 & exec "$1" 67`, "sh", s)
	startFromThread(t, other)
	defer killMarked(marker)

	// Every process of ours is up (8 sleeps; the shells exec'd into them)
	// before comparing.
	deadline := time.Now().Add(10 * time.Second)
	for len(markedProcs(marker)) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("the test's processes did not start: %v", markedProcs(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}

	table, ok := walkProcs(plain.Process.Pid, self, func(int) bool { return false })
	if !ok {
		t.Fatal("walkProcs could not list this process's children")
	}
	got := map[int]bool{}
	for _, e := range table {
		got[e.pid] = true
	}
	want := descendantsInTable(self)
	for pid := range markedProcs(marker) {
		if !got[pid] {
			t.Errorf("walk misses pid %d (%s), which runs below this process", pid, cmdline(pid))
		}
	}
	for pid := range want {
		if !got[pid] && descendantsInTable(self)[pid] {
			t.Errorf("walk misses pid %d (%s), which the process table shows below this process", pid, cmdline(pid))
		}
	}
	for pid := range got {
		if !want[pid] && descendantsInTable(self)[pid] {
			continue // started between the two reads
		}
		if !want[pid] {
			t.Errorf("walk has pid %d (%s), which is not below this process", pid, cmdline(pid))
		}
	}

	// Skipping the other plugin leaves out it and its child, nothing else.
	otherPid := other.Process.Pid
	skipped, ok := walkProcs(plain.Process.Pid, self, func(pid int) bool { return pid == otherPid })
	if !ok {
		t.Fatal("walkProcs could not list this process's children")
	}
	if d := len(table) - len(skipped); d != 2 {
		t.Errorf("skipping pid %d removed %d processes, want 2 (it and its sleep)", otherPid, d)
	}
	for _, e := range skipped {
		if e.pid == otherPid || e.ppid == otherPid {
			t.Errorf("the skipped subtree is walked: pid %d (%s)", e.pid, cmdline(e.pid))
		}
	}
}

// TestNoChildren: the kernel's answer is true only when this process (a
// child subreaper) has no child at all, running or exited and unreaped,
// and never when it is not a subreaper. It runs in a fresh process of the
// test binary, which has no child of earlier tests.
func TestNoChildren(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "MARINA_PLUGIN_TEST_NOCHILDREN=1")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("%v\n%s", err, out)
	}
}

func init() {
	if os.Getenv("MARINA_PLUGIN_TEST_NOCHILDREN") != "" {
		if err := noChildrenSequence(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("ok")
		os.Exit(0)
	}
}

// noChildrenSequence is TestNoChildren's body, run in a process of its own.
func noChildrenSequence() error {
	if noChildren() {
		return errors.New("noChildren is true while this process is not a child subreaper")
	}
	release := holdSubreaper()
	defer release()
	if !noChildren() {
		return errors.New("noChildren is false before any child was started")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		return err
	}
	if noChildren() {
		_ = cmd.Process.Kill()
		return errors.New("noChildren is true while a child runs")
	}
	_ = cmd.Process.Kill()
	// Exited, not yet reaped: a zombie child is still a child.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
		if e, ok := parseStat(b); ok && e.zombie {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the killed child did not become a zombie")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if noChildren() {
		return errors.New("noChildren is true while an exited child awaits its Wait")
	}
	if err := cmd.Wait(); err == nil {
		return errors.New("the killed child exited 0")
	}
	if !noChildren() {
		return errors.New("noChildren is false once the child was reaped")
	}
	return nil
}

// TestChildrenOfThreads: a child is listed under the thread that forked it;
// childrenOf unions every thread's list.
func TestChildrenOfThreads(t *testing.T) {
	var cmds []*exec.Cmd
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			cmd := exec.Command("sleep", "30")
			startFromThread(t, cmd)
			mu.Lock()
			cmds = append(cmds, cmd)
			mu.Unlock()
		})
	}
	wg.Wait()
	kids := mustChildren(t)
	for _, c := range cmds {
		if !slices.Contains(kids, c.Process.Pid) {
			t.Errorf("childrenOf(self) = %v misses child %d", kids, c.Process.Pid)
		}
	}
}

func TestAppendPids(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"12 ", []int{12}},
		{"1 22 333", []int{1, 22, 333}},
		{"7\n", []int{7}},
	} {
		if got := appendPids(nil, []byte(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("appendPids(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// killMarked kills the processes carrying marker and reaps those that are
// this process's children (the adopted orphans: nothing else waits for
// them).
func killMarked(marker string) {
	self := os.Getpid()
	for _, e := range listProcs() {
		if strings.Contains(cmdline(e.pid), marker) {
			_ = syscall.Kill(e.pid, syscall.SIGKILL)
			if e.ppid == self {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(e.pid, &ws, 0, nil)
			}
		}
	}
}

func mustChildren(t *testing.T) []int {
	t.Helper()
	var buf [4096]byte
	kids, ok := childrenOf(os.Getpid(), buf[:])
	if !ok {
		t.Fatal("cannot list this process's children")
	}
	return kids
}

// markedProcs returns the live processes whose program (argv[0]) has
// marker in its name.
func markedProcs(marker string) map[int]bool {
	out := map[int]bool{}
	for _, e := range listProcs() {
		argv0, _, _ := strings.Cut(cmdline(e.pid), " ")
		if !e.zombie && strings.Contains(argv0, marker) {
			out[e.pid] = true
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}
