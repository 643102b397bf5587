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

func mustSudoers(t *testing.T, spec SudoersSpec) []byte {
	t.Helper()
	b, err := Sudoers(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSudoersGolden pins the drop-in byte for byte (update with -update).
func TestSudoersGolden(t *testing.T) {
	golden.Check(t, "testdata/sudoers/user.golden", mustSudoers(t, SudoersSpec{CIDR: "172.30.0.0/16", User: "alice"}))
	golden.Check(t, "testdata/sudoers/group.golden", mustSudoers(t, SudoersSpec{CIDR: "10.99.0.0/16", Group: "admin"}))
}

// TestDarwinRouteCommandsAreWhatRouteRuns: every command Route plans on
// macOS, for gateways of every octet width, matches one pattern of the
// drop-in (fnmatch semantics, as sudo matches arguments); nothing else does.
func TestDarwinRouteCommandsAreWhatRouteRuns(t *testing.T) {
	pats, err := DarwinRouteCommands("172.30.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if len(pats) != 1+81 {
		t.Fatalf("%d patterns, want the delete and 81 adds", len(pats))
	}
	matches := func(cmd string) bool {
		for _, p := range pats {
			if ok, err := filepath.Match(p, cmd); err != nil {
				t.Fatal(err)
			} else if ok {
				return true
			}
		}
		return false
	}
	for _, gw := range []string{"1.2.3.4", "192.168.64.3", "10.0.100.254", "255.255.255.255", "192.168.5.15"} {
		r := &Route{OS: Darwin, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: &fakeRunner{replies: map[string]reply{
			darwinGet: {out: readRouteFixture(t, "darwin-wrong-gateway.txt")},
		}}}}
		_, cmds, err := r.Plan(context.Background(), gw)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) != 2 {
			t.Fatalf("plan for %s: %v", gw, cmds)
		}
		for _, c := range cmds {
			if !matches(strings.Join(c.Argv, " ")) {
				t.Errorf("the drop-in does not allow %s", QuoteArgv(c.Argv))
			}
		}
	}
	for _, cmd := range []string{
		"/sbin/route -n add -net 172.30.0.0/16 192.168.64.3 -ifscope en0",
		"/sbin/route -n add -net 172.30.0.0/16 1.2.3.4 5",
		"/sbin/route -n add -net 172.30.0.0/16 1234.1.1.1",
		"/sbin/route -n add -net 172.30.0.0/16 a.b.c.d",
		"/sbin/route -n add -net 172.31.0.0/16 192.168.64.3",
		"/sbin/route -n change -net 172.30.0.0/16 192.168.64.3",
		"/sbin/route -n delete -net 172.30.0.0/16 192.168.64.3",
		"/sbin/route -n delete -net 0.0.0.0/0",
		"/sbin/route flush",
	} {
		if matches(cmd) {
			t.Errorf("the drop-in allows %s", cmd)
		}
	}
}

func TestSudoersRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec SudoersSpec
		want string
	}{
		{SudoersSpec{CIDR: "172.30.0.0/16"}, "a user or a group is required"},
		{SudoersSpec{CIDR: "172.30.0.0/16", User: "a", Group: "b"}, "not both"},
		{SudoersSpec{CIDR: "172.30.0.0/16", User: "root"}, "root needs no sudoers rule"},
		{SudoersSpec{CIDR: "172.30.0.0/16", User: "al ice"}, "characters"},
		{SudoersSpec{CIDR: "172.30.0.0/16", User: "ALL,bob"}, "characters"},
		{SudoersSpec{CIDR: "172.30.0.0/16", Group: "%admin"}, "characters"},
		{SudoersSpec{CIDR: "172.30.1.0/16", User: "alice"}, "not a network address"},
		{SudoersSpec{CIDR: "*", User: "alice"}, "not a CIDR"},
	} {
		if _, err := Sudoers(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Sudoers(%+v) = %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
	for _, p := range []string{"relative/marina", "/etc/sudoers.d/marina.conf", "/etc/sudoers.d/marina~", "/etc/sudoers.d/../sudoers"} {
		if _, err := SudoersInstallCmds(p, nil); err == nil {
			t.Errorf("SudoersInstallCmds(%q) accepted", p)
		}
		if _, err := SudoersRemoveCmds(p); err == nil {
			t.Errorf("SudoersRemoveCmds(%q) accepted", p)
		}
	}
}

// requireTool: a test that needs a program present on macOS and on CI's
// machines skips only off CI.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/" + name); serr == nil {
			return "/usr/sbin/" + name
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing; CI must have it (Debian: apt-get install sudo)", name)
		}
		t.Skipf("%s is not installed (Debian: apt-get install sudo); CI fails instead of skipping", name)
	}
	return p
}

