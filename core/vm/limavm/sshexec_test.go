package limavm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm/limavm/sshtest"
)

// execDriver is a Driver whose VM is the test SSH server: the engine's
// answer (the SSH target) is the server's address, key and user.
func execDriver(t *testing.T, srv *sshtest.Server) *Driver {
	t.Helper()
	d := New(config.Default(), t.TempDir())
	d.target = func(context.Context) (SSHTarget, error) {
		return SSHTarget{Addr: "127.0.0.1:" + strconv.Itoa(srv.Port), KeyFile: srv.KeyFile, User: GuestUser}, nil
	}
	return d
}

func TestRemoteCommand(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		root  bool
		limit time.Duration
		want  string
	}{
		{[]string{"ip", "-o", "addr"}, false, 0, `exec 'ip' '-o' 'addr'`},
		{[]string{"docker", "ps"}, true, 0, `exec 'sudo' '-n' '--' 'docker' 'ps'`},
		{[]string{"echo", "it's $HOME"}, true, 1500 * time.Millisecond, `exec 'sudo' '-n' '--' 'timeout' '-k' '5' '2' 'echo' 'it'\''s $HOME'`},
	} {
		got, err := remoteCommand(tc.argv, tc.root, tc.limit)
		if err != nil || got != tc.want {
			t.Errorf("remoteCommand(%q, %v, %v) = %s, %v; want %s", tc.argv, tc.root, tc.limit, got, err, tc.want)
		}
	}
	if _, err := remoteCommand(nil, true, 0); err == nil {
		t.Error("remoteCommand accepted an empty argv")
	}
}

func TestExecQuotingOverSSH(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	args := []string{"", "a b", "it's", `"q"`, "$HOME", "$(id)", "`id`", "*", "a\nb", "\\", ";reboot", "é", "-n"}
	out, err := d.Exec(context.Background(), append([]string{"printf", `%s\0`}, args...), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(string(out), "\x00")
	got = got[:len(got)-1]
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", args) {
		t.Errorf("the guest saw %q, want %q", got, args)
	}
}

