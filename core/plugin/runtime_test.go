package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
)

func hookCall(config string) sdk.HookCall {
	return sdk.HookCall{Hook: sdk.PostCluster, ConfigJSON: []byte(config), Cluster: &sdk.Cluster{Name: "dev", Slot: 1}, RunID: "run-1"}
}

// asError returns err as *Error or fails the test.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *plugin.Error", err, err)
	}
	return pe
}

func TestStartDescribeValidateRunClose(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	spec := tp("acme", marker, "-version", "1.2.0", "-deps", "base,extra?")
	spec.Version = "1.2.0"
	inst, err := Start(context.Background(), spec, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	pid := inst.Pid()
	assertRunning(t, marker)

	d, err := inst.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "acme" || d.Version != "1.2.0" || d.Protocol != "1.0" || !d.Has(sdk.PostCluster) || len(d.Hooks) != len(sdk.AllHooks) {
		t.Errorf("description = %+v", d)
	}
	if len(d.Dependencies) != 2 || d.Dependencies[0].Name != "base" || d.Dependencies[1].Name != "extra" || !d.Dependencies[1].Optional {
		t.Errorf("dependencies = %+v", d.Dependencies)
	}

	for _, tc := range []struct {
		config   string
		wantPath string
	}{
		{`{"mode":"ok","replicas":2}`, ""},
		{`{"replicas":-1}`, "replicas"},
		{`{"replica":1}`, "replica"},
		{`{"sleep":"soon"}`, "sleep"},
	} {
		diags, err := inst.ValidateConfig(context.Background(), []byte(tc.config))
		if err != nil {
			t.Fatalf("ValidateConfig(%s): %v", tc.config, err)
		}
		if tc.wantPath == "" && len(diags) != 0 {
			t.Errorf("ValidateConfig(%s) = %+v, want none", tc.config, diags)
		}
		if tc.wantPath != "" && (len(diags) != 1 || diags[0].Path != tc.wantPath || diags[0].Severity != sdk.SeverityError) {
			t.Errorf("ValidateConfig(%s) = %+v, want one error at %s", tc.config, diags, tc.wantPath)
		}
	}

	var progress []string
	res, err := inst.RunHook(context.Background(), hookCall(`{"mode":"ok","outputs":{"endpoint":"10.0.0.1:2379"}}`), 0, func(m string) { progress = append(progress, m) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs["endpoint"] != "10.0.0.1:2379" || res.Outputs["chain"] != "acme" {
		t.Errorf("outputs = %v", res.Outputs)
	}
	if len(progress) != 1 || progress[0] != "working on PostCluster" {
		t.Errorf("progress = %q", progress)
	}

	// A hook error is the plugin's answer, not a crash: the plugin stays usable.
	_, err = inst.RunHook(context.Background(), hookCall(`{"mode":"error"}`), 0, nil)
	pe := asError(t, err)
	if pe.Kind != KindHook || !strings.Contains(err.Error(), "plugin acme 1.2.0, hook PostCluster: the thing is broken "+marker) {
		t.Errorf("hook error = %v (kind %s)", err, pe.Kind)
	}
	if _, err := inst.RunHook(context.Background(), hookCall(`{"mode":"ok"}`), 0, nil); err != nil {
		t.Errorf("after a hook error the plugin should still work: %v", err)
	}

	if err := inst.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := inst.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	assertNoProcesses(t, marker, pid)
	if _, err := inst.RunHook(context.Background(), hookCall(`{"mode":"ok"}`), 0, nil); err == nil {
		t.Error("RunHook after Close succeeded")
	}
}

// TestHookMisbehaviour runs every kind of misbehaving hook in a real
// process and checks the error (type, plugin, hook, cause, stderr), the
// time it took, that the plugin is never called again, and that no process
// of the plugin is left.
func TestHookMisbehaviour(t *testing.T) {
	t.Parallel()
	grace := testOpts().KillGrace
	tests := []struct {
		name      string
		flags     []string
		config    string
		timeout   time.Duration
		kind      Kind
		cause     string // substring of the message, after "plugin NAME 1.0.0, hook PostCluster: "
		stderr    string // substring of one of the stderr lines
		minTime   time.Duration
		maxTime   time.Duration
		childPids bool
	}{
		{name: "panic", config: `{"mode":"panic"}`, kind: KindPanic, cause: "panicked: boom ", stderr: "hook started", maxTime: 3 * time.Second},
		{name: "hang", config: `{"mode":"hang"}`, timeout: time.Second, kind: KindTimeout, cause: "timed out after 1s", stderr: "hanging, ignoring ctx",
			minTime: time.Second, maxTime: time.Second + 2*grace + 2*time.Second},
		{name: "exit", config: `{"mode":"exit","exitCode":3}`, kind: KindExited, cause: "exited unexpectedly (exit status 3)", stderr: "exiting with code 3", maxTime: 3 * time.Second},
		{name: "child", config: `{"mode":"child"}`, timeout: time.Second, kind: KindTimeout, cause: "timed out after 1s", stderr: "spawned child",
			minTime: time.Second, maxTime: time.Second + 3*grace + 2*time.Second, childPids: true},
		// The plugin's process survives the shutdown request and ignores
		// SIGTERM: only the escalation to SIGKILL ends it, after two graces.
		{name: "ignoreterm", flags: []string{"-wedge"}, config: `{"mode":"ignoreterm"}`, timeout: 500 * time.Millisecond, kind: KindTimeout, cause: "timed out after 500ms", stderr: "ignoring SIGTERM",
			minTime: 500*time.Millisecond + 2*grace, maxTime: 500*time.Millisecond + 2*grace + 2*time.Second},
		{name: "plugin-timeout-default", flags: []string{"-timeout", "700ms"}, config: `{"mode":"hang"}`, kind: KindTimeout, cause: "timed out after 700ms", stderr: "hanging",
			minTime: 700 * time.Millisecond, maxTime: 700*time.Millisecond + 2*grace + 2*time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := newMarker(t)
			name := "mis-" + tc.name
			inst, err := Start(context.Background(), tp(name, marker, tc.flags...), testOpts())
			if err != nil {
				t.Fatal(err)
			}
			pgid := inst.Pid()
			start := time.Now()
			_, err = inst.RunHook(context.Background(), hookCall(tc.config), tc.timeout, nil)
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("RunHook succeeded")
			}
			pe := asError(t, err)
			prefix := "plugin " + name + " 1.0.0, hook PostCluster: "
			if pe.Kind != tc.kind || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), prefix+tc.cause) {
				t.Errorf("error = %q (kind %s), want kind %s and %q", err, pe.Kind, tc.kind, prefix+tc.cause)
			}
			if pe.Plugin != name || pe.Hook != "PostCluster" || pe.Version != "1.0.0" {
				t.Errorf("error fields = %q %q %q", pe.Plugin, pe.Version, pe.Hook)
			}
			if !containsLine(pe.Stderr, tc.stderr) || !strings.Contains(err.Error(), "last stderr lines of "+name+":") {
				t.Errorf("stderr lines %q lack %q, or the message lacks them:\n%s", pe.Stderr, tc.stderr, err)
			}
			if len(pe.Stderr) > 20 {
				t.Errorf("%d stderr lines attached, want at most 20", len(pe.Stderr))
			}
			if elapsed < tc.minTime || elapsed > tc.maxTime {
				t.Errorf("RunHook took %s, want between %s and %s", elapsed, tc.minTime, tc.maxTime)
			}
			if tc.kind == KindPanic && !strings.Contains(pe.Detail, "goroutine") {
				t.Errorf("panic detail lacks the stack: %q", pe.Detail)
			}
			// The plugin is failed: the next call returns the original error.
			_, err2 := inst.RunHook(context.Background(), hookCall(`{"mode":"ok"}`), 0, nil)
			if err2 != err {
				t.Errorf("second call: %v, want the original error", err2)
			}
			var children []int
			if tc.childPids {
				children = childPids(t, pe.Stderr)
			}
			// RunHook already stopped the group: check before Close.
			assertNoProcesses(t, marker, append(children, pgid)...)
			if err := inst.Close(); err != nil {
				t.Errorf("Close after a failure: %v", err)
			}
		})
	}
}