// TestSudoersVisudo: sudo's own parser accepts the drop-in.
func TestSudoersVisudo(t *testing.T) {
	requireTool(t, "visudo")
	for _, spec := range []SudoersSpec{{CIDR: "172.30.0.0/16", User: "alice"}, {CIDR: "10.99.0.0/16", Group: "admin"}} {
		ran, err := VisudoCheck(context.Background(), mustSudoers(t, spec))
		if !ran || err != nil {
			t.Errorf("%+v: ran %v, %v", spec, ran, err)
		}
	}
	// The check can fail: a rule with a stray comma is rejected.
	bad := append(mustSudoers(t, SudoersSpec{CIDR: "172.30.0.0/16", User: "alice"}), []byte("alice ALL=(root) NOPASSWD: /sbin/route,,\n")...)
	if ran, err := VisudoCheck(context.Background(), bad); !ran || err == nil {
		t.Errorf("visudo accepted a broken file: ran %v, %v", ran, err)
	}
}

// TestSudoersSudoMatchesOnlyMarinaRoutes asks the real sudo which route
// commands the drop-in allows: in a private mount namespace, the drop-in is
// the only file in /etc/sudoers.d and a stand-in /sbin/route exists (sudo
// resolves the command before matching), and `sudo -n -l -U nobody CMD`
// exits 0 exactly for an allowed command. A '*' gateway rule is checked the
// same way, to show that the test tells a too-broad rule apart.
func TestSudoersSudoMatchesOnlyMarinaRoutes(t *testing.T) {
	requireRoot(t)
	requireTool(t, "sudo")
	requireTool(t, "unshare")
	if _, err := os.Stat("/etc/sudoers"); err != nil {
		t.Skipf("no /etc/sudoers: %v", err)
	}
	allowed := []string{
		"-n add -net 172.30.0.0/16 192.168.64.3",
		"-n add -net 172.30.0.0/16 1.2.3.4",
		"-n add -net 172.30.0.0/16 255.255.255.255",
		"-n delete -net 172.30.0.0/16",
	}
	refused := []string{
		"-n add -net 172.30.0.0/16 192.168.64.3 -ifscope en0",
		"-n add -net 172.30.0.0/16 1.2.3.4 -netmask 0.0.0.0",
		"-n add -net 172.31.0.0/16 192.168.64.3",
		"-n change -net 172.30.0.0/16 192.168.64.3",
		"-n add -net 172.30.0.0/16 a.b.c.d",
		"-n delete -net 172.30.0.0/16 192.168.64.3",
		"-n add -net 172.30.0.0/16 1234.1.1.1",
		"flush",
	}
	probe := func(t *testing.T, content []byte) map[string]bool {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "marina"), content, 0o440); err != nil {
			t.Fatal(err)
		}
		var script bytes.Buffer
		script.WriteString(`set -e
mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs /etc/sudoers.d
cp "$1/marina" /etc/sudoers.d/marina
chmod 0440 /etc/sudoers.d/marina
route=$(readlink -f /sbin)/route
if [ ! -e "$route" ]; then
	mount -t tmpfs -o mode=0755 tmpfs "$(dirname "$route")"
	printf '#!/bin/sh\nexit 0\n' >"$route"
	chmod 0755 "$route"
fi
set +e
shift
for c in "$@"; do
	sudo -n -l -U nobody /sbin/route $c >/dev/null 2>&1
	echo "$?"
done
`)
		args := append([]string{"-m", "sh", "-c", script.String(), "sh", dir}, append(append([]string{}, allowed...), refused...)...)
		out, err := exec.Command("unshare", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("unshare: %v\n%s", err, out)
		}
		codes := strings.Fields(string(out))
		if len(codes) != len(allowed)+len(refused) {
			t.Fatalf("sudo probes printed %q", out)
		}
		got := map[string]bool{}
		for i, c := range append(append([]string{}, allowed...), refused...) {
			got[c] = codes[i] == "0"
		}
		return got
	}
	got := probe(t, mustSudoers(t, SudoersSpec{CIDR: "172.30.0.0/16", User: "nobody"}))
	for _, c := range allowed {
		if !got[c] {
			t.Errorf("sudo refuses route %s", c)
		}
	}
	for _, c := range refused {
		if got[c] {
			t.Errorf("sudo allows route %s", c)
		}
	}
	broad := probe(t, []byte("nobody ALL=(root) NOPASSWD: /sbin/route -n add -net 172.30.0.0/16 *\n"))
	if !broad["-n add -net 172.30.0.0/16 192.168.64.3 -ifscope en0"] {
		t.Error("the control rule with '*' did not allow extra arguments: the probe cannot tell a broad rule apart")
	}
}

