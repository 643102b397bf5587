package lab

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/labca"
)

// TestProxyChecks: doctor says whether the proxy answers — one listening on
// 127.0.0.1 does, a closed port does not — with where it came from and no
// password; no proxy is OK.
func TestProxyChecks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()

	cfg := config.Default()
	cfg.Proxy.HTTPS = "http://me:secret@" + ln.Addr().String()
	l := &Lab{Config: cfg, Getenv: func(k string) string {
		return map[string]string{"HTTP_PROXY": "http://" + deadAddr}[k]
	}}
	checks := l.proxyChecks(context.Background(), 2*time.Second)
	if len(checks) != 2 {
		t.Fatalf("checks = %+v", checks)
	}
	byName := map[string]Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	if c := byName["proxy https"]; c.Status != OK || !strings.Contains(c.Detail, "(config)") || strings.Contains(c.Detail, "secret") || !strings.Contains(c.Detail, "answers") {
		t.Errorf("https proxy check: %+v", c)
	}
	if c := byName["proxy http"]; c.Status != Fail || !strings.Contains(c.Detail, "environment ($HTTP_PROXY)") || !strings.Contains(c.Fix, "HTTP_PROXY") {
		t.Errorf("http proxy check: %+v", c)
	}
	l = &Lab{Config: config.Default(), Getenv: func(string) string { return "" }}
	if c := l.proxyChecks(context.Background(), time.Second); len(c) != 1 || c[0].Status != OK {
		t.Errorf("no proxy: %+v", c)
	}
}

// TestSlotRouteWarnings (issue 25): a VPN route over 10.0.0.0/8 covers
// every slot's subnets; cluster create warns about the new cluster's, with
// the fix (have the VPN exclude them: no slot is free of it). A /16 over
// slot 3's pods (10.13.0.0/16) only names a free slot.
func TestSlotRouteWarnings(t *testing.T) {
	old := ReadHostRoutes
	t.Cleanup(func() { ReadHostRoutes = old })
	routes := []hostnet.HostRoute{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "en0"}, {Dst: netip.MustParsePrefix("10.0.0.0/8"), Iface: "utun3"}}
	ReadHostRoutes = func(context.Context) ([]hostnet.HostRoute, error) { return routes, nil }
	l := &Lab{Config: config.Default()}
	w := l.slotRouteWarnings(context.Background(), "dev", 3)
	if len(w) != 2 || !strings.Contains(w[0], "10.0.0.0/8 dev utun3 overlaps the service subnet of cluster dev (slot 3) 10.3.0.0/16") ||
		!strings.Contains(w[1], "pod subnet of cluster dev (slot 3) 10.13.0.0/16") || !strings.Contains(w[0], "have the VPN exclude") {
		t.Fatalf("warnings = %q", w)
	}
	routes = []hostnet.HostRoute{{Dst: netip.MustParsePrefix("10.13.0.0/16"), Iface: "utun3"}}
	w = l.slotRouteWarnings(context.Background(), "dev", 3)
	if len(w) != 1 || !strings.Contains(w[0], "--slot 1") {
		t.Fatalf("warnings with one /16 = %q", w)
	}
	if w := l.slotRouteWarnings(context.Background(), "dev", 4); len(w) != 0 {
		t.Errorf("slot 4 is untouched: %q", w)
	}
}

// TestExtraCAsCheck: doctor counts the company CAs and warns of one that
// expires within 30 days; none listed is OK.
func TestExtraCAsCheck(t *testing.T) {
	home := t.TempDir()
	ca, err := labca.Create(filepath.Join(home, "corp"), labca.Scope{Lab: "corp", Zone: "corp.example", Bridge: netip.MustParsePrefix("10.0.0.0/8")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	l := &Lab{Config: cfg, Home: home}
	if c := l.extraCAsCheck(time.Now()); c.Status != OK || !strings.Contains(c.Detail, "none") {
		t.Errorf("no extra CAs: %+v", c)
	}
	cfg.Trust.ExtraCAs = []string{"~/corp/ca.crt"}
	if c := l.extraCAsCheck(time.Now()); c.Status != OK || !strings.HasPrefix(c.Detail, "1 trusted") {
		t.Errorf("one CA valid ten years: %+v", c)
	}
	// Ten years on, less 10 days: it expires soon.
	if c := l.extraCAsCheck(ca.Cert.NotAfter.Add(-10 * 24 * time.Hour)); c.Status != Warn || !strings.Contains(c.Detail, "expiring within 30 days") || c.Fix == "" {
		t.Errorf("a CA expiring soon: %+v", c)
	}
}

// TestRouteToTheVMIsTheLabs: with the lima driver the lab keeps a route for
// the bridge CIDR via the VM; a second up must not take it for a VPN's,
// whatever its interface is called (make test-vm's mvm0 caught it).
func TestRouteToTheVMIsTheLabs(t *testing.T) {
	old := ReadHostRoutes
	t.Cleanup(func() { ReadHostRoutes = old })
	own := hostnet.HostRoute{Dst: netip.MustParsePrefix("172.30.0.0/16"), Gateway: netip.MustParseAddr("192.168.106.2"), Iface: "mvm0"}
	ReadHostRoutes = func(context.Context) ([]hostnet.HostRoute, error) { return []hostnet.HostRoute{own}, nil }
	l := &Lab{Config: config.Default(), Route: &hostnet.Route{CIDR: "172.30.0.0/16"}}
	if rep, err := l.RouteOverlaps(context.Background(), nil); err != nil || len(rep.Overlaps) != 0 {
		t.Fatalf("the lab's own route to the VM: %+v %v", rep, err)
	}
	// Without a route of its own (host driver) the same route is a VPN's.
	l.Route = nil
	if rep, err := l.RouteOverlaps(context.Background(), nil); err != nil || !rep.Captures() {
		t.Fatalf("host driver, a route via mvm0: %+v %v", rep, err)
	}
}
