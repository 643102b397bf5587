//go:build linux

package plugin

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildTree builds the SDK's plugintest/testdata/treeplugin (and testdata/treehost when host)
// into a temporary directory.
func buildTree(t *testing.T, host bool) (pluginBin, hostBin string) {
	t.Helper()
	dir := t.TempDir()
	pkgs := []string{"github.com/bcollard/marina/sdk/plugintest/testdata/treeplugin"} // in the SDK module: its harness tests use it too
	if host {
		pkgs = append(pkgs, "./testdata/treehost")
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %v: %v\n%s", pkgs, err, out)
	}
	return filepath.Join(dir, "treeplugin"), filepath.Join(dir, "treehost")
}

// treeLeft lists the live processes of a treeplugin tree: those carrying
// marker in their arguments, and the `sleep 300` whose pid the tree
// recorded in pidDir.
func treeLeft(t *testing.T, marker, pidDir string) []string {
	t.Helper()
	sleeps := map[int]bool{}
	files, _ := filepath.Glob(filepath.Join(pidDir, "sleep-*"))
	for _, f := range files {
		if pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(f), "sleep-")); err == nil {
			sleeps[pid] = true
		}
	}
	var left []string
	for _, p := range processes(t) {
		if strings.Contains(p.cmdline, marker) || (sleeps[p.pid] && strings.Contains(p.cmdline, "sleep 300")) {
			left = append(left, strconv.Itoa(p.pid)+" "+p.cmdline)
		}
	}
	return left
}

// shortRunDir returns a new run dir with a short path: a long one (such as
// t.TempDir's) would make marina fall back to $TMPDIR for the sockets.
func shortRunDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// socketDirs lists go-plugin socket dirs under runDir.
func socketDirs(runDir string) []string {
	dirs, _ := filepath.Glob(filepath.Join(runDir, "plugins", "*", "plugin-dir*"))
	return dirs
}

// waitNothingLeft polls up to d until no process of the tree and no socket
// dir remain, and fails naming what is left.
func waitNothingLeft(t *testing.T, d time.Duration, marker, pidDir, runDir string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		procs, dirs := treeLeft(t, marker, pidDir), socketDirs(runDir)
		if len(procs) == 0 && len(dirs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the end: processes %q, socket dirs %q remain", d, procs, dirs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLifetimeHostKilled: kill -9 of marina (a stand-in running a hook
// whose plugin left a child, a `sleep`, a setsid grandchild and an
// orphaned setsid grandchild) leaves no process of the tree and no socket
// dir within 2s; the next start removes the dead marina's socket base dir.
func TestLifetimeHostKilled(t *testing.T) {
	t.Parallel()
	pluginBin, hostBin := buildTree(t, true)
	marker, pidDir, runDir := newMarker(t), t.TempDir(), shortRunDir(t)
	host := exec.Command(hostBin, "-plugin", pluginBin, "-marker", marker, "-dir", pidDir, "-rundir", runDir)
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(time.Minute)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the host exited before its hook reported the tree")
			}
			if l == "ready" {
				break wait
			}
			if strings.HasPrefix(l, "error:") {
				t.Fatalf("host: %s", l)
			}
		case <-timeout:
			t.Fatal("the host's hook did not report its tree within a minute")
		}
	}
	// The whole tree runs: the plugin, child, two leaves, and the sleep.
	if left := treeLeft(t, marker, pidDir); len(left) < 5 {
		t.Fatalf("the tree is not running: %q", left)
	}
	if dirs := socketDirs(runDir); len(dirs) != 1 {
		t.Fatalf("socket dirs under the run dir = %q, want the plugin's one", dirs)
	}
	hostBase, _ := filepath.Glob(filepath.Join(runDir, "plugins", strconv.Itoa(host.Process.Pid)+"-*"))
	if len(hostBase) != 1 {
		t.Fatalf("the host's socket base dir is missing: %q", hostBase)
	}

	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	waitNothingLeft(t, 2*time.Second, marker, pidDir, runDir)

	// The next marina removes the dead one's base dir, and its own on Close.
	opts := testOpts()
	opts.RunDir = runDir
	inst, err := Start(context.Background(), Spec{Name: "tree", Path: pluginBin, Args: []string{"-marker", marker, "-dir", t.TempDir()}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hostBase[0]); !os.IsNotExist(err) {
		t.Errorf("the killed host's socket base dir %s was not swept at the next start (%v)", hostBase[0], err)
	}
	if err := inst.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(runDir, "plugins")); len(entries) != 0 {
		t.Errorf("after Close, %s holds %v", filepath.Join(runDir, "plugins"), entries)
	}
}

