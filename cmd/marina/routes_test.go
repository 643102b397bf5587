package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRouteOverlap (issue 25): on a machine whose VPN routes part of the
// lab's bridge CIDR, up stops before it changes anything, naming the
// route, its interface and a free bridgeCIDR; doctor fails the same
// check; --allow-route-overlap goes on with a warning. The VPN is a veth
// with routes in a network namespace the test creates, where marina runs.
func TestRouteOverlap(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the tests as root")
		}
		t.Skip("needs root (a network namespace)")
	}
	ns := fmt.Sprintf("marina-cmd-routes-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run() // a leftover of a killed run
	ip("netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("removing network namespace %s: %v\n%s", ns, err, out)
		}
	})
	in := func(args ...string) { t.Helper(); ip(append([]string{"netns", "exec", ns, "ip"}, args...)...) }
	in("link", "add", "vpn0", "type", "veth", "peer", "name", "vpn0-peer")
	in("addr", "add", "10.8.0.1/24", "dev", "vpn0")
	in("link", "set", "vpn0", "up")
	in("route", "add", "172.24.7.0/24", "dev", "vpn0") // inside e2eSubnet
	in("route", "add", "172.16.0.0/14", "dev", "vpn0") // so the suggestion skips 172.16-19

	home := t.TempDir()
	id := "routes" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	writeLabConfig(t, home, id)
	run := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, marinaBin}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		return runCmd(t, cmd)
	}

	r := run("up", "--progress", "plain")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "172.24.7.0/24 dev vpn0 overlaps the bridge network (network.bridgeCIDR) 172.24.0.0/16: traffic from this machine to 172.24.7.0/24 goes to vpn0, not to the lab") ||
		!strings.Contains(r.stderr+r.stdout, "set network.bridgeCIDR: 172.20.0.0/16") || !strings.Contains(r.stderr+r.stdout, "--allow-route-overlap") {
		t.Fatalf("up with a VPN route over the bridge: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if out, err := dockerOK("network", "inspect", "marina-e2e-"+id); err == nil {
		t.Fatalf("up created the network although it refused: %s", out)
	}

	r = run("doctor", "-o", "json")
	var checks []struct{ Name, Status, Detail, Fix string }
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil || r.code != 1 {
		t.Fatalf("doctor: %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	found := false
	for _, c := range checks {
		if c.Name == "host route 172.24.7.0/24" {
			found = c.Status == "FAIL" && strings.Contains(c.Detail, "dev vpn0") && strings.Contains(c.Fix, "network.bridgeCIDR: 172.20.0.0/16")
		}
	}
	if !found {
		t.Errorf("doctor does not fail the route over the bridge: %+v", checks)
	}

	r = run("up", "--dry-run", "--allow-route-overlap", "--progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "Warning: 172.24.7.0/24 dev vpn0 overlaps the bridge network") {
		t.Fatalf("up --dry-run --allow-route-overlap: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
