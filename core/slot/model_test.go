package slot

import (
	"fmt"
	"net/netip"
	"strconv"
)

// This file is the tests' own model of a slot, written from the product
// rules with integer arithmetic and without any of the package's code, so
// that the tests check the package against something independent.

var (
	defaultBridge = netip.MustParsePrefix("172.30.0.0/16")
	// testBridges are the bridges the exhaustive tests run on: the default,
	// one outside 10/8, and three that collide with some slot's subnets.
	testBridges = []netip.Prefix{
		defaultBridge,
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("10.5.0.0/16"),   // slot 5's service subnet
		netip.MustParsePrefix("10.15.0.0/16"),  // slot 15's service subnet, slot 5's pod subnet
		netip.MustParsePrefix("10.150.0.0/16"), // slot 50's pod subnet
	}
)

// span is an inclusive interval of IPv4 addresses as integers.
type span struct{ lo, hi uint32 }

func (s span) meets(o span) bool { return s.lo <= o.hi && o.lo <= s.hi }

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func prefixSpan(p netip.Prefix) span {
	lo := u32(p.Masked().Addr())
	return span{lo, lo + uint32(uint64(1)<<(32-p.Bits())-1)}
}

// model is what slot n owns on a bridge, per the product rules.
type model struct {
	n        int
	port     int
	svc, pod netip.Prefix
	pools    []span
	spans    []span // svc, pod, then pools, for overlap checks
}

// models caches the model of every slot per bridge: the property tests ask
// for the same few hundred models millions of times.
var models = map[netip.Prefix]*[100]model{}

func modelOf(n int, bridge netip.Prefix) model {
	ms, ok := models[bridge]
	if !ok {
		ms = new([100]model)
		for i := 1; i <= 99; i++ {
			ms[i] = newModel(i, bridge)
		}
		models[bridge] = ms
	}
	return ms[n]
}

func newModel(n int, bridge netip.Prefix) model {
	pod, err := strconv.Atoi(fmt.Sprintf("1%d", n)) // "10.1" followed by N
	if err != nil {
		panic(err)
	}
	base := u32(bridge.Addr()) | uint32(n)<<8
	m := model{
		n:     n,
		port:  7000 + n,
		svc:   netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", n)),
		pod:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(pod), 0, 0}), 16),
		pools: []span{{base + 1, base + 7}, {base + 16, base + 254}},
	}
	m.spans = append([]span{prefixSpan(m.svc), prefixSpan(m.pod)}, m.pools...)
	return m
}

// clash returns what x and y share, or "" if they are disjoint.
func clash(x, y model) string {
	if x.port == y.port {
		return "port"
	}
	for _, p := range []netip.Prefix{x.svc, x.pod} {
		for _, q := range []netip.Prefix{y.svc, y.pod} {
			if p.Overlaps(q) {
				return "subnets " + p.String() + " and " + q.String()
			}
		}
	}
	for i, a := range x.spans {
		for j, b := range y.spans {
			if (i >= 2 || j >= 2) && a.meets(b) { // subnet pairs were checked above
				return fmt.Sprintf("addresses %v and %v", a, b)
			}
		}
	}
	return ""
}

// hitsBridge reports whether slot m's subnets overlap the bridge.
func hitsBridge(m model, bridge netip.Prefix) bool {
	return m.svc.Overlaps(bridge) || m.pod.Overlaps(bridge)
}

// usable reports whether slot n may join live on bridge, per the model.
func usable(n int, bridge netip.Prefix, live []int) bool {
	m := modelOf(n, bridge)
	if hitsBridge(m, bridge) {
		return false
	}
	for _, l := range live {
		if clash(m, modelOf(l, bridge)) != "" {
			return false
		}
	}
	return true
}

// invariant returns a description of the first violation of "no two live
// slots share anything and none overlaps the bridge", or "".
func invariant(bridge netip.Prefix, live []int) string {
	ms := make([]model, len(live))
	for i, n := range live {
		if n < 1 || n > 99 {
			return fmt.Sprintf("live slot %d out of range", n)
		}
		ms[i] = modelOf(n, bridge)
		if hitsBridge(ms[i], bridge) {
			return fmt.Sprintf("slot %d overlaps bridge %s", n, bridge)
		}
	}
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			if c := clash(ms[i], ms[j]); c != "" {
				return fmt.Sprintf("slots %d and %d share %s", ms[i].n, ms[j].n, c)
			}
		}
	}
	return ""
}
