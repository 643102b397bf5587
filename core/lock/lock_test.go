package lock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helper-process protocol. The test binary re-executes itself with
// helperEnv set; TestMain then runs the helper instead of the tests:
//
//	hold:<path>  Acquire (no wait) with Command=$MARINA_LOCK_TEST_COMMAND,
//	             print "locked", block until stdin reaches EOF, release, exit.
//	race:<path>  print "ready", wait for one stdin line, then raceRounds times:
//	             Acquire with Wait, append "start <pid>" to $MARINA_LOCK_TEST_LOG,
//	             sleep, append "end <pid>", release; finally print "done waits=<n>".
//	idle         print "ready", block until stdin reaches EOF, exit.
const (
	helperEnv  = "MARINA_LOCK_TEST_HELPER"
	commandEnv = "MARINA_LOCK_TEST_COMMAND"
	logEnv     = "MARINA_LOCK_TEST_LOG"
	raceRounds = 10
	raceHold   = 10 * time.Millisecond
	bound      = 10 * time.Second // every wait for a child is bounded by this
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(mode string) error {
	kind, path, _ := strings.Cut(mode, ":")
	switch kind {
	case "hold":
		l, err := Acquire(context.Background(), path, Options{Command: os.Getenv(commandEnv)})
		if err != nil {
			return err
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return l.Release()
	case "race":
		return raceHelper(path, os.Getenv(logEnv))
	case "idle":
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

func raceHelper(path, logPath string) error {
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	pid := os.Getpid()
	waits := 0
	appendLine := func(s string) error {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(f, "%s %d\n", s, pid); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}
	for range raceRounds {
		l, err := Acquire(ctx, path, Options{
			Wait:         true,
			Command:      "race " + strconv.Itoa(pid),
			PollInterval: time.Millisecond,
			OnWait:       func(Holder) { waits++ },
		})
		if err != nil {
			return err
		}
		if err := appendLine("start"); err != nil {
			return err
		}
		time.Sleep(raceHold)
		if err := appendLine("end"); err != nil {
			return err
		}
		if err := l.Release(); err != nil {
			return err
		}
	}
	fmt.Printf("done waits=%d\n", waits)
	return nil
}

// child is a running helper process.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File // write end of the child's stdin
	lines  chan string
	stderr *syncBuffer
	done   chan struct{} // closed when the child has exited and been reaped
	err    error         // cmd.Wait's result, valid after done
}

// startChild starts the test binary in helper mode with the given
// environment additions; t.Cleanup closes its stdin, kills it and reaps it.
func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{
		cmd:    exec.Command(os.Args[0], "-test.run=^$"),
		stdin:  inW,
		lines:  make(chan string, 64),
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
	}
	c.cmd.Env = append(os.Environ(), env...)
	if os.Getenv("GORACE") == "" {
		// A -race binary otherwise sleeps a second on exit.
		c.cmd.Env = append(c.cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = inR.Close()
	_ = outW.Close()
	go func() {
		defer close(c.lines)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		_ = c.cmd.Process.Kill()
		select {
		case <-c.done:
		case <-time.After(bound):
			t.Errorf("child %d was not reaped within %v", c.pid(), bound)
		}
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// expect waits (bounded) for the child's next stdout line and checks that it
// starts with prefix; it returns the line.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			t.Fatalf("child %d exited (%v) before printing %q; stderr:\n%s", c.pid(), c.err, prefix, c.stderr)
		}
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("child %d printed %q, want %q...", c.pid(), line, prefix)
		}
		return line
	case <-time.After(bound):
		t.Fatalf("child %d did not print %q within %v; stderr:\n%s", c.pid(), prefix, bound, c.stderr)
	}
	return ""
}

// exit closes the child's stdin and waits (bounded) for it to exit cleanly.
func (c *child) exit(t *testing.T) {
	t.Helper()
	_ = c.stdin.Close()
	c.waitExit(t)
	if c.err != nil {
		t.Fatalf("child %d: %v; stderr:\n%s", c.pid(), c.err, c.stderr)
	}
}

func (c *child) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(bound):
		t.Fatalf("child %d did not exit within %v", c.pid(), bound)
	}
}

// startHolder starts a child that holds the lock at path, recording command.
func startHolder(t *testing.T, path, command string) *child {
	t.Helper()
	c := startChild(t, helperEnv+"=hold:"+path, commandEnv+"="+command)
	c.expect(t, "locked")
	return c
}

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

// fileHolder parses the lock file strictly: exactly one JSON line, no
// unknown fields, nothing after it.
func fileHolder(t *testing.T, path string) Holder {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte{'\n'}) != 1 || !bytes.HasSuffix(b, []byte{'\n'}) {
		t.Fatalf("lock file %s = %q, want exactly one JSON line", path, b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var h Holder
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("lock file %s = %q: %v", path, b, err)
	}
	return h
}

func lockPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "marina.lock")
}

func mustAcquire(t *testing.T, path string, opts Options) *Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	l, err := Acquire(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return l
}

func TestHeldByAnotherProcess(t *testing.T) {
	path := lockPath(t)
	before := time.Now().Add(-time.Second)
	holder := startHolder(t, path, "marina up")

	l, err := Acquire(context.Background(), path, Options{Command: "marina down"})
	if err == nil {
		_ = l.Release()
		t.Fatal("Acquire succeeded while another process holds the lock")
	}
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("err = %T %v, want *HeldError", err, err)
	}
	if held.Path != path {
		t.Errorf("Path = %q, want %q", held.Path, path)
	}
	if held.Holder.PID != holder.pid() {
		t.Errorf("Holder.PID = %d, want the child's PID %d", held.Holder.PID, holder.pid())
	}
	if held.Holder.Command != "marina up" {
		t.Errorf("Holder.Command = %q, want %q", held.Holder.Command, "marina up")
	}
	if s := held.Holder.Since; s.Before(before) || s.After(time.Now().Add(time.Second)) {
		t.Errorf("Holder.Since = %v, want about now", s)
	}
	for _, want := range []string{
		"another marina process holds the lock " + path,
		fmt.Sprintf("PID %d (marina up) since %s", holder.pid(), held.Holder.Since.Local().Format("15:04:05")),
		"--no-wait",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// The failed attempt must not have disturbed the holder's record.
	if h := fileHolder(t, path); h.PID != holder.pid() {
		t.Errorf("lock file records PID %d after a failed Acquire, want the holder %d", h.PID, holder.pid())
	}
}

func TestWaitBlocksUntilHolderExits(t *testing.T) {
	path := lockPath(t)
	holder := startHolder(t, path, "marina cluster create dev")

	var onWaitCalls atomic.Int32
	waiting := make(chan Holder, 1)
	type result struct {
		l   *Lock
		err error
	}
	res := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	go func() {
		l, err := Acquire(ctx, path, Options{
			Wait:         true,
			Command:      "marina up",
			PollInterval: 10 * time.Millisecond,
			OnWait: func(h Holder) {
				onWaitCalls.Add(1)
				waiting <- h
			},
		})
		res <- result{l, err}
	}()

	select {
	case h := <-waiting:
		if h.PID != holder.pid() || h.Command != "marina cluster create dev" {
			t.Errorf("OnWait got %+v, want PID %d (marina cluster create dev)", h, holder.pid())
		}
	case r := <-res:
		t.Fatalf("Acquire returned (%v, %v) before waiting", r.l, r.err)
	case <-time.After(bound):
		t.Fatal("OnWait was not called")
	}
	// Still blocked while the child lives (many poll intervals).
	select {
	case r := <-res:
		t.Fatalf("Acquire returned (%v, %v) while the holder is alive", r.l, r.err)
	case <-time.After(300 * time.Millisecond):
	}

	holder.exit(t) // closes stdin: the child releases and exits
	var r result
	select {
	case r = <-res:
	case <-time.After(bound):
		t.Fatal("Acquire did not return after the holder exited")
	}
	if r.err != nil {
		t.Fatalf("Acquire after the holder exited: %v", r.err)
	}
	defer r.l.Release()
	if n := onWaitCalls.Load(); n != 1 {
		t.Errorf("OnWait called %d times, want once", n)
	}
	if h := fileHolder(t, path); h.PID != os.Getpid() || h.Command != "marina up" {
		t.Errorf("lock file records %+v, want PID %d (marina up)", h, os.Getpid())
	}
}

func TestKilledHolderDoesNotLeaveTheLockHeld(t *testing.T) {
	path := lockPath(t)
	longCommand := "marina cluster create " + strings.Repeat("very-long-cluster-name-", 10)
	holder := startHolder(t, path, longCommand)
	if h := fileHolder(t, path); h.PID != holder.pid() {
		t.Fatalf("lock file records PID %d, want the child's %d", h.PID, holder.pid())
	}

	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	holder.waitExit(t)
	// The dead holder's record is still there: it is stale, not authoritative.
	if h := fileHolder(t, path); h.PID != holder.pid() || h.Command != longCommand {
		t.Fatalf("lock file records %+v after SIGKILL, want the dead child's stale record", h)
	}

	l, err := Acquire(context.Background(), path, Options{Command: "marina up"}) // no Wait: must be free now
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	defer l.Release()
	// fileHolder also fails if any of the longer stale record is left over.
	if h := fileHolder(t, path); h.PID != os.Getpid() || h.Command != "marina up" {
		t.Errorf("lock file records %+v, want the stale record overwritten with PID %d (marina up)", h, os.Getpid())
	}
}

