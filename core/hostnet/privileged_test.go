package hostnet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "''"},
		{"/sbin/route", "/sbin/route"},
		{"172.30.0.0/16", "172.30.0.0/16"},
		{"~demo.internal", "'~demo.internal'"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"x;rm -rf /", "'x;rm -rf /'"},
		{`%s\n`, `'%s\n'`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestCmdRenderRoundTrip proves the copy-paste rendering is exact: a POSIX
// shell running the rendered line (sudo left out) writes byte for byte the
// stdin marina would have fed, and passes every argv word unchanged.
func TestCmdRenderRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for i, content := range []string{
		"# managed by marina\nnameserver 172.30.255.53\n",
		"it's $HOME `x` \\ %s %% \"q\"\n\nlast line\n",
		"no trailing newline\nsecond",
		"",
	} {
		path := filepath.Join(dir, "f"+string(rune('a'+i)))
		c := Cmd{Argv: []string{"tee", path}, Stdin: []byte(content)}
		line := c.Render(false)
		if strings.Contains(line, "\n") && strings.HasSuffix(content, "\n") {
			t.Errorf("rendering of %q spans lines: %s", content, line)
		}
		if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil {
			t.Fatalf("sh -c %s: %v: %s", line, err, out)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("rendered %s\nwrote %q, want %q (%v)", line, got, content, err)
		}
		if !strings.HasPrefix(c.Render(true), "printf") || !strings.Contains(c.Render(true), "| sudo tee ") {
			t.Errorf("Render(true) = %s, want printf ... | sudo tee ...", c.Render(true))
		}
	}
	argv := []string{"printf", "%s|", "a b", "it's", "$X", "~z", ""}
	out, err := exec.Command("sh", "-c", QuoteArgv(argv)).Output()
	if err != nil || string(out) != "a b|it's|$X|~z||" {
		t.Errorf("sh -c %s printed %q, %v", QuoteArgv(argv), out, err)
	}
}

func TestPrivilegedDo(t *testing.T) {
	cmds := []Cmd{
		{Argv: []string{"/sbin/route", "-n", "delete", "-net", "172.30.0.0/16"}},
		{Argv: []string{"/sbin/route", "-n", "add", "-net", "172.30.0.0/16", "192.168.64.3"}},
	}
	failSudo := map[string]reply{"sudo -n -l -- /sbin/route -n delete -net 172.30.0.0/16": {fail: true, stderr: "sudo: a password is required"}}
	for _, tc := range []struct {
		name              string
		root, interactive bool
		replies           map[string]reply
		wantRun           []string
		wantErr           string
		wantNeedPriv      bool
	}{
		{
			name: "root runs argv as is", root: true,
			wantRun: []string{"/sbin/route -n delete -net 172.30.0.0/16", "/sbin/route -n add -net 172.30.0.0/16 192.168.64.3"},
		},
		{
			name: "interactive runs through sudo, which may prompt", interactive: true,
			wantRun: []string{"sudo -- /sbin/route -n delete -net 172.30.0.0/16", "sudo -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.3"},
		},
		{
			name: "no terminal, passwordless sudo for these commands: probe each, then sudo -n",
			wantRun: []string{"sudo -n -l -- /sbin/route -n delete -net 172.30.0.0/16", "sudo -n -l -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.3",
				"sudo -n -- /sbin/route -n delete -net 172.30.0.0/16", "sudo -n -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.3"},
		},
		{
			name: "no terminal, sudo needs a password: nothing runs", replies: failSudo,
			wantRun: []string{"sudo -n -l -- /sbin/route -n delete -net 172.30.0.0/16"}, wantNeedPriv: true,
			wantErr: "marina needs administrator rights to route the bridge, but sudo needs a password and there is no terminal to ask for it",
		},
		{
			name: "a failing command stops the rest", root: true,
			replies: map[string]reply{"/sbin/route -n delete -net 172.30.0.0/16": {fail: true, stderr: "route: writing to routing socket: not in table"}},
			wantRun: []string{"/sbin/route -n delete -net 172.30.0.0/16"},
			wantErr: "route the bridge: /sbin/route -n delete -net 172.30.0.0/16: exit status 1: route: writing to routing socket: not in table",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := &fakeRunner{replies: tc.replies, out: &out}
			p := &Privileged{Runner: f, IsRoot: tc.root, Interactive: tc.interactive, Out: &out}
			err := p.Do(context.Background(), "route the bridge", cmds...)
			if got := f.argvs(); strings.Join(got, "\n") != strings.Join(tc.wantRun, "\n") {
				t.Errorf("ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.wantRun, "\n"))
			}
			var np *NeedPrivilegeError
			if errors.As(err, &np) != tc.wantNeedPriv {
				t.Errorf("err = %v, want NeedPrivilegeError: %v", err, tc.wantNeedPriv)
			}
			if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.wantNeedPriv {
				if out.Len() != 0 {
					t.Errorf("printed %q although nothing runs (the error carries the commands)", out.String())
				}
				for _, c := range cmds {
					if !strings.Contains(err.Error(), "\n  sudo "+QuoteArgv(c.Argv)) {
						t.Errorf("error does not list %q:\n%v", c.Render(true), err)
					}
				}
				return
			}
			// Every privileged command was announced before anything ran as root.
			for _, c := range f.calls {
				if c.argv[0] == "sudo" && c.argv[1] == "-n" && c.argv[2] == "-l" {
					continue // the read-only probe
				}
				for _, want := range cmds {
					if !strings.Contains(c.out, QuoteArgv(want.Argv)) {
						t.Errorf("%s ran before %s was shown (shown: %q)", QuoteArgv(c.argv), QuoteArgv(want.Argv), c.out)
					}
				}
			}
			wantHead := "marina needs administrator rights to route the bridge:\n"
			if tc.root {
				wantHead = "marina runs these commands as root to route the bridge:\n"
			}
			if !strings.HasPrefix(out.String(), wantHead) {
				t.Errorf("announcement = %q, want it to start with %q", out.String(), wantHead)
			}
		})
	}
}