// childPids returns the pids the test plugin logged as spawned.
func childPids(t *testing.T, lines []string) []int {
	t.Helper()
	var pids []int
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["@message"] == "spawned child" {
			pids = append(pids, int(m["pid"].(float64)))
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no child pid in %q", lines)
	}
	return pids
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-a-plugin")
	if err := os.WriteFile(notExec, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		spec   func(marker string) Spec
		opts   func(o *Options)
		kind   Kind
		want   []string
		stderr string
	}{
		{name: "stdout before handshake", spec: func(m string) Spec { return tp("early", m, "-start", "stdout") },
			kind: KindStdout, want: []string{"plugin early, start: printed to stdout before the handshake: \"hello before the handshake ", "must log to stderr"}},
		{name: "exit before handshake", spec: func(m string) Spec { return tp("quitter", m, "-start", "exit") },
			kind: KindStart, want: []string{"plugin quitter, start: exited before the handshake (exit status 4)"}, stderr: "cannot initialise"},
		{name: "start timeout", spec: func(m string) Spec { return tp("sleeper", m, "-start", "sleep") }, opts: func(o *Options) { o.StartTimeout = time.Second },
			kind: KindStart, want: []string{"plugin sleeper, start: did not complete the handshake within 1s"}, stderr: "sleeping before Serve"},
		{name: "protocol 2", spec: func(m string) Spec {
			return Spec{Name: "raw", Path: rawPluginBin, Args: []string{"-proto", "2", "-marker", m}}
		}, kind: KindProtocol, want: []string{"plugin raw, start: speaks protocol 2, this marina speaks protocol 1.0: "}},
		{name: "protocol minor", spec: func(m string) Spec {
			return Spec{Name: "raw", Path: rawPluginBin, Args: []string{"-minor", "9", "-marker", m}}
		}, kind: KindProtocol, want: []string{"plugin raw 1.0.0, Describe: speaks protocol 1.9, this marina speaks protocol 1.0: upgrade marina"}},
		{name: "wrong name", spec: func(m string) Spec { s := tp("acme", m); s.Name = "other"; return s },
			kind: KindIdentity, want: []string{`describes itself as plugin "acme", not "other"`, "reinstall with marina plugin install"}},
		{name: "wrong version", spec: func(m string) Spec { s := tp("acme", m); s.Version = "2.0.0"; return s },
			kind: KindIdentity, want: []string{"plugin acme 2.0.0, Describe:", "reports version 1.0.0, but version 2.0.0 was expected"}},
		{name: "not executable", spec: func(m string) Spec { return Spec{Name: "junk", Path: notExec, Args: []string{m}} },
			kind: KindStart, want: []string{"plugin junk, start: cannot run " + notExec}},
		{name: "missing file", spec: func(m string) Spec { return Spec{Name: "gone", Path: filepath.Join(dir, "gone"), Args: []string{m}} },
			kind: KindStart, want: []string{"plugin gone, start: cannot run "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := newMarker(t)
			opts := testOpts()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			start := time.Now()
			inst, err := Start(context.Background(), tc.spec(marker), opts)
			if err == nil {
				inst.Close()
				t.Fatal("Start succeeded")
			}
			if d := time.Since(start); d > opts.StartTimeout+2*opts.KillGrace+3*time.Second {
				t.Errorf("Start took %s", d)
			}
			pe := asError(t, err)
			if pe.Kind != tc.kind {
				t.Errorf("kind = %s, want %s: %v", pe.Kind, tc.kind, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.stderr != "" && !containsLine(pe.Stderr, tc.stderr) {
				t.Errorf("stderr %q lacks %q", pe.Stderr, tc.stderr)
			}
			assertNoProcesses(t, marker)
		})
	}
}

func TestChecksum(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orig, err := os.ReadFile(testPluginBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(orig)
	good := hex.EncodeToString(sum[:])
	tampered := bytes.Clone(orig)
	tampered[len(tampered)/2] ^= 0x01
	tsum := sha256.Sum256(tampered)
	path := filepath.Join(dir, "acme")
	if err := os.WriteFile(path, tampered, 0o755); err != nil {
		t.Fatal(err)
	}

	marker := newMarker(t)
	spec := tp("acme", marker)
	spec.Path, spec.SHA256, spec.Version = path, good, "1.0.0"
	_, err = Start(context.Background(), spec, testOpts())
	pe := asError(t, err)
	for _, w := range []string{"plugin acme 1.0.0, start: refusing to run " + path, hex.EncodeToString(tsum[:]), good, "reinstall with marina plugin install"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if pe.Kind != KindChecksum {
		t.Errorf("kind = %s", pe.Kind)
	}
	assertNoProcesses(t, marker)

	spec.Path = testPluginBin
	spec.SHA256 = strings.ToUpper(good)
	inst, err := Start(context.Background(), spec, testOpts())
	if err != nil {
		t.Fatalf("the intact binary was refused: %v", err)
	}
	inst.Close()

	spec.SHA256 = "abc"
	if _, err := Start(context.Background(), spec, testOpts()); err == nil || !strings.Contains(err.Error(), "not 64 hex digits") {
		t.Errorf("malformed digest: %v", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"slow", "hang"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			marker := newMarker(t)
			inst, err := Start(context.Background(), tp("cancel-"+mode, marker), testOpts())
			if err != nil {
				t.Fatal(err)
			}
			pgid := inst.Pid()
			ctx, cancel := context.WithCancel(context.Background())
			// Cancel once the hook runs (its first progress line), not
			// after a fixed delay that a loaded machine may not honour.
			var cancelledAt atomic.Int64
			var once sync.Once
			onProgress := func(string) {
				once.Do(func() { cancelledAt.Store(time.Now().UnixNano()); cancel() })
			}
			_, err = inst.RunHook(ctx, hookCall(`{"mode":"`+mode+`","sleep":"30s"}`), time.Minute, onProgress)
			if cancelledAt.Load() == 0 {
				t.Fatalf("the hook returned without reporting progress: %v", err)
			}
			elapsed := time.Since(time.Unix(0, cancelledAt.Load()))
			pe := asError(t, err)
			if pe.Kind != KindCancelled || !errors.Is(err, context.Canceled) ||
				!strings.HasPrefix(err.Error(), "plugin cancel-"+mode+" 1.0.0, hook PostCluster: was cancelled") {
				t.Errorf("error = %v (kind %s)", err, pe.Kind)
			}
			if elapsed > 2*testOpts().KillGrace+2*time.Second {
				t.Errorf("cancellation took %s", elapsed)
			}
			assertNoProcesses(t, marker, pgid)
			inst.Close()
		})
	}
	t.Run("during start", func(t *testing.T) {
		t.Parallel()
		marker := newMarker(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel)
		start := time.Now()
		_, err := Start(ctx, tp("slowstart", marker, "-start", "sleep"), testOpts())
		pe := asError(t, err)
		if pe.Kind != KindCancelled || !strings.Contains(err.Error(), "plugin slowstart, start: was cancelled while starting") {
			t.Errorf("error = %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("cancelled start took %s", d)
		}
		assertNoProcesses(t, marker)
	})
}

// TestStdoutDuringHook: stdout after the handshake does not break the
// protocol; it is logged as a warning with the text.
func TestStdoutDuringHook(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	rec := newRecorder(slog.LevelInfo)
	opts := testOpts()
	opts.Logger = slog.New(rec)
	inst, err := Start(context.Background(), tp("printer", marker), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	if _, err := inst.RunHook(context.Background(), hookCall(`{"mode":"stdout"}`), 0, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(rec.find("plugin wrote to stdout")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	recs := rec.find("plugin wrote to stdout")
	if len(recs) != 1 || recs[0].level != slog.LevelWarn || recs[0].attrs["plugin"] != "printer" || recs[0].attrs["text"] != "hello on stdout "+marker {
		t.Errorf("stdout warning records = %+v", recs)
	}
}

// syncBuffer is a goroutine-safe log file.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogLevels: plugin records reach marina's logger at their own level
// with plugin=<name>; the user's level filters them; go-plugin's own
// chatter never shows at Info; the log file gets every raw line.
func TestLogLevels(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			marker := newMarker(t)
			rec := newRecorder(level)
			var file syncBuffer
			opts := testOpts()
			opts.Logger, opts.LogFile = slog.New(rec), &file
			inst, err := Start(context.Background(), tp("logger", marker), opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := inst.RunHook(context.Background(), hookCall(`{"mode":"ok"}`), 0, nil); err != nil {
				t.Fatal(err)
			}
			inst.Close() // flushes stderr

			infos := rec.find("hook started")
			if len(infos) != 1 || infos[0].level != slog.LevelInfo || infos[0].attrs["plugin"] != "logger" || infos[0].attrs["marker"] != marker || infos[0].attrs["hook"] != "PostCluster" {
				t.Errorf("info records = %+v", infos)
			}
			debugs := rec.find("debug-line " + marker)
			if level == slog.LevelInfo && len(debugs) != 0 {
				t.Errorf("debug line shown at Info: %+v", debugs)
			}
			if level == slog.LevelDebug && (len(debugs) != 1 || debugs[0].level != slog.LevelDebug || debugs[0].attrs["plugin"] != "logger") {
				t.Errorf("debug records at Debug = %+v", debugs)
			}
			for _, r := range rec.records() {
				if strings.HasPrefix(r.attrs["component"], "go-plugin") && r.level >= slog.LevelInfo {
					t.Errorf("go-plugin message at %s: %+v", r.level, r)
				}
				if r.attrs["plugin"] != "logger" {
					t.Errorf("record without plugin=logger: %+v", r)
				}
			}
			if level == slog.LevelDebug && len(rec.find("waiting for RPC address")) == 0 {
				t.Errorf("go-plugin's debug messages missing at Debug")
			}
			log := file.String()
			for _, want := range []string{`[logger] {"@timestamp"`, `"@message":"debug-line ` + marker + `"`, `"@message":"hook started"`} {
				if !strings.Contains(log, want) {
					t.Errorf("log file lacks %q:\n%s", want, log)
				}
			}
			for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
				if !strings.HasPrefix(l, "[logger] ") {
					t.Errorf("log file line without prefix: %q", l)
				}
			}
		})
	}
}

// TestHostDeathStopsPlugin kills a marina stand-in with SIGKILL (no
// cleanup at all) and checks that its plugin does not outlive it
// (Pdeathsig on Linux, the SDK's parent watchdog elsewhere).
func TestHostDeathStopsPlugin(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "MARINA_PLUGIN_TEST_HOST=1", "MARINA_PLUGIN_TEST_PLUGIN="+testPluginBin, "MARINA_PLUGIN_TEST_MARKER="+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var pid int
	deadline := time.After(20 * time.Second)
	for pid == 0 {
		select {
		case <-deadline:
			t.Fatal("the host did not report its plugin")
		case <-time.After(50 * time.Millisecond):
		}
		for _, p := range processes(t) {
			if strings.Contains(p.cmdline, marker) {
				pid = p.pid
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone := time.Now().Add(5 * time.Second)
	for {
		alive := false
		for _, p := range processes(t) {
			if p.pid == pid {
				alive = true
			}
		}
		if !alive {
			break
		}
		if time.Now().After(gone) {
			t.Fatalf("plugin %d outlived its host by 5s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCloseDuringHook: Close while a hook runs stops the plugin promptly;
// the hook's caller gets a "was stopped" error, not a crash report.
func TestCloseDuringHook(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	inst, err := Start(context.Background(), tp("closer", marker), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	pgid := inst.Pid()
	errc := make(chan error, 1)
	running := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := inst.RunHook(context.Background(), hookCall(`{"mode":"slow","sleep":"30s"}`), time.Minute,
			func(string) { once.Do(func() { close(running) }) })
		errc <- err
	}()
	// The hook's first progress line says it is running (a sleep would race
	// with a slow start under load).
	select {
	case <-running:
	case err := <-errc:
		t.Fatalf("the hook returned before it ran: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the hook did not report progress within a minute")
	}
	start := time.Now()
	if err := inst.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s", d)
	}
	select {
	case err := <-errc:
		if pe := asError(t, err); pe.Kind != KindStop || !strings.Contains(err.Error(), "plugin closer 1.0.0, hook PostCluster: was stopped") {
			t.Errorf("hook error = %v (kind %s)", err, pe.Kind)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunHook did not return after Close")
	}
	assertNoProcesses(t, marker, pgid)
}
