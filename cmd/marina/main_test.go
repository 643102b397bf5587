package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/core/lock"
)

// marinaBin is the marina binary the tests run (also the process built-in
// plugins and the kind helper are), marina-lima beside it.
var marinaBin string

// TestMain builds the real binary once: the CLI is tested as users run it
// (argv, environment, exit status), not through internal calls.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "marina-cli-test")
	if err != nil {
		panic(err)
	}
	// marina-lima beside it, as released: the lima driver's engine.
	marinaBin = filepath.Join(dir, "marina")
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../marina-lima")
	build.Env = append(os.Environ(), buildCgo())
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building marina: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// marina runs the binary with a private HOME and no MARINA_* variables.
func marina(t *testing.T, home string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(marinaBin, args...)
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, env...)
	return runCmd(t, cmd)
}

// runCmd runs cmd (marina, or a command that runs it) and returns its
// output and exit status; a command that cannot start fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func TestVersion(t *testing.T) {
	home := t.TempDir()
	r := marina(t, home, nil, "version", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if v["goVersion"] != runtime.Version() || v["os"] != runtime.GOOS || v["arch"] != runtime.GOARCH || v["version"] == "" {
		t.Fatalf("version = %v", v)
	}
	for _, k := range []string{"commit", "buildDate"} {
		if _, ok := v[k]; !ok {
			t.Errorf("missing %s", k)
		}
	}
	if r := marina(t, home, nil, "version", "-o", "xml"); r.code != 2 || !strings.Contains(r.stderr, `--output "xml" is not supported`) {
		t.Fatalf("bad -o: exit %d %s", r.code, r.stderr)
	}
}

