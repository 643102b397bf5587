package plugintest_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestNoLeakedChildren: a plugin whose hook leaves processes behind (a
// child, a `sleep`, a setsid(2) grandchild and an orphaned setsid
// grandchild: testdata/treeplugin, which core/plugin's tests use too) leaves none once its test
// ended.
func TestNoLeakedChildren(t *testing.T) {
	bin := plugintest.Build(t, "./testdata/treeplugin")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	marker := "mk" + hex.EncodeToString(b)
	pidDir := t.TempDir()
	// Start runs a binary without arguments: a wrapper passes them.
	wrapper := filepath.Join(t.TempDir(), "tree")
	script := "#!/bin/sh\nexec " + bin + " -marker " + marker + " -dir " + pidDir + " -mode return\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var pid int
	t.Run("hook leaves a tree", func(t *testing.T) {
		h := plugintest.Start(t, wrapper)
		pid = h.PID()
		if _, err := h.Run(sdk.PostCluster); err != nil {
			t.Fatalf("PostCluster: %v%s", err, h.Stderr())
		}
		if left := treeLeft(marker, pidDir); len(left) < 5 {
			t.Fatalf("the hook's tree is not running: %q", left)
		}
	})
	requireGone(t, pid)
	// The harness returns once the plugin is gone; its descendants die
	// with it (sdk.Serve kills them before exiting), so nothing is left.
	if left := treeLeft(marker, pidDir); len(left) != 0 {
		// Report what leaked, then stop it: the test must not leak.
		for _, l := range left {
			if p, err := strconv.Atoi(strings.Fields(l)[0]); err == nil {
				if proc, err := os.FindProcess(p); err == nil {
					_ = proc.Kill()
				}
			}
		}
		t.Fatalf("processes the plugin started outlived its test: %q", left)
	}
}

// treeLeft lists the live processes of the tree: those with marker in
// their arguments and the recorded `sleep 300`.
func treeLeft(marker, pidDir string) []string {
	sleeps := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(pidDir, "sleep-*"))
	for _, f := range files {
		sleeps[strings.TrimPrefix(filepath.Base(f), "sleep-")] = true
	}
	var left []string
	// A process killed a moment ago may still be a zombie awaiting its
	// reaper: wait briefly for the table to settle.
	deadline := time.Now().Add(time.Second)
	for {
		left = left[:0]
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, st := range stats {
			dir := filepath.Dir(st)
			pid := filepath.Base(dir)
			b, err := os.ReadFile(st)
			if err != nil {
				continue
			}
			if i := strings.LastIndexByte(string(b), ')'); i > 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
					continue
				}
			}
			cl, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
			cmd := strings.ReplaceAll(string(cl), "\x00", " ")
			if strings.Contains(cmd, marker) || (sleeps[pid] && strings.HasPrefix(cmd, "sleep 300")) {
				left = append(left, pid+" "+cmd)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}
