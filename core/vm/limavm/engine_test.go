package limavm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
)

// buildEngine builds cmd/marina-lima into dir and returns its path.
func buildEngine(t *testing.T, dir string) string {
	t.Helper()
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, EngineName)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/marina-lima")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", EngineName, err, b)
	}
	return out
}

// TestEngineRequests runs the real engine: its info, a request it does not
// know, the lima driver's operations on a VM that does not exist (status:
// absent; ssh-target: not running; plan-resize: nothing; down and destroy:
// nothing to do), the Driver's answers through it, a request without a
// config, and its refusal to be run by hand or by a marina of another
// release.
func TestEngineRequests(t *testing.T) {
	exe := buildEngine(t, t.TempDir())
	home := t.TempDir()
	ctx := context.Background()
	cfg := config.Default()
	cfg.VM.Name = "enginetest"
	req := func(op string) EngineRequest { return EngineRequest{Op: op, Home: home, Config: cfg} }

	info, err := runEngine(ctx, exe, EngineRequest{Op: OpInfo}, nil)
	if err != nil || info.VZ || info.LimaVersion == "" {
		t.Fatalf("info = %+v, %v (off macOS the engine has no vz driver)", info, err)
	}
	if _, err := runEngine(ctx, exe, req("reboot"), nil); err == nil || !strings.Contains(err.Error(), `unknown engine operation "reboot"`) {
		t.Errorf("unknown op: %v", err)
	}
	if _, err := runEngine(ctx, exe, EngineRequest{Op: OpStatus, Home: home}, nil); err == nil || !strings.Contains(err.Error(), "no home directory or config") {
		t.Errorf("status without a config: %v", err)
	}

	d := New(cfg, home)
	d.Executable = exe
	st, err := d.Status(ctx)
	if err != nil || st.State != vm.Absent || st.Name != "enginetest" || st.Driver != "lima" {
		t.Errorf("Status of no VM = %+v, %v", st, err)
	}
	if r, err := d.PlanResize(ctx); err != nil || !r.Empty() {
		t.Errorf("PlanResize of no VM = %+v, %v", r, err)
	}
	if _, err := d.Exec(ctx, []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Exec on no VM: %v", err)
	}
	if err := d.Stop(ctx); err != nil {
		t.Errorf("Stop of no VM: %v", err)
	}
	if err := d.Delete(ctx); err != nil {
		t.Errorf("Delete of no VM: %v", err)
	}

	// A request from a marina of another release: the engine refuses it.
	cmd := exec.Command(exe, EngineArg)
	cmd.Stdin = strings.NewReader(`{"protocol":99,"op":"info"}`)
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("engine protocol %d, the marina that ran it 99", EngineProtocol)) || !strings.Contains(string(out), "same release") {
		t.Errorf("protocol 99: %v\n%s", err, out)
	}

	out, err = exec.Command(exe, "start").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "marina runs it") {
		t.Errorf("%s start by hand: %v\n%s", EngineName, err, out)
	}
}

// TestEngineNotFound: without an engine beside marina or on PATH, the
// error names it and how to get it.
func TestEngineNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := runEngine(context.Background(), "", EngineRequest{Op: OpInfo}, nil)
	if err == nil || !strings.Contains(err.Error(), EngineName+", marina's Lima engine") || !strings.Contains(err.Error(), "reinstall marina") {
		t.Fatalf("err = %v", err)
	}
	// Beside the running program (here: the test binary) it is found.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sibling := filepath.Join(filepath.Dir(self), EngineName)
	if err := os.WriteFile(sibling, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	defer os.Remove(sibling)
	if p, err := enginePath(""); err != nil || p != sibling {
		t.Errorf("enginePath = %q, %v; want %s", p, err, sibling)
	}
}