func TestExitCodesForUsage(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{{"no-such-command"}, {"version", "--no-such-flag"}, {"version", "extra-arg"}, {"config", "path", "--set"}} {
		if r := marina(t, home, nil, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
}

func TestConfigLifecycle(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".marina", "config.yaml")

	r := marina(t, home, nil, "config", "path")
	if r.code != 0 || strings.TrimSpace(r.stdout) != path {
		t.Fatalf("config path: %d %q", r.code, r.stdout)
	}
	if r := marina(t, home, nil, "config", "validate"); r.code != 0 || !strings.Contains(r.stdout, "defaults are valid") {
		t.Fatalf("validate without file: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "config", "init"); r.code != 0 {
		t.Fatalf("init: %d %s", r.code, r.stderr)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v mode %v", err, st.Mode())
	}
	if r := marina(t, home, nil, "config", "init"); r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("second init must refuse: %d %s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "config", "init", "--force"); r.code != 0 {
		t.Fatalf("init --force: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(path + ".bak"); err != nil {
		t.Fatalf("no backup: %v", err)
	}
	if r := marina(t, home, nil, "config", "validate"); r.code != 0 {
		t.Fatalf("validate init file: %d %s", r.code, r.stderr)
	}

	// view: the file, the environment and --set each show as the source.
	r = marina(t, home, []string{"MARINA_VM_MEMORY=12GiB"}, "config", "view", "--set", "vm.cpus=6")
	if r.code != 0 {
		t.Fatalf("view: %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"cpus: 6 # flag --set vm.cpus=6", "memory: 12GiB # env MARINA_VM_MEMORY", "name: marina # file " + path + ":"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("view lacks %q:\n%s", want, r.stdout)
		}
	}
	r = marina(t, home, nil, "config", "view", "-o", "json")
	var entries []struct {
		Key    string
		Value  any
		Source struct{ Kind, Detail string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) < 20 {
		t.Fatalf("view -o json: %v (%d entries)\n%s", err, len(entries), r.stdout)
	}

	// A typo'd key: exit 2 with key, line and suggestion.
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(data, []byte("  cpus: 4"), []byte("  cpu: 4"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	r = marina(t, home, nil, "config", "validate")
	if r.code != 2 || !strings.Contains(r.stderr, `vm.cpu: unknown key "cpu"; did you mean "cpus"? (`+path+":") {
		t.Fatalf("typo: exit %d\n%s", r.code, r.stderr)
	}
	r = marina(t, home, nil, "config", "validate", "-o", "json")
	if r.code != 2 || !strings.Contains(r.stdout, `"valid": false`) || r.stderr != "" {
		t.Fatalf("typo json: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

func TestConfigEditValidatesBeforeReplacing(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".marina", "config.yaml")
	editor := func(sedExpr string) string {
		script := filepath.Join(t.TempDir(), "editor.sh")
		body := "#!/bin/sh\nsed -i '" + sedExpr + "' \"$1\"\n"
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return script
	}
	// No file yet: edit starts from the template; a valid edit is saved.
	r := marina(t, home, []string{"EDITOR=" + editor("s/^  cpus: 4/  cpus: 6/")}, "config", "edit")
	if r.code != 0 {
		t.Fatalf("edit: %d %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), "  cpus: 6") {
		t.Fatalf("edit not saved: %v\n%s", err, data)
	}
	// An invalid edit (no TTY) leaves the file untouched, keeps the draft, exits 2.
	r = marina(t, home, []string{"VISUAL=" + editor("s/^  cpus: 6/  cpus: many/")}, "config", "edit")
	if r.code != 2 || !strings.Contains(r.stderr, "was not changed") {
		t.Fatalf("invalid edit: %d %s", r.code, r.stderr)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, data) {
		t.Fatal("invalid edit modified the config file")
	}
	draft, err := os.ReadFile(path + ".edit.yaml")
	if err != nil || !strings.Contains(string(draft), "cpus: many") {
		t.Fatalf("draft not kept: %v", err)
	}
}

func TestCompletion(t *testing.T) {
	r := marina(t, t.TempDir(), nil, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "__start_marina") {
		t.Fatalf("completion: %d %s", r.code, r.stderr)
	}
}

// TestTwoProcessesAndTheLock: while another process holds the lock, a
// state-changing command either fails at once naming that PID (--no-wait) or
// waits, says for whom, and completes once the lock is free.
func TestTwoProcessesAndTheLock(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	path, err := lockFile()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := lock.Acquire(ctx, path, lock.Options{Command: "marina up (test holder)"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	r := marina(t, home, nil, "--no-wait", "config", "init")
	wantPID := fmt.Sprintf("PID %d (marina up (test holder))", os.Getpid())
	if r.code != 1 || !strings.Contains(r.stderr, wantPID) {
		t.Fatalf("--no-wait: exit %d, stderr %q; want exit 1 naming %s", r.code, r.stderr, wantPID)
	}
	if _, err := os.Stat(filepath.Join(home, ".marina", "config.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--no-wait must not write: %v", err)
	}

	cmd := exec.CommandContext(ctx, marinaBin, "config", "init")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), fmt.Sprintf("waiting for another marina process (PID %d", os.Getpid())) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the second process did not say it was waiting: %q", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("waiting process failed after the lock was released: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(home, ".marina", "config.yaml")); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoHome: without $HOME (unset or empty) marina does not panic in Lima's
// package init; version and --help work (core/homeenv takes the home from the
// user database before Lima's packages initialize).
func TestNoHome(t *testing.T) {
	for _, env := range [][]string{
		{"PATH=" + os.Getenv("PATH")},          // unset
		{"PATH=" + os.Getenv("PATH"), "HOME="}, // empty
	} {
		for _, args := range [][]string{{"version"}, {"--help"}} {
			cmd := exec.Command(marinaBin, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Contains(string(out), "panic") {
				t.Errorf("marina %v with env %q: %v\n%s", args, env, err, out)
			}
		}
	}
}

// buildCgo is the CGO_ENABLED `make build` uses on this OS (Linux: 0), so
// the tests run the binary users run.
func buildCgo() string {
	if runtime.GOOS == "darwin" {
		return "CGO_ENABLED=1"
	}
	return "CGO_ENABLED=0"
}

// TestUnknownUser: run as a uid the user database does not know (a
// container's arbitrary uid), with and without $HOME and $USER, marina does
// not panic in Lima's package init (os/user.Current failing there):
// version and --help work, and a command that needs a home says so.
func TestUnknownUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root to run marina as an unknown uid (make test runs as root)")
	}
	const uid = 4242
	if _, err := os.Stat("/etc/passwd"); err == nil {
		b, _ := os.ReadFile("/etc/passwd")
		if strings.Contains(string(b), fmt.Sprintf(":%d:", uid)) {
			t.Fatalf("uid %d is in /etc/passwd; the test needs an unknown uid", uid)
		}
	}
	home := t.TempDir()
	for _, d := range []string{filepath.Dir(home), home} { // t.TempDir's dirs are 0700
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// The binary must be readable by the uid: copy it out of the 0700 temp dir.
	bin := filepath.Join(home, "marina")
	b, err := os.ReadFile(marinaBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Dir = home
		cmd.SysProcAttr = unknownUser(uid)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	path := "PATH=" + os.Getenv("PATH")
	for _, env := range [][]string{
		{path, "HOME=" + home, "USER=someone"},
		{path, "HOME=" + home}, // no $USER: os/user's pure-Go Current needs it
		{path},                 // neither
	} {
		for _, args := range [][]string{{"version"}, {"--help"}} {
			out, code := run(env, args...)
			if code != 0 || strings.Contains(out, "panic") {
				t.Errorf("marina %v as uid %d with env %q: exit %d\n%s", args, uid, env, code, out)
			}
		}
	}
	// With a home, a command that reads state works; without one it says how to fix it.
	if out, code := run([]string{path, "HOME=" + home}, "plugin", "list"); code != 0 || strings.Contains(out, "panic") {
		t.Errorf("plugin list as uid %d with a HOME: exit %d\n%s", uid, code, out)
	}
	for _, args := range [][]string{{"plugin", "list"}, {"config", "view"}} {
		if out, code := run([]string{path}, args...); code != 2 || !strings.Contains(out, "set HOME") || strings.Contains(out, "panic") {
			t.Errorf("marina %v as uid %d without a HOME: exit %d, want 2 and a usage error saying to set HOME\n%s", args, uid, code, out)
		}
	}
}
