package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bcollard/marina/core/hostnet"
)

// argvRecorder is the Privileged runner seam: it records every command
// and fails the ones listed in refuse (as sudo does, with its stderr).
type argvRecorder struct {
	mu     sync.Mutex
	argvs  []string
	stdin  [][]byte
	refuse map[string]string
}

func (r *argvRecorder) Run(_ context.Context, argv []string, stdin []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := hostnet.QuoteArgv(argv)
	r.argvs = append(r.argvs, s)
	r.stdin = append(r.stdin, slices.Clone(stdin))
	if msg, ok := r.refuse[s]; ok {
		return nil, &hostnet.CommandError{Argv: argv, Stderr: msg, Err: fmt.Errorf("exit status 1")}
	}
	return nil, nil
}

func sudoersOpts(t *testing.T, rec *argvRecorder) (sudoersOptions, *bytes.Buffer) {
	t.Helper()
	out := new(bytes.Buffer)
	return sudoersOptions{
		spec: hostnet.SudoersSpec{CIDR: "172.30.0.0/16", User: "alice"},
		path: filepath.Join(t.TempDir(), "marina"),
		goos: hostnet.Darwin,
		priv: &hostnet.Privileged{Runner: rec, Interactive: true, Out: out},
		out:  out,
	}, out
}

