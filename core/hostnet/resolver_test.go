package hostnet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/test/golden"
)

var demo = sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53"}}

// realRunner records commands and really runs them (on temp paths only).
func realRunner() *fakeRunner {
	return &fakeRunner{handle: func(argv []string, stdin []byte) ([]byte, error) {
		return ExecRunner{}.Run(context.Background(), argv, stdin)
	}}
}

// TestResolverDarwin runs the real mkdir/tee/chmod/rm commands against a
// temporary resolver directory, as root would against /etc/resolver.
func TestResolverDarwin(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "resolver") // missing: must be created
	path := filepath.Join(dir, "demo.internal")
	f := realRunner()
	r := &Resolver{OS: Darwin, Dir: dir, Priv: &Privileged{Runner: f, IsRoot: true, Out: &bytes.Buffer{}}}
	step := func(name string, change sdk.ResolverChange, wantCmds []string, wantChanged bool) ResolverResult {
		t.Helper()
		f.calls = nil
		res, err := r.Apply(ctx, change)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := f.argvs(); strings.Join(got, "\n") != strings.Join(wantCmds, "\n") || res.Changed != wantChanged {
			t.Fatalf("%s: ran %q (changed %v), want %q", name, got, res.Changed, wantCmds)
		}
		return res
	}

	step("create", demo, []string{
		"mkdir -p -m 0755 " + dir,
		"tee " + path,
		"chmod 0644 " + path,
	}, true)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/resolver-demo.internal.golden", got)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if st, err := r.Check(ctx, demo); err != nil || !st.InPlace {
		t.Errorf("Check after create = %+v, %v", st, err)
	}

	step("unchanged: no privileged command at all", demo, nil, false)

	two := sdk.ResolverChange{Domain: "Demo.Internal.", Nameservers: []string{"172.30.255.53", "172.30.255.54"}}
	step("new nameserver: rewrite, no mkdir", two, []string{"tee " + path, "chmod 0644 " + path}, true)
	if got, _ := os.ReadFile(path); !bytes.Contains(got, []byte("nameserver 172.30.255.53\nnameserver 172.30.255.54\n")) {
		t.Errorf("rewritten file: %q", got)
	}
	if st, _ := r.Check(ctx, demo); st.InPlace || !strings.Contains(st.Detail, "differs") {
		t.Errorf("Check with stale servers = %+v", st)
	}

	step("remove", sdk.ResolverChange{Domain: "demo.internal", Remove: true}, []string{"rm -f -- " + path}, true)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file still there: %v", err)
	}
	step("remove again: nothing", sdk.ResolverChange{Domain: "demo.internal", Remove: true}, nil, false)
	if st, _ := r.Check(ctx, demo); st.InPlace || st.Fix == "" {
		t.Errorf("Check after remove = %+v", st)
	}

	// A file marina did not write is never overwritten nor removed.
	foreign := []byte("nameserver 10.0.0.1\n")
	if err := os.WriteFile(path, foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	f.calls = nil
	if _, err := r.Apply(ctx, demo); err == nil || !strings.Contains(err.Error(), "not written by marina") {
		t.Fatalf("Apply over a foreign file: %v", err)
	}
	res := step("remove a foreign file: left alone", sdk.ResolverChange{Domain: "demo.internal", Remove: true}, nil, false)
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "left in place") {
		t.Errorf("notes = %q", res.Notes)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, foreign) {
		t.Errorf("foreign file changed: %q", got)
	}
	if st, _ := r.Check(ctx, demo); st.InPlace || !strings.Contains(st.Fix, "move") {
		t.Errorf("Check with a foreign file = %+v", st)
	}
}

// fakeResolved emulates resolvectl for one existing link.
type fakeResolved struct {
	link    string
	servers []string
	domains []string
}

func (r *fakeResolved) handle(argv []string, stdin []byte) ([]byte, error) {
	if argv[0] == "sudo" {
		argv = argv[2:] // sudo -- ...
	}
	fail := func(msg string) ([]byte, error) {
		return nil, &CommandError{Argv: argv, Stderr: msg, Err: errors.New("exit status 1")}
	}
	if argv[0] != "resolvectl" {
		return fail("unexpected " + QuoteArgv(argv))
	}
	if len(argv) == 2 && argv[1] == "status" {
		return []byte("Global\n       Protocols: +LLMNR +mDNS -DNSOverTLS DNSSEC=no/unsupported\nresolv.conf mode: stub\n"), nil
	}
	if len(argv) < 3 {
		return fail("bad usage")
	}
	if argv[2] != r.link {
		return fail(`Failed to resolve interface "` + argv[2] + `": No such device`)
	}
	head := "Link 7 (" + r.link + "):"
	switch {
	case argv[1] == "dns" && len(argv) == 3:
		return []byte(strings.TrimSpace(head+" "+strings.Join(r.servers, " ")) + "\n"), nil
	case argv[1] == "domain" && len(argv) == 3:
		return []byte(strings.TrimSpace(head+" "+strings.Join(r.domains, " ")) + "\n"), nil
	case argv[1] == "dns":
		r.servers = argv[3:]
	case argv[1] == "domain":
		r.domains = argv[3:]
	case argv[1] == "revert" && len(argv) == 3:
		r.servers, r.domains = nil, nil
	default:
		return fail("bad usage")
	}
	return nil, nil
}

