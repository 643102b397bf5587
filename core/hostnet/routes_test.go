package hostnet

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
)

// A Mac on a corporate VPN (utun3 routes 10/8 and a /16 inside 172.30),
// with the lab's route to the VM on bridge100 and Docker Desktop's ARP
// entries.
const netstatVPN = `Routing tables

Internet:
Destination        Gateway            Flags               Netif Expire
default            192.168.1.1        UGScg                 en0
10                 link#20            UCS                 utun3
10.8/16            10.8.0.1           UGSc                utun3
127                127.0.0.1          UCS                   lo0
127.0.0.1          127.0.0.1          UH                    lo0
169.254            link#6             UCS                   en0      !
172.30             192.168.64.2       UGSc            bridge100
172.30.7/24        10.8.0.1           UGSc                utun3
172.31.9.9         10.8.0.1           UGHS                utun3
192.168.1          link#6             UCS                   en0      !
192.168.1.1/32     link#6             UCS                   en0      !
192.168.1.1        a4:91:b1:2:3:4     UHLWIir               en0   1173
192.168.64         link#21            UC              bridge100      !
192.168.64.2       5e:e9:1e:0:0:1     UHLWIi          bridge100    940
203.0.113          link#22            UCSB                  en0
224.0.0/4          link#6             UmCS                  en0      !
255.255.255.255/32 link#6             UCS                   en0      !
`

func TestParseNetstat(t *testing.T) {
	routes, err := parseNetstat(netstatVPN)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, r.String())
	}
	want := []string{
		"0.0.0.0/0 via 192.168.1.1 dev en0",
		"10.0.0.0/8 dev utun3",
		"10.8.0.0/16 via 10.8.0.1 dev utun3",
		"169.254.0.0/16 dev en0",
		"172.30.0.0/16 via 192.168.64.2 dev bridge100",
		"172.30.7.0/24 via 10.8.0.1 dev utun3",
		"172.31.9.9/32 via 10.8.0.1 dev utun3",
		"192.168.1.0/24 dev en0",
		"192.168.1.1/32 dev en0",
		"192.168.64.0/24 dev bridge100",
		"blackhole 203.0.113.0/24 dev en0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parseNetstat:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := parseNetstat("Destination Gateway Flags Netif\n10.x link#1 UCS en0\n"); err == nil {
		t.Error("a destination that is no network was accepted")
	}
}

func TestOverlaps(t *testing.T) {
	routes, err := parseNetstat(netstatVPN)
	if err != nil {
		t.Fatal(err)
	}
	bridge := netip.MustParsePrefix("172.30.0.0/16")
	nets := []LabNet{
		{What: "the bridge network (network.bridgeCIDR)", Prefix: bridge, Routed: true},
		{What: "the service subnet of cluster dev (slot 3)", Prefix: netip.MustParsePrefix("10.3.0.0/16")},
		{What: "the pod subnet of cluster dev (slot 3)", Prefix: netip.MustParsePrefix("10.13.0.0/16")},
	}
	got := Overlaps(routes, nets, func(r HostRoute) bool { return Owned(r, bridge) })
	var lines []string
	for _, o := range got {
		lines = append(lines, fmt.Sprintf("%v %s | %s | %s", o.Captures, o.Route, o.With, o.Effect))
	}
	want := []string{
		"true 172.30.7.0/24 via 10.8.0.1 dev utun3 | the bridge network (network.bridgeCIDR) | traffic from this machine to 172.30.7.0/24 goes to utun3, not to the lab",
		"false 10.0.0.0/8 dev utun3 | the service subnet of cluster dev (slot 3) | pods cannot reach the addresses of 10.3.0.0/16 that utun3 serves (they are the cluster's own)",
		"false 10.0.0.0/8 dev utun3 | the pod subnet of cluster dev (slot 3) | pods cannot reach the addresses of 10.13.0.0/16 that utun3 serves (they are the cluster's own)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Overlaps:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// The lab's own route is not an overlap; a wider VPN route over the
	// bridge is one that does not capture.
	wide := []HostRoute{{Dst: netip.MustParsePrefix("172.16.0.0/12"), Iface: "utun3"}, {Dst: bridge, Iface: "br-0123456789ab"}}
	if got := Overlaps(wide, nets[:1], func(r HostRoute) bool { return Owned(r, bridge) }); len(got) != 1 || got[0].Captures || got[0].Route.Iface != "utun3" {
		t.Errorf("wide route: %+v", got)
	}

	free, ok := SuggestBridge(routes, func(r HostRoute) bool { return Owned(r, bridge) })
	if !ok || free.String() != "172.16.0.0/16" {
		t.Errorf("SuggestBridge = %v %v", free, ok)
	}
	if free, ok := SuggestBridge(wide, nil); !ok || free.String() != "192.168.0.0/16" {
		t.Errorf("SuggestBridge with 172.16/12 taken = %v %v", free, ok)
	}
}

// TestReadRoutesNetlink reads a VPN-shaped routing setup for real, in a
// network namespace the test creates: a route over the bridge CIDR on a
// veth vpn0, one in a policy-routing table of its own (as WireGuard's
// wg-quick makes), a blackhole (a kill switch).
func TestReadRoutesNetlink(t *testing.T) {
	if os.Getenv("MARINA_READ_ROUTES") == "1" {
		return // the helper run below
	}
	if runtime.GOOS != "linux" {
		t.Skip("netlink is Linux's")
	}
	ns := newNetnsNamed(t, "-routes")
	ns.run("ip", "link", "add", "vpn0", "type", "veth", "peer", "name", "vpn0-peer") // no dummy module here
	ns.run("ip", "addr", "add", "10.8.0.1/24", "dev", "vpn0")
	ns.run("ip", "link", "set", "vpn0", "up")
	ns.run("ip", "route", "add", "172.30.0.0/16", "dev", "vpn0")
	ns.run("ip", "route", "add", "172.30.5.0/24", "via", "10.8.0.2", "table", "51820")
	ns.run("ip", "route", "add", "blackhole", "172.31.0.0/16")
	out, err := ns.exec(t.Context(), []string{"env", "MARINA_READ_ROUTES=1", os.Args[0], "-test.run", "^TestReadRoutesHelper$", "-test.count", "1"}, nil)
	if err != nil {
		t.Fatalf("helper in the namespace: %v\n%s", err, out)
	}
	_, js, _ := strings.Cut(string(out), "ROUTES ")
	js, _, _ = strings.Cut(js, "\n")
	var routes []HostRoute
	if err := json.Unmarshal([]byte(js), &routes); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, r.String())
	}
	for _, want := range []string{"10.8.0.0/24 dev vpn0", "172.30.0.0/16 dev vpn0", "172.30.5.0/24 via 10.8.0.2 dev vpn0", "blackhole 172.31.0.0/16"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("routes read in the namespace lack %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 4 {
		t.Errorf("routes read in the namespace: %d, want 4 (no local or broadcast routes):\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestReadRoutesHelper prints ReadRoutes as JSON when run by
// TestReadRoutesNetlink inside its namespace.
func TestReadRoutesHelper(t *testing.T) {
	if os.Getenv("MARINA_READ_ROUTES") != "1" {
		return
	}
	routes, err := ReadRoutes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(routes)
	fmt.Printf("ROUTES %s\n", b)
}