func TestStopWaitingOnContext(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		cancel  bool // cancel when OnWait fires
		wantErr error
	}{
		{
			name:    "cancel",
			ctx:     func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			cancel:  true,
			wantErr: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := lockPath(t)
			holder := startHolder(t, path, "marina up")
			ctx, cancel := tt.ctx()
			defer cancel()

			var waitedAt atomic.Int64
			start := time.Now()
			errc := make(chan error, 1)
			go func() {
				l, err := Acquire(ctx, path, Options{
					Wait:         true,
					PollInterval: 20 * time.Millisecond,
					OnWait: func(Holder) {
						waitedAt.Store(time.Now().UnixNano())
						if tt.cancel {
							go func() { time.Sleep(50 * time.Millisecond); cancel() }()
						}
					},
				})
				if err == nil {
					_ = l.Release()
				}
				errc <- err
			}()

			var err error
			select {
			case err = <-errc:
			case <-time.After(2 * time.Second): // "promptly": far below the bound
				t.Fatal("Acquire did not return promptly after ctx was done")
			}
			if waitedAt.Load() == 0 {
				t.Error("OnWait was not called")
			}
			if err == nil {
				t.Fatal("Acquire succeeded while another process holds the lock")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
			for _, want := range []string{path, fmt.Sprintf("PID %d (marina up)", holder.pid())} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("Acquire took %v to give up", elapsed)
			}
		})
	}
}

// TestTwoProcessesRacing has two processes take and release the lock
// repeatedly; the shared log shows every critical section as an
// uninterrupted start/end pair of one PID.
func TestTwoProcessesRacing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "marina.lock")
	logPath := filepath.Join(dir, "log")
	children := []*child{
		startChild(t, helperEnv+"=race:"+path, logEnv+"="+logPath),
		startChild(t, helperEnv+"=race:"+path, logEnv+"="+logPath),
	}
	for _, c := range children {
		c.expect(t, "ready")
	}
	for _, c := range children { // release both at once so they contend
		if _, err := c.stdin.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
	}
	totalWaits := 0
	for _, c := range children {
		line := c.expect(t, "done waits=")
		n, err := strconv.Atoi(strings.TrimPrefix(line, "done waits="))
		if err != nil {
			t.Fatalf("child %d printed %q", c.pid(), line)
		}
		totalWaits += n
		c.exit(t)
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if want := 2 * raceRounds * len(children); len(lines) != want {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), want, b)
	}
	sections := map[string]int{}
	for i := 0; i+1 < len(lines); i += 2 {
		pid, ok := strings.CutPrefix(lines[i], "start ")
		if !ok || lines[i+1] != "end "+pid {
			t.Fatalf("critical sections interleave at log line %d (%q, %q):\n%s", i+1, lines[i], lines[i+1], b)
		}
		sections[pid]++
	}
	for _, c := range children {
		if n := sections[strconv.Itoa(c.pid())]; n != raceRounds {
			t.Errorf("child %d held the lock %d times, want %d", c.pid(), n, raceRounds)
		}
	}
	if totalWaits == 0 {
		t.Error("neither child ever waited: the processes did not contend, so the test proved nothing")
	}
}

func TestSecondAcquireInSameProcessConflicts(t *testing.T) {
	path := lockPath(t)
	first := mustAcquire(t, path, Options{Command: "marina up"})

	_, err := Acquire(context.Background(), path, Options{})
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire: err = %v, want *HeldError", err)
	}
	if held.Holder.PID != os.Getpid() {
		t.Errorf("Holder.PID = %d, want this process %d", held.Holder.PID, os.Getpid())
	}
	if !strings.Contains(err.Error(), "this process already holds the lock") {
		t.Errorf("error %q does not say this process holds it", err)
	}

	// Waiting in the same process blocks too, until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		l, err := Acquire(ctx, path, Options{Wait: true, PollInterval: 10 * time.Millisecond})
		if err == nil {
			_ = l.Release()
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Acquire with Wait: err = %v, want deadline exceeded", err)
		}
	case <-time.After(bound):
		t.Fatal("second Acquire with Wait ignored its context deadline")
	}

	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Errorf("second Release: %v, want nil", err)
	}
	mustAcquire(t, path, Options{})
}