func TestExecReusesOneConnection(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	ctx := context.Background()
	for i := range 10 {
		out, err := d.Exec(ctx, []string{"echo", fmt.Sprint(i)}, nil)
		if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(i) {
			t.Fatalf("exec %d: %q, %v", i, out, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 { // more than maxSessions at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := d.Exec(ctx, []string{"sh", "-c", "sleep 0.1; echo $0", fmt.Sprint(i)}, nil)
			if err == nil && strings.TrimSpace(string(out)) != fmt.Sprint(i) {
				err = fmt.Errorf("exec %d printed %q", i, out)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := srv.Conns.Load(); n != 1 {
		t.Errorf("the server saw %d connections, want 1", n)
	}
}

func TestExecStdinAndErrors(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	ctx := context.Background()
	out, err := d.Exec(ctx, []string{"cat"}, strings.NewReader("from stdin\n"))
	if err != nil || string(out) != "from stdin\n" {
		t.Fatalf("cat = %q, %v", out, err)
	}
	// No stdin: the command sees EOF at once instead of waiting.
	if out, err := d.Exec(ctx, []string{"cat"}, nil); err != nil || len(out) != 0 {
		t.Fatalf("cat without stdin = %q, %v", out, err)
	}
	_, err = d.Exec(ctx, []string{"sh", "-c", "echo oops >&2; exit 3"}, nil)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("failing command: %v, want exit status 3 and its stderr", err)
	}
	if _, err := d.Exec(ctx, nil, nil); err == nil {
		t.Error("Exec accepted an empty argv")
	}
}

func TestExecCancellationStopsTheCommand(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := d.Exec(ctx, []string{"sleep", "30"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec after cancel = %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Exec returned %v after the cancel", el)
	}
	select {
	case <-srv.Ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the command still runs in the guest 5s after the cancel")
	}
	// The connection survives a cancelled command.
	if _, err := d.Exec(context.Background(), []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := srv.Conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestExecDeadlineEnforcedInTheGuest(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	// The guest's `timeout` ends the command even if marina never cancels
	// (e.g. the connection is gone): here marina waits without a deadline.
	cmd, err := remoteCommand([]string{"sleep", "30"}, true, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = d.guest.ssh.Run(context.Background(), cmd, nil)
	if err == nil || !strings.Contains(execError([]string{"sleep"}, err, nil).Error(), "exit status 124") {
		t.Fatalf("Run = %v, want timeout's exit status 124", err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("the guest ended the command after %v, want about 1s", el)
	}
	// Through Exec, the ctx deadline ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := d.Exec(ctx, []string{"sleep", "30"}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec past its deadline = %v", err)
	}
}

func TestExecRedialsAfterTheConnectionBreaks(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	ctx := context.Background()
	if _, err := d.Exec(ctx, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	srv.DropConnections()
	out, err := d.Exec(ctx, []string{"echo", "again"}, nil)
	if err != nil || strings.TrimSpace(string(out)) != "again" {
		t.Fatalf("Exec after the connection broke = %q, %v", out, err)
	}
	if n := srv.Conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (one redial)", n)
	}
}

func TestExecRefuses(t *testing.T) {
	srv := sshtest.Start(t)
	e := newSSHExecutor(GuestUser, func(context.Context) (string, string, error) {
		return "192.0.2.1:22", srv.KeyFile, nil
	})
	if _, _, err := e.Run(context.Background(), "true", nil); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("non-loopback target: %v", err)
	}
	d := execDriver(t, srv)
	d.target = func(context.Context) (SSHTarget, error) {
		return SSHTarget{}, errors.New(`the VM marina is not running (Lima: "Stopped"); ` + "`marina up` starts it")
	}
	if _, err := d.Exec(context.Background(), []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "marina up") {
		t.Errorf("Exec on a stopped VM: %v", err)
	}
}

func TestShellArgv(t *testing.T) {
	base := []string{"ssh", "-F", "/dev/null", "-i", "/h/.marina/lima/_config/user", "-p", "60022",
		"-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "BatchMode=yes"}
	for _, tc := range []struct {
		name string
		argv []string
		tty  bool
		want []string
	}{
		{"login shell", nil, false, append(append([]string{}, base...), "-t", "lima@127.0.0.1")},
		{"command", []string{"docker", "ps", "-a"}, false, append(append([]string{}, base...), "lima@127.0.0.1", "--", "'docker' 'ps' '-a'")},
		{"command with tty", []string{"top"}, true, append(append([]string{}, base...), "-t", "lima@127.0.0.1", "--", "'top'")},
		{"quoted", []string{"sh", "-c", "echo it's"}, false, append(append([]string{}, base...), "lima@127.0.0.1", "--", `'sh' '-c' 'echo it'\''s'`)},
	} {
		got, err := ShellArgv("/h/.marina/lima/_config/user", 60022, tc.argv, tc.tty)
		if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: ShellArgv = %q, %v\nwant %q", tc.name, got, err, tc.want)
		}
	}
}

// TestShellThroughSystemSSH runs Shell's argv with the real ssh client
// against the test server.
func TestShellThroughSystemSSH(t *testing.T) {
	srv := sshtest.Start(t)
	d := execDriver(t, srv)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.Shell(ctx, []string{"printf", "%s|", "a b", "it's", "$HOME"}, strings.NewReader(""), &out, &errb)
	if err != nil {
		t.Fatalf("Shell: %v\n%s", err, errb.String())
	}
	if got := out.String(); got != "a b|it's|$HOME|" {
		t.Errorf("Shell printed %q", got)
	}
}

// TestGuestLogsInAsTheTargetsUser: the shared SSH connection learns the
// guest user (an adopted VM's, not marina's "lima") when it dials, and
// marina shell logs in as that user too.
func TestGuestLogsInAsTheTargetsUser(t *testing.T) {
	g := NewGuest(func(context.Context) (SSHTarget, error) {
		return SSHTarget{Addr: "127.0.0.1:60022", KeyFile: "/k", User: "bcollard"}, nil
	})
	if _, _, err := g.ssh.target(context.Background()); err != nil || g.ssh.user != "bcollard" {
		t.Errorf("the SSH executor logs in as %q (%v)", g.ssh.user, err)
	}
	argv, err := shellArgv("bcollard", "/k", 60022, []string{"id"}, false)
	if err != nil || !strings.Contains(strings.Join(argv, " "), " bcollard@127.0.0.1 -- 'id'") {
		t.Errorf("shell argv = %q, %v", argv, err)
	}
}