func TestPrivilegedDoNothingAndBadInput(t *testing.T) {
	var out bytes.Buffer
	f := &fakeRunner{}
	p := &Privileged{Runner: f, Out: &out}
	if err := p.Do(context.Background(), "nothing"); err != nil || len(f.calls) != 0 || out.Len() != 0 {
		t.Fatalf("Do without commands: err %v, calls %v, out %q", err, f.argvs(), out.String())
	}
	if err := p.Do(context.Background(), "x", Cmd{}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty argv: %v", err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("ran %v for an invalid command", f.argvs())
	}
}

func TestNeedPrivilegeErrorGolden(t *testing.T) {
	f := &fakeRunner{replies: map[string]reply{"sudo -n -l -- mkdir -p -m 0755 /etc/resolver": {fail: true, stderr: "sudo: a password is required"}}}
	p := &Privileged{Runner: f}
	err := p.Do(context.Background(), "resolve demo.internal through 172.30.255.53",
		Cmd{Argv: []string{"mkdir", "-p", "-m", "0755", "/etc/resolver"}},
		Cmd{Argv: []string{"tee", "/etc/resolver/demo.internal"}, Stdin: ResolverFileContent("demo.internal", []string{"172.30.255.53"})},
		Cmd{Argv: []string{"chmod", "0644", "/etc/resolver/demo.internal"}},
	)
	var np *NeedPrivilegeError
	if !errors.As(err, &np) || len(np.Commands) != 3 || np.Reason != "resolve demo.internal through 172.30.255.53" {
		t.Fatalf("err = %#v", err)
	}
	golden.Check(t, "testdata/need-privilege.golden", []byte(err.Error()+"\n"))
}

// TestPrivilegedReal runs real processes: as root (no sudo) a command with
// no input and one fed on stdin; a failing command's stderr in the error;
// and, not root and without a terminal, a real failing sudo probe that
// yields NeedPrivilegeError without running anything.
func TestPrivilegedReal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	target := filepath.Join(dir, "written")
	var out bytes.Buffer
	p := &Privileged{Runner: ExecRunner{}, IsRoot: true, Out: &out}
	if err := p.Do(ctx, "write a file", Cmd{Argv: []string{"true"}}, Cmd{Argv: []string{"tee", target}, Stdin: []byte("hello\n")}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "hello\n" {
		t.Fatalf("tee wrote %q, %v", got, err)
	}
	if !strings.Contains(out.String(), "  true\n") || !strings.Contains(out.String(), "| tee "+target+" >/dev/null\n") {
		t.Errorf("announcement: %q", out.String())
	}

	got, err := ExecRunner{}.Run(ctx, []string{"cat"}, []byte("through stdin"))
	if err != nil || string(got) != "through stdin" {
		t.Fatalf("cat = %q, %v", got, err)
	}
	_, err = ExecRunner{}.Run(ctx, []string{"sh", "-c", "echo oops >&2; exit 3"}, nil)
	var ce *CommandError
	var ee *exec.ExitError
	if !errors.As(err, &ce) || ce.Stderr != "oops" || !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("failing command: %#v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (ExecRunner{}).Run(cctx, []string{"sleep", "5"}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}

	// Not root, no terminal: the sudo -n -l probe fails for real (as `false`).
	noSudo := &fakeRunner{handle: func(argv []string, stdin []byte) ([]byte, error) {
		if strings.HasPrefix(strings.Join(argv, " "), "sudo -n -l -- ") {
			return ExecRunner{}.Run(ctx, []string{"sh", "-c", "echo 'sudo: a password is required' >&2; false"}, nil)
		}
		return ExecRunner{}.Run(ctx, argv, stdin)
	}}
	other := filepath.Join(dir, "never")
	out.Reset()
	p = &Privileged{Runner: noSudo, Out: &out}
	err = p.Do(ctx, "write another file", Cmd{Argv: []string{"tee", other}, Stdin: []byte("x\n")})
	var np *NeedPrivilegeError
	if !errors.As(err, &np) {
		t.Fatalf("err = %v, want NeedPrivilegeError", err)
	}
	if !strings.Contains(err.Error(), "printf '%s\\n' x | sudo tee "+other+" >/dev/null") || !strings.Contains(err.Error(), "a password is required") {
		t.Errorf("error does not list the command and the cause:\n%v", err)
	}
	if _, serr := os.Stat(other); !errors.Is(serr, os.ErrNotExist) || len(noSudo.calls) != 1 || out.Len() != 0 {
		t.Errorf("something ran: stat %v, calls %v, out %q", serr, noSudo.argvs(), out.String())
	}
}
