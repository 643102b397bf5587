package hostnet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"
)

var spec = GuestNetSpec{BridgeCIDR: "172.30.0.0/16"}

const (
	noSNAT24  = "-s 172.30.0.0/16 -d 192.168.64.0/24 -o lima0 -m comment --comment marina-no-snat -j ACCEPT"
	hostToBr  = "-s 192.168.64.0/24 -d 172.30.0.0/16 -i lima0 -m comment --comment marina-host-to-bridge -j ACCEPT"
	noSNAT20  = "-s 172.30.0.0/16 -d 192.168.64.0/20 -o lima0 -m comment --comment marina-no-snat -j ACCEPT"
	hostToB20 = "-s 192.168.64.0/20 -d 172.30.0.0/16 -i lima0 -m comment --comment marina-host-to-bridge -j ACCEPT"
)

// TestGuestFilesGolden pins the persisted script and unit files, and checks
// the script's syntax with the real bash.
func TestGuestFilesGolden(t *testing.T) {
	files, err := GuestFiles(spec)
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, f := range files {
		fmt.Fprintf(&all, "===== %s (mode %s)\n%s", f.Path, f.Mode, f.Content)
	}
	golden.Check(t, "testdata/guest-files.golden", all.Bytes())
	// One owner per guest file: /etc/sysctl.d/99-marina.conf belongs to the
	// VM's provisioning (core/vm/lima), which writes every marina sysctl.
	for _, f := range files {
		if strings.HasPrefix(f.Path, "/etc/sysctl.d/") {
			t.Errorf("the guest network writes %s, which the VM's provisioning owns", f.Path)
		}
	}

	script := filepath.Join(t.TempDir(), "marina-guest-net.sh")
	if err := os.WriteFile(script, guestScript, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v: %s", err, out)
	}
	if out, err := exec.Command("bash", script).CombinedOutput(); err == nil || !strings.Contains(string(out), "usage:") {
		t.Fatalf("script without arguments: %v: %s", err, out)
	}
}

func TestEnsureGuestNetwork(t *testing.T) {
	ctx := context.Background()
	g := newFakeGuest("192.168.64.3/24")
	res, err := EnsureGuestNetwork(ctx, g.exec, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.GuestNet != "192.168.64.0/24" {
		t.Errorf("GuestNet = %s", res.GuestNet)
	}
	wantChanges := []string{
		"set net.ipv4.ip_forward=1",
		"inserted nat POSTROUTING: no SNAT for 172.30.0.0/16 -> 192.168.64.0/24",
		"inserted DOCKER-USER: accept 192.168.64.0/24 -> 172.30.0.0/16",
		"wrote " + GuestScriptPath, "wrote " + GuestServicePath, "wrote " + GuestDropInPath,
		"reloaded systemd", "enabled " + GuestServiceName,
	}
	if !slices.Equal(res.Changes, wantChanges) {
		t.Errorf("changes:\n%s\nwant\n%s", strings.Join(res.Changes, "\n"), strings.Join(wantChanges, "\n"))
	}
	if got := g.rules("nat/POSTROUTING"); !slices.Equal(got, []string{noSNAT24, dockerMasq}) {
		t.Errorf("nat POSTROUTING = %q", got)
	}
	if got := g.rules("filter/DOCKER-USER"); !slices.Equal(got, []string{hostToBr}) {
		t.Errorf("DOCKER-USER = %q", got)
	}
	files, _ := GuestFiles(spec)
	for _, f := range files {
		if got := g.files[f.Path]; !bytes.Equal(got.content, f.Content) || got.mode != f.Mode {
			t.Errorf("%s: mode %s content %q", f.Path, got.mode, got.content)
		}
	}
	if len(g.files) != len(files) {
		t.Errorf("temporary files left: %v", g.files)
	}
	// Every rule was checked with -C before it was inserted.
	for i, c := range g.calls {
		if j := slices.Index(c, "-I"); j > 0 {
			check := slices.Clone(c)
			check[j] = "-C"
			check = slices.Delete(check, j+2, j+3) // the position
			if !slices.ContainsFunc(g.calls[:i], func(p []string) bool { return slices.Equal(p, check) }) {
				t.Errorf("%s ran without a prior %s", QuoteArgv(c), QuoteArgv(check))
			}
		}
	}
	if st, err := CheckGuestNetwork(ctx, g.exec, spec); err != nil || !st.OK() {
		t.Fatalf("Check after Ensure: %+v, %v", st, err)
	}

	// Second run: only reads.
	g.calls = nil
	res, err = EnsureGuestNetwork(ctx, g.exec, spec)
	if err != nil || len(res.Changes) != 0 || len(g.mutations()) != 0 {
		t.Fatalf("second run changed %q (ran %q), %v", res.Changes, g.mutations(), err)
	}

	// Docker restarts: its MASQUERADE is first again; Check says so and
	// Ensure moves marina's rule back in front without duplicating it.
	g.dockerRestart()
	st, err := CheckGuestNetwork(ctx, g.exec, spec)
	if err != nil || st.OK() {
		t.Fatalf("Check after a docker restart = %+v, %v", st, err)
	}
	if c := failed(st); len(c) != 1 || !strings.Contains(c[0].Detail, "not first") || c[0].Fix == "" {
		t.Fatalf("failed checks: %+v", c)
	}
	res, err = EnsureGuestNetwork(ctx, g.exec, spec)
	if err != nil || !slices.Equal(res.Changes, []string{"moved to the top: nat POSTROUTING: no SNAT for 172.30.0.0/16 -> 192.168.64.0/24"}) {
		t.Fatalf("after docker restart: %q, %v", res.Changes, err)
	}
	if got := g.rules("nat/POSTROUTING"); !slices.Equal(got, []string{noSNAT24, dockerMasq}) {
		t.Errorf("nat POSTROUTING = %q", got)
	}

	// A changed file is rewritten, and systemd reloaded; the service stays enabled.
	g.files[GuestDropInPath] = fakeFile{mode: "0644", content: []byte("edited\n")}
	g.calls = nil
	res, err = EnsureGuestNetwork(ctx, g.exec, spec)
	if err != nil || !slices.Equal(res.Changes, []string{"wrote " + GuestDropInPath, "reloaded systemd"}) {
		t.Fatalf("after an edit: %q, %v", res.Changes, err)
	}
}

func failed(st GuestNetStatus) []GuestCheck {
	var f []GuestCheck
	for _, c := range st.Checks {
		if !c.OK {
			f = append(f, c)
		}
	}
	return f
}

// TestEnsureGuestNetworkPrefix: the guest network comes from the interface's
// own prefix (G17), and rules for an old guest network are replaced.
func TestEnsureGuestNetworkPrefix(t *testing.T) {
	ctx := context.Background()
	g := newFakeGuest("192.168.64.3/24")
	if _, err := EnsureGuestNetwork(ctx, g.exec, spec); err != nil {
		t.Fatal(err)
	}
	g.addr = "192.168.70.9/20"
	res, err := EnsureGuestNetwork(ctx, g.exec, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.GuestNet != "192.168.64.0/20" {
		t.Errorf("GuestNet = %s, want 192.168.64.0/20", res.GuestNet)
	}
	if got := g.rules("nat/POSTROUTING"); !slices.Equal(got, []string{noSNAT20, dockerMasq}) {
		t.Errorf("nat POSTROUTING = %q", got)
	}
	if got := g.rules("filter/DOCKER-USER"); !slices.Equal(got, []string{hostToB20}) {
		t.Errorf("DOCKER-USER = %q", got)
	}
	if !slices.ContainsFunc(res.Changes, func(s string) bool { return strings.HasPrefix(s, "deleted stale rule from nat POSTROUTING") }) {
		t.Errorf("changes %q do not report the stale rule", res.Changes)
	}
}

func TestEnsureGuestNetworkErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(g *fakeGuest)
		spec  GuestNetSpec
		want  string
	}{
		{"no lima0", func(g *fakeGuest) { g.iface = "eth0" }, spec, `reading the address of guest interface lima0`},
		{"lima0 without an address", func(g *fakeGuest) { g.addr = "" }, spec, "guest interface lima0: no IPv4 address (is the VM's vzNAT network up?)"},
		{"no DOCKER-USER", func(g *fakeGuest) { delete(g.chains, "filter/DOCKER-USER") }, spec, "is Docker running with iptables enabled?"},
		{"bad bridge", nil, GuestNetSpec{BridgeCIDR: "172.30.0.1/16"}, "(network.bridgeCIDR) is not a network address"},
		{"bad iface", nil, GuestNetSpec{BridgeCIDR: "172.30.0.0/16", GuestIface: "lima0; reboot"}, `guest interface "lima0; reboot"`},
		{"overlap", func(g *fakeGuest) { g.addr = "172.30.5.5/24" }, spec, "overlaps the bridge CIDR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGuest("192.168.64.3/24")
			if tc.setup != nil {
				tc.setup(g)
			}
			_, err := EnsureGuestNetwork(ctx, g.exec, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if m := g.mutations(); slices.ContainsFunc(m, func(s string) bool { return strings.Contains(s, "-I") }) && tc.name != "no DOCKER-USER" {
				t.Errorf("changed %q despite the error", m)
			}
		})
	}
}

