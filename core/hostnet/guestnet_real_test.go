package hostnet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// netns is a network namespace the test created: real iptables, ip and
// sysctl run inside it, so nothing on this machine outside it changes.
type netns struct {
	t    *testing.T
	name string
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	return newNetnsNamed(t, "")
}

// newNetnsNamed is newNetns for a test that may run beside another's
// namespace: suffix tells them apart.
func newNetnsNamed(t *testing.T, suffix string) *netns {
	t.Helper()
	requireRoot(t)
	n := &netns{t: t, name: fmt.Sprintf("marina-hostnet-%d%s", os.Getpid(), suffix)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = ExecRunner{}.Run(ctx, []string{"ip", "netns", "del", n.name}, nil) // a leftover of a killed run
	if _, err := (ExecRunner{}).Run(ctx, []string{"ip", "netns", "add", n.name}, nil); err != nil {
		t.Fatalf("creating a network namespace (needs root and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := (ExecRunner{}).Run(ctx, []string{"ip", "netns", "del", n.name}, nil); err != nil {
			t.Errorf("removing network namespace %s: %v", n.name, err)
		}
	})
	return n
}

// run runs argv inside the namespace.
func (n *netns) run(argv ...string) string {
	n.t.Helper()
	out, err := n.exec(context.Background(), argv, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(out)
}

func (n *netns) exec(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return ExecRunner{}.Run(ctx, append([]string{"ip", "netns", "exec", n.name}, argv...), stdin)
}

// rulesOf lists a chain's rules as the real iptables prints them.
func (n *netns) rulesOf(table, chain string) []string {
	var r []string
	for _, l := range strings.Split(n.run("iptables", "-t", table, "-S", chain), "\n") {
		if strings.HasPrefix(l, "-A ") {
			r = append(r, strings.TrimPrefix(l, "-A "+chain+" "))
		}
	}
	return r
}

// TestGuestNetworkRealIptables runs EnsureGuestNetwork and the persisted
// script against the real iptables, ip and sysctl in a network namespace
// shaped like the VM after Docker started (lima0 with a /20, Docker's
// MASQUERADE, a DOCKER-USER chain). Files and systemctl go to the fake.
func TestGuestNetworkRealIptables(t *testing.T) {
	ns := newNetns(t)
	ns.run("ip", "link", "add", "lima0", "type", "veth", "peer", "name", "lima0-peer")
	ns.run("ip", "addr", "add", "192.168.70.9/20", "dev", "lima0")
	ns.run("ip", "link", "set", "lima0", "up")
	ns.run("iptables", "-N", "DOCKER-USER")
	masq := strings.Fields(dockerMasq)
	ns.run(append([]string{"iptables", "-t", "nat", "-A", "POSTROUTING"}, masq...)...)
	ns.run("sysctl", "-q", "-w", "net.ipv4.ip_forward=0")

	files := newFakeGuest("")
	exec := func(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
		switch argv[0] {
		case "iptables", "ip", "sysctl":
			return ns.exec(ctx, argv, stdin)
		}
		return files.exec(ctx, argv, stdin)
	}
	ctx := context.Background()
	wantNAT := []string{noSNAT20, dockerMasq}
	wantUser := []string{hostToB20}
	expect := func(when string) {
		t.Helper()
		if got := ns.rulesOf("nat", "POSTROUTING"); !slices.Equal(got, wantNAT) {
			t.Fatalf("%s: nat POSTROUTING =\n%s\nwant\n%s", when, strings.Join(got, "\n"), strings.Join(wantNAT, "\n"))
		}
		if got := ns.rulesOf("filter", "DOCKER-USER"); !slices.Equal(got, wantUser) {
			t.Fatalf("%s: DOCKER-USER = %q, want %q", when, got, wantUser)
		}
		if got := strings.TrimSpace(ns.run("sysctl", "-n", "net.ipv4.ip_forward")); got != "1" {
			t.Fatalf("%s: ip_forward = %s", when, got)
		}
	}
	dockerRestart := func() {
		ns.run(append([]string{"iptables", "-t", "nat", "-D", "POSTROUTING"}, masq...)...)
		ns.run(append([]string{"iptables", "-t", "nat", "-I", "POSTROUTING", "1"}, masq...)...)
	}

	// The Go path.
	res, err := EnsureGuestNetwork(ctx, exec, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.GuestNet != "192.168.64.0/20" {
		t.Fatalf("GuestNet = %s", res.GuestNet)
	}
	expect("first Ensure")
	if res, err := EnsureGuestNetwork(ctx, exec, spec); err != nil || len(res.Changes) != 0 {
		t.Fatalf("second Ensure changed %q, %v", res.Changes, err)
	}
	if st, err := CheckGuestNetwork(ctx, exec, spec); err != nil || !st.OK() {
		t.Fatalf("Check: %+v, %v", failed(st), err)
	}
	dockerRestart()
	if st, _ := CheckGuestNetwork(ctx, exec, spec); st.OK() {
		t.Fatal("Check passes with Docker's MASQUERADE first")
	}
	if res, err := EnsureGuestNetwork(ctx, exec, spec); err != nil || len(res.Changes) != 1 {
		t.Fatalf("Ensure after a docker restart: %q, %v", res.Changes, err)
	}
	expect("Ensure after a docker restart")

	// The persisted script, from a VM where marina's rules are gone.
	script := filepath.Join(t.TempDir(), "marina-guest-net.sh")
	if err := os.WriteFile(script, guestScript, 0o755); err != nil {
		t.Fatal(err)
	}
	runScript := func() string {
		t.Helper()
		out, err := ns.exec(ctx, []string{"bash", script, "172.30.0.0/16", "lima0"}, nil)
		if err != nil {
			t.Fatalf("script: %v", err)
		}
		return string(out)
	}
	ns.run(append([]string{"iptables", "-t", "nat", "-D", "POSTROUTING"}, strings.Fields(noSNAT20)...)...)
	ns.run(append([]string{"iptables", "-D", "DOCKER-USER"}, strings.Fields(hostToB20)...)...)
	ns.run("sysctl", "-q", "-w", "net.ipv4.ip_forward=0")
	runScript()
	expect("script on a bare VM")
	runScript()
	expect("script run twice")
	dockerRestart()
	runScript()
	expect("script after a docker restart")

	// Before Docker or lima0 are ready the script changes nothing and
	// exits 0 (a failure would fail docker.service's start).
	ns.run("iptables", "-F", "DOCKER-USER")
	ns.run("iptables", "-X", "DOCKER-USER")
	runScript()
	if got := ns.rulesOf("nat", "POSTROUTING"); !slices.Equal(got, wantNAT) {
		t.Fatalf("without DOCKER-USER: nat POSTROUTING = %q", got)
	}
	ns.run("iptables", "-N", "DOCKER-USER")
	ns.run("ip", "addr", "flush", "dev", "lima0")
	runScript()
	if got := ns.rulesOf("filter", "DOCKER-USER"); len(got) != 0 {
		t.Fatalf("without a lima0 address: DOCKER-USER = %q", got)
	}

	// lima0 now has a /24: Ensure replaces the /20 rules.
	ns.run("ip", "addr", "add", "192.168.64.3/24", "dev", "lima0")
	if _, err := EnsureGuestNetwork(ctx, exec, spec); err != nil {
		t.Fatal(err)
	}
	wantNAT, wantUser = []string{noSNAT24, dockerMasq}, []string{hostToBr}
	expect("Ensure after the guest network changed")
}