// TestSudoersPrints: by default the drop-in for the configured CIDR and the
// named user is printed and nothing else happens; flags that contradict
// each other are usage errors.
func TestSudoersPrints(t *testing.T) {
	home := t.TempDir()
	r := marina(t, home, nil, "sudoers", "--user", "alice", "--set", "network.bridgeCIDR=10.99.0.0/16")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want, err := hostnet.Sudoers(hostnet.SudoersSpec{CIDR: "10.99.0.0/16", User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != string(want) {
		t.Errorf("printed\n%s\nwant\n%s", r.stdout, want)
	}
	if !strings.Contains(r.stdout, "alice ALL=(root) NOPASSWD:NOSETENV: \\\n    /sbin/route -n delete -net 10.99.0.0/16, \\\n") {
		t.Errorf("the rule is not for alice and 10.99.0.0/16:\n%s", r.stdout)
	}
	if r := marina(t, home, nil, "sudoers", "--group", "admin"); r.code != 0 || !strings.Contains(r.stdout, "\n%admin ALL=(root)") {
		t.Errorf("--group admin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"sudoers", "--install", "--check", "--user", "alice"},
		{"sudoers", "--user", "alice", "--group", "admin"},
		{"sudoers", "--user", "al ice"},
		{"sudoers", "extra"},
	} {
		if r := marina(t, home, nil, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
		}
	}
}

// TestSudoersInstall: the commands are shown, then run through sudo in
// order, into --path; an installed, current file is left alone.
func TestSudoersInstall(t *testing.T) {
	rec := &argvRecorder{}
	o, out := sudoersOpts(t, rec)
	o.install = true
	if err := runSudoers(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	tmp := o.path + ".tmp"
	want := []string{
		"sudo -- /usr/bin/tee " + tmp,
		"sudo -- /usr/sbin/visudo -c -f " + tmp,
		"sudo -- /bin/chmod 0440 " + tmp,
		"sudo -- /bin/mv -f " + tmp + " " + o.path,
	}
	if !slices.Equal(rec.argvs, want) {
		t.Fatalf("ran\n%s\nwant\n%s", strings.Join(rec.argvs, "\n"), strings.Join(want, "\n"))
	}
	content, _ := hostnet.Sudoers(o.spec)
	if !bytes.Equal(rec.stdin[0], content) {
		t.Error("tee was not fed the drop-in")
	}
	if !strings.Contains(out.String(), "marina needs administrator rights to let the route to the VM change without a password") ||
		!strings.Contains(out.String(), "sudo /bin/mv -f "+tmp+" "+o.path) {
		t.Errorf("the commands were not shown:\n%s", out)
	}

	// Installed and current: nothing runs.
	if err := os.WriteFile(o.path, content, 0o440); err != nil {
		t.Fatal(err)
	}
	rec.argvs = nil
	out.Reset()
	if err := runSudoers(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(rec.argvs) != 0 || !strings.Contains(out.String(), "installed and current") {
		t.Errorf("ran %q; said %s", rec.argvs, out)
	}

	// Someone else's file at the path is never replaced.
	if err := os.WriteFile(o.path, []byte("alice ALL=(ALL) ALL\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := runSudoers(context.Background(), o); err == nil || !strings.Contains(err.Error(), "not written by marina") || len(rec.argvs) != 0 {
		t.Errorf("foreign file: %v; ran %q", err, rec.argvs)
	}

	// Off macOS nothing is installed.
	o.goos = hostnet.Linux
	if err := runSudoers(context.Background(), o); err == nil || !strings.Contains(err.Error(), "macOS") || len(rec.argvs) != 0 {
		t.Errorf("linux: %v; ran %q", err, rec.argvs)
	}
}

// TestSudoersRemove: marina's file is removed through sudo; a foreign one
// or none is left alone.
func TestSudoersRemove(t *testing.T) {
	rec := &argvRecorder{}
	o, out := sudoersOpts(t, rec)
	o.remove = true
	if err := runSudoers(context.Background(), o); err != nil || len(rec.argvs) != 0 || !strings.Contains(out.String(), "nothing to remove") {
		t.Fatalf("absent: %v; ran %q; said %s", err, rec.argvs, out)
	}
	old, _ := hostnet.Sudoers(hostnet.SudoersSpec{CIDR: "10.1.0.0/16", User: "alice"})
	if err := os.WriteFile(o.path, old, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := runSudoers(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sudo -- /bin/rm -f -- " + o.path}; !slices.Equal(rec.argvs, want) {
		t.Fatalf("ran %q, want %q", rec.argvs, want)
	}
	rec.argvs = nil
	if err := os.WriteFile(o.path, []byte("alice ALL=(ALL) ALL\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := runSudoers(context.Background(), o); err == nil || len(rec.argvs) != 0 {
		t.Errorf("foreign file: %v; ran %q", err, rec.argvs)
	}
}

// TestSudoersCheck: current, stale, absent from the file; an unreadable
// file is judged by asking sudo without a password.
func TestSudoersCheck(t *testing.T) {
	rec := &argvRecorder{}
	o, out := sudoersOpts(t, rec)
	o.check = true
	if err := runSudoers(context.Background(), o); err == nil || !strings.Contains(err.Error(), "not installed: run marina sudoers --install") {
		t.Errorf("absent: %v", err)
	}
	old, _ := hostnet.Sudoers(hostnet.SudoersSpec{CIDR: "10.1.0.0/16", User: "alice"})
	if err := os.WriteFile(o.path, old, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := runSudoers(context.Background(), o); err == nil || !strings.Contains(err.Error(), "out of date") {
		t.Errorf("stale: %v", err)
	}
	cur, _ := hostnet.Sudoers(o.spec)
	if err := os.WriteFile(o.path, cur, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := runSudoers(context.Background(), o); err != nil || !strings.Contains(out.String(), "installed and current") {
		t.Errorf("current: %v; %s", err, out)
	}
	if len(rec.argvs) != 0 {
		t.Errorf("reading the file ran %q", rec.argvs)
	}

	unreadable := hostnet.SudoersState{Exists: true}
	if err := checkSudoers(context.Background(), o, unreadable); err != nil {
		t.Errorf("sudo allows both: %v", err)
	}
	want := []string{
		"sudo -n -l -- /sbin/route -n delete -net 172.30.0.0/16",
		"sudo -n -l -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.3",
	}
	if !slices.Equal(rec.argvs, want) {
		t.Errorf("asked sudo %q, want %q", rec.argvs, want)
	}
	rec.refuse = map[string]string{want[1]: "sudo: a password is required"}
	if err := checkSudoers(context.Background(), o, unreadable); err == nil || !strings.Contains(err.Error(), "asks for a password") {
		t.Errorf("sudo refuses the add: %v", err)
	}
}
