package hostnet

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// HostRoute is one IPv4 route of the user's machine.
type HostRoute struct {
	Dst netip.Prefix `json:"destination"`
	// Gateway is the next hop, invalid for an interface route.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// Iface is the route's interface ("" when none, e.g. a blackhole).
	Iface string `json:"interface,omitempty"`
	// Kind is "" for a route that forwards, or what it does instead
	// ("blackhole", "unreachable", "prohibit").
	Kind string `json:"kind,omitempty"`
}

// String reads "10.8.0.0/16 via 10.8.0.1 dev utun3".
func (r HostRoute) String() string {
	s := r.Dst.String()
	if r.Kind != "" {
		s = r.Kind + " " + s
	}
	if r.Gateway.IsValid() {
		s += " via " + r.Gateway.String()
	}
	if r.Iface != "" {
		s += " dev " + r.Iface
	}
	return s
}

// ReadRoutes returns the IPv4 routes of this machine: on Linux every
// routing table through netlink (policy-routing tables of VPN clients
// included), on macOS what `netstat -rn -f inet` prints. Local, broadcast
// and multicast routes are left out.
func ReadRoutes(ctx context.Context) ([]HostRoute, error) { return readRoutes(ctx) }

// LabNet is one address block of the lab that a route of the host must not
// take over.
type LabNet struct {
	// What names it for the user, e.g. "the bridge network (network.bridgeCIDR)".
	What   string
	Prefix netip.Prefix
	// Routed: the host routes this block to the lab (the bridge CIDR), so a
	// route as specific or more takes the lab's traffic. Blocks that live
	// only inside the lab (a cluster's service and pod subnets) are not:
	// an overlap there means pods cannot reach those outside addresses.
	Routed bool
}

// Overlap is a host route over a lab block.
type Overlap struct {
	Route HostRoute `json:"route"`
	With  string    `json:"with"`
	Block string    `json:"block"`
	// Captures: the route is as specific as the lab's block or more, on a
	// routed block: the lab's traffic would follow it, not reach the lab.
	Captures bool `json:"captures"`
	// Effect says what goes wrong, for the user.
	Effect string `json:"effect"`
}

// Owned reports whether r is the lab's own route for the bridge: the
// docker bridge interface of the host driver (br-…, docker…) or the route
// to the VM marina keeps (on a bridge100/vmnet/lima interface).
func Owned(r HostRoute, bridge netip.Prefix) bool {
	if r.Dst != bridge || r.Kind != "" {
		return false
	}
	for _, p := range []string{"br-", "docker", "bridge", "vmnet", "lima"} {
		if strings.HasPrefix(r.Iface, p) {
			return true
		}
	}
	return false
}

// Overlaps returns the routes that overlap a lab block, most harmful
// first. The default route and the lab's own routes (owned) are not
// overlaps.
func Overlaps(routes []HostRoute, nets []LabNet, owned func(HostRoute) bool) []Overlap {
	var out []Overlap
	for _, r := range routes {
		if r.Dst.Bits() == 0 || (owned != nil && owned(r)) {
			continue
		}
		for _, n := range nets {
			if !r.Dst.Overlaps(n.Prefix) {
				continue
			}
			o := Overlap{Route: r, With: n.What, Block: n.Prefix.String()}
			switch {
			case n.Routed && r.Dst.Bits() >= n.Prefix.Bits():
				o.Captures = true
				o.Effect = fmt.Sprintf("traffic from this machine to %s goes to %s, not to the lab", r.Dst, routeTarget(r))
			case n.Routed:
				o.Effect = fmt.Sprintf("the lab's more specific route wins over it; addresses of %s outside %s still go to %s", r.Dst, n.Prefix, routeTarget(r))
			default:
				o.Effect = fmt.Sprintf("pods cannot reach the addresses of %s that %s serves (they are the cluster's own)", overlapOf(r.Dst, n.Prefix), routeTarget(r))
			}
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Captures && !out[j].Captures })
	return out
}

func routeTarget(r HostRoute) string {
	switch {
	case r.Kind != "":
		return "a " + r.Kind + " route"
	case r.Iface != "":
		return r.Iface
	case r.Gateway.IsValid():
		return r.Gateway.String()
	}
	return "another route"
}