func TestCheckGuestNetworkFresh(t *testing.T) {
	g := newFakeGuest("192.168.64.3/24")
	st, err := CheckGuestNetwork(context.Background(), g.exec, spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range failed(st) {
		if c.Fix == "" {
			t.Errorf("%s fails without a fix", c.Name)
		}
		names = append(names, c.Name)
	}
	want := []string{"ip_forward",
		"nat POSTROUTING: no SNAT for 172.30.0.0/16 -> 192.168.64.0/24", "DOCKER-USER: accept 192.168.64.0/24 -> 172.30.0.0/16",
		GuestScriptPath, GuestServicePath, GuestDropInPath, GuestServiceName + " enabled"}
	if !slices.Equal(names, want) {
		t.Errorf("failed checks:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if len(g.mutations()) != 0 {
		t.Errorf("Check changed %q", g.mutations())
	}
}

func TestUnitRenderRefusesSpecials(t *testing.T) {
	for _, v := range []string{"a\nb", "100%", `a\b`} {
		if _, err := (unitFile{Sections: []unitSection{{"Service", []unitKey{{"ExecStart", v}}}}}).render(); err == nil {
			t.Errorf("rendered %q", v)
		}
	}
}

func TestDriverExec(t *testing.T) {
	var gotIn []byte
	d := execerFunc(func(ctx context.Context, argv []string, in io.Reader) ([]byte, error) {
		if in != nil {
			gotIn, _ = io.ReadAll(in)
		}
		return []byte(strings.Join(argv, " ")), nil
	})
	out, err := DriverExec(d)(context.Background(), []string{"cat", "x"}, []byte("in"))
	if err != nil || string(out) != "cat x" || string(gotIn) != "in" {
		t.Fatalf("%q %q %v", out, gotIn, err)
	}
}

type execerFunc func(ctx context.Context, argv []string, in io.Reader) ([]byte, error)

func (f execerFunc) Exec(ctx context.Context, argv []string, in io.Reader) ([]byte, error) {
	return f(ctx, argv, in)
}