// fakeEngine writes a shell script that speaks the engine's protocol the
// way the tests need (the boundary: the real engine cannot boot a VM here).
func fakeEngine(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), EngineName)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEngineInterrupted: when marina's context ends, the engine gets
// SIGINT, and its answer (the VM keeps booting) comes back as
// ErrStartInterrupted wrapping the context's error; the progress lines
// came through on the way.
func TestEngineInterrupted(t *testing.T) {
	exe := fakeEngine(t, `trap 'echo "{\"protocol\":2,\"error\":\"stopped waiting for the VM marina; it keeps booting\",\"interrupted\":true}"; exit 0' INT
cat >/dev/null
echo '{"progress":"booting the VM"}'
sleep 30 &
wait
`)
	var mu sync.Mutex
	var lines []string
	progress := func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for range 200 {
			mu.Lock()
			n := len(lines)
			mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	_, err := runEngine(ctx, exe, EngineRequest{Op: OpUp}, progress)
	if !errors.Is(err, ErrStartInterrupted) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "keeps booting") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the interrupted engine took %s to answer", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || lines[0] != "booting the VM" {
		t.Errorf("progress = %q", lines)
	}
}

// TestEngineProtocolMismatch: an engine of another release (its result
// carries another protocol, or none) is refused, whatever it answered.
func TestEngineProtocolMismatch(t *testing.T) {
	for _, answer := range []string{`{"done":true}`, `{"protocol":1,"done":true}`, `{"protocol":7,"error":"boom"}`} {
		exe := fakeEngine(t, "cat >/dev/null\necho '"+answer+"'\n")
		_, err := runEngine(context.Background(), exe, EngineRequest{Op: OpInfo}, nil)
		if !errors.Is(err, ErrEngineProtocol) || !strings.Contains(err.Error(), "same release") {
			t.Errorf("%s: err = %v", answer, err)
		}
	}
	exe := fakeEngine(t, "cat >/dev/null\necho '{\"protocol\":2,\"done\":true,\"limaVersion\":\"x\"}'\n")
	if ev, err := runEngine(context.Background(), exe, EngineRequest{Op: OpInfo}, nil); err != nil || ev.LimaVersion != "x" {
		t.Errorf("same protocol: %+v, %v", ev, err)
	}
}

// TestEngineDiesWithoutResult: an engine that exits without a result is
// an error carrying its last stderr lines.
func TestEngineDiesWithoutResult(t *testing.T) {
	exe := fakeEngine(t, "cat >/dev/null\necho 'panic: boom' >&2\nexit 2\n")
	_, err := runEngine(context.Background(), exe, EngineRequest{Op: OpDown}, nil)
	if err == nil || !strings.Contains(err.Error(), "ended without a result") || !strings.Contains(err.Error(), "panic: boom") {
		t.Fatalf("err = %v", err)
	}

	// A process the dead engine left behind holds its stdout and stderr:
	// marina still answers, within engineDrain, not when that process ends.
	exe = fakeEngine(t, "cat >/dev/null\nsleep 30 &\necho 'panic: orphan' >&2\nexit 2\n")
	start := time.Now()
	_, err = runEngine(context.Background(), exe, EngineRequest{Op: OpDown}, nil)
	if err == nil || !strings.Contains(err.Error(), "panic: orphan") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > engineDrain+5*time.Second {
		t.Errorf("runEngine took %s with an orphan holding the engine's output", d)
	}
}

// TestResizePlanned: Start applies a change to a stopped VM, and to a
// running one only when it may restart it; no change is nothing to do.
func TestResizePlanned(t *testing.T) {
	grow := Resize{CPUs: [2]int{4, 6}, Memory: [2]string{"10GiB", "10240MiB"}, Disk: [2]string{"40GiB", "40GiB"}}
	running := grow
	running.Running = true
	same := Resize{CPUs: [2]int{4, 4}, Memory: [2]string{"10GiB", "10240MiB"}, Running: true}
	for _, tc := range []struct {
		name     string
		r        Resize
		restart  bool
		change   string
		restarts bool
	}{
		{"stopped", grow, false, "cpus 4→6", false},
		{"stopped, restart allowed", grow, true, "cpus 4→6", false},
		{"running, no restart", running, false, "", false},
		{"running, restart", running, true, "cpus 4→6", true},
		{"no change", same, true, "", false},
	} {
		if change, restarts := tc.r.Planned(tc.restart); change != tc.change || restarts != tc.restarts {
			t.Errorf("%s: Planned = %q, %v; want %q, %v", tc.name, change, restarts, tc.change, tc.restarts)
		}
	}
}