// TestLifetimeStopKillsTree: when marina stops a plugin (hook timeout,
// Ctrl-C, Close), every process the plugin started is gone when the call
// returns, setsid(2) grandchildren and orphans included, with or without
// the SDK's own teardown (-raw: only marina kills them).
func TestLifetimeStopKillsTree(t *testing.T) {
	t.Parallel()
	pluginBin, _ := buildTree(t, false)
	for _, tc := range []struct {
		name string
		raw  bool
		stop string // timeout, cancel or close
	}{
		{"sdk plugin, hook timeout", false, "timeout"},
		{"sdk plugin, Close after the hook", false, "close"},
		{"raw plugin, Ctrl-C", true, "cancel"},
		{"raw plugin, hook timeout", true, "timeout"},
		{"raw plugin, Close after the hook", true, "close"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker, pidDir, runDir := newMarker(t), t.TempDir(), shortRunDir(t)
			args := []string{"-marker", marker, "-dir", pidDir}
			if tc.raw {
				args = append(args, "-raw")
			}
			if tc.stop == "close" {
				args = append(args, "-mode", "return")
			}
			opts := testOpts()
			opts.RunDir = runDir
			inst, err := Start(context.Background(), Spec{Name: "tree", Path: pluginBin, Args: args}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			spawned := false
			timeout := time.Minute
			if tc.stop == "timeout" {
				timeout = 3 * time.Second
			}
			_, err = inst.RunHook(ctx, hookCall(""), timeout, func(msg string) {
				if msg == "spawned" {
					spawned = true
					if left := treeLeft(t, marker, pidDir); len(left) < 5 {
						t.Errorf("the tree is not running: %q", left)
					}
					if tc.stop == "cancel" {
						cancel()
					}
				}
			})
			if !spawned {
				t.Fatalf("the hook did not report its tree: %v", err)
			}
			switch tc.stop {
			case "close":
				if err != nil {
					t.Fatalf("hook: %v", err)
				}
				if err := inst.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			case "timeout":
				if pe := asError(t, err); pe.Kind != KindTimeout {
					t.Fatalf("hook error %v (kind %s), want a timeout", err, pe.Kind)
				}
			case "cancel":
				if pe := asError(t, err); pe.Kind != KindCancelled {
					t.Fatalf("hook error %v (kind %s), want cancelled", err, pe.Kind)
				}
			}
			// Stopping returns once the tree is gone: no wait here.
			waitNothingLeft(t, 0, marker, pidDir, runDir)
		})
	}
}

// TestSweepSocketBases: base dirs of marina processes that no longer run
// (or whose pid now names another process) are removed, others kept.
func TestSweepSocketBases(t *testing.T) {
	plugins := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self := ownerName()
	reused := strconv.Itoa(os.Getpid()) + "-1" // this pid, another start time
	for _, name := range []string{self, strconv.Itoa(dead.Process.Pid) + "-5", reused, "notes"} {
		if err := os.MkdirAll(filepath.Join(plugins, name, "plugin-dir1"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepSocketBases(plugins)
	var got []string
	entries, _ := os.ReadDir(plugins)
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join([]string{"notes", self}, ",") && strings.Join(got, ",") != self+",notes" {
		t.Errorf("after the sweep: %v, want only %s and notes", got, self)
	}
}

// TestSocketBaseFallback: a run dir whose socket paths would be too long
// for sun_path is not used; $TMPDIR/marina-<uid>/run is, and the base dir
// goes when its last user releases it.
func TestSocketBaseFallback(t *testing.T) {
	tmp := shortRunDir(t)
	t.Setenv("TMPDIR", tmp)
	long := filepath.Join(tmp, strings.Repeat("d", 80))
	base, release, err := acquireSocketBase(long)
	if err == nil || !strings.Contains(err.Error(), "socket paths would exceed") || !strings.Contains(err.Error(), long) {
		t.Errorf("acquireSocketBase(%s) error = %v, want the run dir named as too long", long, err)
	}
	want := filepath.Join(tmp, "marina-"+strconv.Itoa(os.Getuid()), "run", "plugins", ownerName())
	if base != want {
		t.Fatalf("base = %q, want %q", base, want)
	}
	_, release2, _ := acquireSocketBase(long)
	release()
	if _, err := os.Stat(base); err != nil {
		t.Errorf("the base dir went while a plugin still used it: %v", err)
	}
	release2()
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("the base dir %s outlived its last user (%v)", base, err)
	}
}

// TestSocketBaseRefusesSharedDir: a run dir whose plugins dir others may
// write to is not used for sockets (the fallback is).
func TestSocketBaseRefusesSharedDir(t *testing.T) {
	tmp := shortRunDir(t)
	t.Setenv("TMPDIR", tmp)
	shared := filepath.Join(tmp, "shared")
	if err := os.MkdirAll(filepath.Join(shared, "plugins"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(shared, "plugins"), 0o777); err != nil {
		t.Fatal(err)
	}
	base, release, err := acquireSocketBase(shared)
	defer release()
	if err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("error = %v, want the shared plugins dir refused", err)
	}
	if strings.HasPrefix(base, shared) || base == "" {
		t.Errorf("base = %q, want the fallback, not %s", base, shared)
	}
}