func resolvedRoot(t *testing.T) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "run/systemd/resolve"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestResolverLinuxResolved(t *testing.T) {
	ctx := context.Background()
	fr := &fakeResolved{link: "br-0123456789ab", domains: []string{"~other.test"}}
	f := &fakeRunner{handle: fr.handle}
	r := &Resolver{OS: Linux, Link: "br-0123456789ab", Priv: &Privileged{Runner: f, Interactive: true, Out: &bytes.Buffer{}},
		root: resolvedRoot(t), lookPath: func(string) (string, error) { return "/usr/bin/resolvectl", nil }}

	if st, err := r.Check(ctx, demo); err != nil || st.InPlace || st.Method != MethodResolved {
		t.Fatalf("Check before = %+v, %v", st, err)
	}
	f.calls = nil
	res, err := r.Apply(ctx, demo)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"resolvectl status", "resolvectl dns br-0123456789ab", "resolvectl domain br-0123456789ab",
		"sudo -- resolvectl dns br-0123456789ab 172.30.255.53",
		"sudo -- resolvectl domain br-0123456789ab '~demo.internal'",
	}
	if got := f.argvs(); strings.Join(got, "\n") != strings.Join(want, "\n") || !res.Changed || res.Method != MethodResolved {
		t.Fatalf("Apply ran\n%s\nwant\n%s (result %+v)", strings.Join(got, "\n"), strings.Join(want, "\n"), res)
	}
	if st, err := r.Check(ctx, demo); err != nil || !st.InPlace {
		t.Fatalf("Check after = %+v, %v", st, err)
	}

	f.calls = nil
	if res, err := r.Apply(ctx, demo); err != nil || res.Changed {
		t.Fatalf("second Apply: %+v, %v", res, err)
	}
	for _, a := range f.argvs() {
		if strings.HasPrefix(a, "sudo") {
			t.Errorf("second Apply ran %q", a)
		}
	}

	f.calls = nil
	if res, err := r.Apply(ctx, sdk.ResolverChange{Domain: "demo.internal", Remove: true}); err != nil || !res.Changed {
		t.Fatalf("remove: %+v, %v", res, err)
	}
	if got := f.argvs(); got[len(got)-1] != "sudo -- resolvectl revert br-0123456789ab" {
		t.Fatalf("remove ran %q", got)
	}
	if len(fr.domains) != 0 {
		t.Fatalf("domains after revert: %q", fr.domains)
	}

	// The link is gone (docker network removed): removing is a no-op with a
	// note, ensuring is an error that says why.
	r.Link = "br-gone"
	if res, err := r.Apply(ctx, sdk.ResolverChange{Domain: "demo.internal", Remove: true}); err != nil || res.Changed || len(res.Notes) != 1 {
		t.Fatalf("remove on a missing link: %+v, %v", res, err)
	}
	if _, err := r.Apply(ctx, demo); err == nil || !strings.Contains(err.Error(), "No such device") {
		t.Fatalf("apply on a missing link: %v", err)
	}
	r.Link = ""
	if _, err := r.Apply(ctx, demo); err == nil || !strings.Contains(err.Error(), "resolver link is empty") {
		t.Fatalf("apply without a link: %v", err)
	}
}