// TestSudoersInstallAndRemoveArgv: the commands Privileged shows and runs
// through its Runner, with sudo in front, in order.
func TestSudoersInstallAndRemoveArgv(t *testing.T) {
	content := mustSudoers(t, SudoersSpec{CIDR: "172.30.0.0/16", User: "alice"})
	install, err := SudoersInstallCmds(SudoersPath, content)
	if err != nil {
		t.Fatal(err)
	}
	var shown bytes.Buffer
	f := &fakeRunner{out: &shown}
	p := &Privileged{Runner: f, Interactive: true, Out: &shown}
	if err := p.Do(context.Background(), "let the route change", install...); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sudo -- /usr/bin/tee /etc/sudoers.d/marina.tmp",
		"sudo -- /usr/sbin/visudo -c -f /etc/sudoers.d/marina.tmp",
		"sudo -- /bin/chmod 0440 /etc/sudoers.d/marina.tmp",
		"sudo -- /bin/mv -f /etc/sudoers.d/marina.tmp /etc/sudoers.d/marina",
	}
	if got := f.argvs(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("install ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Equal(f.calls[0].stdin, content) {
		t.Error("tee was not fed the content")
	}
	if !strings.Contains(f.calls[0].out, "sudo /usr/bin/tee /etc/sudoers.d/marina.tmp") || !strings.Contains(f.calls[0].out, "sudo /bin/mv -f") {
		t.Errorf("the commands were not shown before the first one ran:\n%s", f.calls[0].out)
	}
	remove, err := SudoersRemoveCmds(SudoersPath)
	if err != nil {
		t.Fatal(err)
	}
	f.calls = nil
	if err := p.Do(context.Background(), "remove", remove...); err != nil {
		t.Fatal(err)
	}
	if got := f.argvs(); len(got) != 1 || got[0] != "sudo -- /bin/rm -f -- /etc/sudoers.d/marina" {
		t.Fatalf("remove ran %q", got)
	}
}

// TestSudoersInstallRuns runs the install commands for real (as the
// current user, into a temporary directory): the file lands with mode
// 0440; a content visudo rejects stops before the file is replaced.
func TestSudoersInstallRuns(t *testing.T) {
	requireTool(t, "visudo")
	if _, err := os.Stat(visudoPath); err != nil {
		t.Skipf("visudo is not at %s, where the install runs it", visudoPath)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "marina")
	content := mustSudoers(t, SudoersSpec{CIDR: "172.30.0.0/16", User: "alice"})
	p := &Privileged{Runner: ExecRunner{}, IsRoot: true, Out: new(bytes.Buffer)}
	install := func(c []byte) error {
		cmds, err := SudoersInstallCmds(path, c)
		if err != nil {
			t.Fatal(err)
		}
		return p.Do(context.Background(), "install", cmds...)
	}
	if err := install(content); err != nil {
		t.Fatal(err)
	}
	st, err := CheckSudoers(path, content)
	if err != nil || st != (SudoersState{Exists: true, Readable: true, Ours: true, Current: true}) {
		t.Fatalf("after install: %+v, %v", st, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o440 {
		t.Errorf("mode %v, want 0440", fi.Mode().Perm())
	}
	err = install([]byte("alice ALL=(root) NOPASSWD: /sbin/route,,\n"))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Argv[0] != visudoPath {
		t.Fatalf("installing a broken file: %v, want visudo's refusal", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, content) {
		t.Error("a rejected content replaced the installed file")
	}
	// Someone else's file: not ours, not current.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("alice ALL=(ALL) ALL\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if st, err := CheckSudoers(other, content); err != nil || !st.Exists || st.Ours || st.Current {
		t.Errorf("someone else's file: %+v, %v", st, err)
	}
	if st, err := CheckSudoers(filepath.Join(dir, "absent"), content); err != nil || st.Exists {
		t.Errorf("absent: %+v, %v", st, err)
	}
}

// TestSudoAllows: `sudo -n -l -- CMD` per command; the first refusal is
// returned.
func TestSudoAllows(t *testing.T) {
	f := &fakeRunner{replies: map[string]reply{
		"sudo -n -l -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.3": {fail: true, stderr: "sudo: a password is required"},
	}}
	del := []string{"/sbin/route", "-n", "delete", "-net", "172.30.0.0/16"}
	add := []string{"/sbin/route", "-n", "add", "-net", "172.30.0.0/16", "192.168.64.3"}
	refused, err := SudoAllows(context.Background(), f, del, add)
	if err != nil || QuoteArgv(refused) != QuoteArgv(add) {
		t.Fatalf("refused %q, %v", refused, err)
	}
	if got := f.argvs(); len(got) != 2 || got[0] != "sudo -n -l -- /sbin/route -n delete -net 172.30.0.0/16" {
		t.Errorf("ran %q", got)
	}
	if refused, err := SudoAllows(context.Background(), &fakeRunner{}, del, add); err != nil || refused != nil {
		t.Errorf("all allowed: %q, %v", refused, err)
	}
}