// overlapOf is the smaller of two overlapping prefixes.
func overlapOf(a, b netip.Prefix) netip.Prefix {
	if a.Bits() >= b.Bits() {
		return a
	}
	return b
}

// SuggestBridge returns a /16 for network.bridgeCIDR that no route in
// routes overlaps (but the default route and those avoid says are the
// lab's own), from 172.16.0.0/12 then 192.168.0.0/16; false when none is
// free.
func SuggestBridge(routes []HostRoute, avoid func(HostRoute) bool) (netip.Prefix, bool) {
	var candidates []netip.Prefix
	for i := 16; i <= 31; i++ {
		candidates = append(candidates, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(i), 0, 0}), 16))
	}
	candidates = append(candidates, netip.MustParsePrefix("192.168.0.0/16"))
next:
	for _, c := range candidates {
		for _, r := range routes {
			if r.Dst.Bits() > 0 && (avoid == nil || !avoid(r)) && r.Dst.Overlaps(c) {
				continue next
			}
		}
		return c, true
	}
	return netip.Prefix{}, false
}

// parseNetstat reads macOS's `netstat -rn -f inet`:
//
//	Destination        Gateway            Flags        Netif Expire
//	default            192.168.1.1        UGScg          en0
//	10                 link#20            UCS          utun3
//	10.8/16            10.8.0.1           UGSc         utun3
//	172.30             192.168.64.2       UGSc     bridge100
//
// A destination without a length has as many octets as are written (10 is
// 10.0.0.0/8, 192.168.1 a /24); a host entry (flag H) is a /32. Link-layer
// and cloned host entries (flags L, W: the ARP cache), loopback, multicast
// and broadcast entries are left out.
func parseNetstat(out string) ([]HostRoute, error) {
	var routes []HostRoute
	sc := bufio.NewScanner(strings.NewReader(out))
	header := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "Destination" {
			header = true
			continue
		}
		if !header || len(f) < 4 {
			continue
		}
		dest, gw, flags, iface := f[0], f[1], f[2], f[3]
		if strings.ContainsAny(flags, "LWm") || strings.Contains(dest, ":") {
			continue
		}
		var pfx netip.Prefix
		if dest == "default" {
			pfx = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		} else {
			p, ok := netstatPrefix(dest, strings.Contains(flags, "H"))
			if !ok {
				return nil, fmt.Errorf("netstat printed destination %q, which is not an IPv4 network", dest)
			}
			pfx = p
		}
		if pfx.Addr().IsLoopback() || pfx.Addr().IsMulticast() || pfx.Addr() == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			continue
		}
		r := HostRoute{Dst: pfx, Iface: iface}
		if strings.Contains(flags, "B") {
			r.Kind = "blackhole"
		} else if strings.Contains(flags, "R") {
			r.Kind = "unreachable"
		}
		if a, err := netip.ParseAddr(gw); err == nil && a.Is4() {
			r.Gateway = a
		}
		routes = append(routes, r)
	}
	return routes, sc.Err()
}

// netstatPrefix parses netstat's abbreviated destinations: "10", "172.30",
// "10.8/16", "192.168.1.1/32", "192.168.1.1" (host when the H flag is set).
func netstatPrefix(dest string, host bool) (netip.Prefix, bool) {
	addr, length, hasLen := strings.Cut(dest, "/")
	octets := strings.Split(addr, ".")
	if len(octets) > 4 {
		return netip.Prefix{}, false
	}
	var b [4]byte
	for i, o := range octets {
		var v int
		if _, err := fmt.Sscanf(o, "%d", &v); err != nil || v < 0 || v > 255 || fmt.Sprint(v) != o {
			return netip.Prefix{}, false
		}
		b[i] = byte(v)
	}
	bits := 8 * len(octets)
	if host {
		bits = 32
	}
	if hasLen {
		if _, err := fmt.Sscanf(length, "%d", &bits); err != nil || bits < 0 || bits > 32 || fmt.Sprint(bits) != length {
			return netip.Prefix{}, false
		}
	}
	return netip.PrefixFrom(netip.AddrFrom4(b), bits).Masked(), true
}