// TestResolverLinuxManual: without systemd-resolved marina changes nothing,
// runs no command, never touches /etc/resolv.conf, and returns the lines.
func TestResolverLinuxManual(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	for name, look := range map[string]func(string) (string, error){
		"no resolvectl":          func(string) (string, error) { return "", errors.New("not found") },
		"resolvectl, no run dir": func(string) (string, error) { return "/usr/bin/resolvectl", nil },
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeRunner{}
			r := &Resolver{OS: Linux, Link: "br-0123456789ab", Priv: &Privileged{Runner: f, IsRoot: true}, root: root, lookPath: look}
			res, err := r.Apply(ctx, demo)
			if err != nil || res.Changed || res.Method != MethodManual || res.Manual == nil {
				t.Fatalf("Apply = %+v, %v", res, err)
			}
			if got := f.argvs(); len(got) != 0 {
				t.Fatalf("ran %q", got)
			}
			text := res.Manual.String()
			golden.Check(t, "testdata/resolver-linux-manual.golden", []byte(text))
			if strings.Contains(text, "resolv.conf\n") || strings.Contains(text, "> /etc/resolv.conf") {
				t.Errorf("instructions touch /etc/resolv.conf:\n%s", text)
			}
			rm, err := r.Apply(ctx, sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53"}, Remove: true})
			if err != nil || rm.Manual == nil {
				t.Fatal(rm, err)
			}
			golden.Check(t, "testdata/resolver-linux-manual-remove.golden", []byte(rm.Manual.String()))

			st, err := r.Check(ctx, demo)
			if err != nil || st.InPlace || st.Method != MethodManual {
				t.Fatalf("Check = %+v, %v", st, err)
			}
		})
	}
	// The user followed the dnsmasq instructions: Check sees it.
	p := filepath.Join(root, "etc/dnsmasq.d/marina.conf")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("server=/demo.internal/172.30.255.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{OS: Linux, Priv: &Privileged{Runner: &fakeRunner{}}, root: root, lookPath: func(string) (string, error) { return "", errors.New("no") }}
	if st, err := r.Check(ctx, demo); err != nil || !st.InPlace || !strings.Contains(st.Detail, "/etc/dnsmasq.d/marina.conf") {
		t.Fatalf("Check with the dnsmasq snippet = %+v, %v", st, err)
	}
}

func TestResolverValidation(t *testing.T) {
	for _, tc := range []struct {
		change sdk.ResolverChange
		want   string
	}{
		{sdk.ResolverChange{Domain: "", Nameservers: []string{"1.2.3.4"}}, "resolver domain (dns.zone) is empty"},
		{sdk.ResolverChange{Domain: "../../etc/passwd", Nameservers: []string{"1.2.3.4"}}, "has an empty label"},
		{sdk.ResolverChange{Domain: "a/b", Nameservers: []string{"1.2.3.4"}}, `contains '/'`},
		{sdk.ResolverChange{Domain: "a..b", Nameservers: []string{"1.2.3.4"}}, "empty label"},
		{sdk.ResolverChange{Domain: "-a.b", Nameservers: []string{"1.2.3.4"}}, "starting or ending with '-'"},
		{sdk.ResolverChange{Domain: strings.Repeat("a", 64) + ".b", Nameservers: []string{"1.2.3.4"}}, "longer than 63"},
		{sdk.ResolverChange{Domain: "x y", Nameservers: []string{"1.2.3.4"}}, `contains ' '`},
		{sdk.ResolverChange{Domain: "demo.internal"}, "resolver nameservers for demo.internal: none given"},
		{sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"1.2.3.4", "resolver"}}, `resolver nameservers[1] "resolver" is not an IP address`},
		{sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53:53"}}, "a port cannot be given"},
		{sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"fe80::1%en0"}}, "is not an IP address"},
	} {
		for _, os := range []string{Darwin, Linux} {
			f := &fakeRunner{}
			r := &Resolver{OS: os, Dir: t.TempDir(), Link: "br-x", Priv: &Privileged{Runner: f, IsRoot: true},
				root: t.TempDir(), lookPath: func(string) (string, error) { return "", errors.New("no") }}
			_, err := r.Apply(context.Background(), tc.change)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %+v: err = %v, want %q", os, tc.change, err, tc.want)
			}
			if len(f.calls) != 0 {
				t.Errorf("%s %+v: ran %q before validating", os, tc.change, f.argvs())
			}
		}
	}
	for _, link := range []string{"-x", "br/0", "a b", "waytoolonginterfacename"} {
		r := &Resolver{OS: Linux, Link: link, Priv: &Privileged{Runner: &fakeRunner{handle: (&fakeResolved{link: link}).handle}, IsRoot: true},
			root: resolvedRoot(t), lookPath: func(string) (string, error) { return "/usr/bin/resolvectl", nil }}
		if _, err := r.Apply(context.Background(), demo); err == nil || !strings.Contains(err.Error(), "resolver link") {
			t.Errorf("link %q: %v", link, err)
		}
	}
}

func FuzzValidateZone(f *testing.F) {
	for _, s := range []string{"demo.internal", "a.b.c", "../x", "Demo.Internal.", "a..b", "-x", "é.test"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		z, err := ValidateZone(s)
		if err != nil {
			return
		}
		// An accepted zone is one plain file name under /etc/resolver and
		// needs no quoting on a command line.
		if z == "." || z == ".." || strings.ContainsAny(z, "/\\ \t\n\x00") || filepath.Base(z) != z || Quote(z) != z {
			t.Fatalf("ValidateZone(%q) accepted %q", s, z)
		}
		if z2, err := ValidateZone(z); err != nil || z2 != z {
			t.Fatalf("not idempotent: %q -> %q (%v)", z, z2, err)
		}
	})
}