func TestCreatesDirectoryAndFileWithPrivateModes(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), ".marina")
	path := filepath.Join(dir, "marina.lock")
	l := mustAcquire(t, path, Options{})
	if l.Path() != path {
		t.Errorf("Path() = %q, want %q", l.Path(), path)
	}
	for _, tt := range []struct {
		path string
		want os.FileMode
	}{{dir, 0o700}, {path, 0o600}} {
		fi, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tt.want {
			t.Errorf("%s mode = %04o, want %04o", tt.path, fi.Mode().Perm(), tt.want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Release removed the lock file (it must keep it): %v", err)
	}
}

// TestChildProcessesDoNotInheritTheLock checks FD_CLOEXEC and its effect: a
// child started while the lock is held must not keep it alive after this
// process drops its descriptor (as on exit) without unlocking.
func TestChildProcessesDoNotInheritTheLock(t *testing.T) {
	path := lockPath(t)
	l, err := Acquire(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(l.f.Fd(), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("lock file descriptor is not close-on-exec")
	}

	idle := startChild(t, helperEnv+"=idle")
	idle.expect(t, "ready")
	_ = l.f.Close() // no LOCK_UN: the lock lives as long as any inherited copy
	l.f = nil

	again, err := Acquire(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("lock still held after this process closed its descriptor while child %d runs: %v", idle.pid(), err)
	}
	_ = again.Release()
	idle.exit(t)
}

func TestAcquireRejectsBadInput(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		path    string
		wantErr string
		wantIs  error
	}{
		{"empty path", context.Background(), "", "lock file path is empty", nil},
		{"ctx already done", canceled, "PATH", "acquire lock", context.Canceled},
		{"parent is a regular file", context.Background(), "FILE/marina.lock", "create directory", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			path := strings.NewReplacer("PATH", filepath.Join(dir, "marina.lock"), "FILE", file).Replace(tt.path)
			l, err := Acquire(tt.ctx, path, Options{})
			if err == nil {
				_ = l.Release()
				t.Fatal("Acquire succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantIs)
			}
		})
	}
}

func TestHeldErrorMessage(t *testing.T) {
	today := time.Date(time.Now().Year(), time.Now().Month(), time.Now().Day(), 8, 40, 1, 0, time.Local)
	otherDay := today.AddDate(0, 0, -3)
	tests := []struct {
		name   string
		holder Holder
		want   string
	}{
		{
			name:   "known holder today",
			holder: Holder{PID: 1234, Command: "marina up", Since: today},
			want:   "another marina process holds the lock /x/marina.lock: PID 1234 (marina up) since 08:40:01; wait for it to finish, or run without --no-wait to queue behind it",
		},
		{
			name:   "known holder another day",
			holder: Holder{PID: 1234, Command: "marina up", Since: otherDay},
			want:   "another marina process holds the lock /x/marina.lock: PID 1234 (marina up) since " + otherDay.Format("2006-01-02") + " 08:40:01; wait for it to finish, or run without --no-wait to queue behind it",
		},
		{
			name:   "no command or time",
			holder: Holder{PID: 1234},
			want:   "another marina process holds the lock /x/marina.lock: PID 1234; wait for it to finish, or run without --no-wait to queue behind it",
		},
		{
			name:   "unknown holder",
			holder: Holder{},
			want:   "another marina process holds the lock /x/marina.lock: holder unknown (the lock file records none yet); wait for it to finish, or run without --no-wait to queue behind it",
		},
		{
			name:   "this process",
			holder: Holder{PID: os.Getpid(), Command: "marina up", Since: today},
			want:   fmt.Sprintf("this process already holds the lock /x/marina.lock (PID %d (marina up) since 08:40:01); release it before acquiring it again", os.Getpid()),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&HeldError{Path: "/x/marina.lock", Holder: tt.holder}).Error()
			if got != tt.want {
				t.Errorf("Error() =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestReadHolder(t *testing.T) {
	since := time.Date(2026, 1, 2, 8, 40, 1, 0, time.UTC)
	valid := `{"pid":42,"command":"marina up","since":"2026-01-02T08:40:01Z"}`
	tests := []struct {
		name    string
		content string
		want    Holder
	}{
		{"empty file", "", Holder{}},
		{"garbage", "not json\n", Holder{}},
		{"zero pid", `{"pid":0,"command":"x"}` + "\n", Holder{}},
		{"valid line", valid + "\n", Holder{PID: 42, Command: "marina up", Since: since}},
		{"valid line over a longer stale tail", valid + "\n" + `ommand":"old"}` + "\n", Holder{PID: 42, Command: "marina up", Since: since}},
		{"over the size limit", strings.Repeat(" ", maxHolderBytes) + valid, Holder{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "marina.lock")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := readHolder(f)
			if got.PID != tt.want.PID || got.Command != tt.want.Command || !got.Since.Equal(tt.want.Since) {
				t.Errorf("readHolder = %+v, want %+v", got, tt.want)
			}
		})
	}
}
