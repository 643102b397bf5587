package hostnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// The operating systems hostnet knows. They are fields, not runtime.GOOS, so
// both variants are tested on any machine.
const (
	Darwin = "darwin"
	Linux  = "linux"
)

// darwinRoute is macOS's route(8); absolute so that neither PATH nor sudo's
// secure_path decides which binary runs as root.
const darwinRoute = "/sbin/route"

// Route keeps the route from the docker bridge CIDR to the VM's lima0
// address on the user's machine.
type Route struct {
	// OS is Darwin (route(8)) or Linux (ip(8), for the lima driver on a
	// Linux host; the host driver needs no route: the bridge is local).
	OS string
	// CIDR is the bridge network, e.g. 172.30.0.0/16 (config
	// network.bridgeCIDR).
	CIDR string
	// Priv runs the route changes; its Runner also runs the read-only
	// lookups, without sudo.
	Priv *Privileged
}

// RouteState is what the routing table holds for exactly the CIDR.
type RouteState struct {
	// Present: a route whose destination and mask equal the CIDR exists. A
	// default or wider route that merely covers the CIDR does not count.
	Present bool `json:"present"`
	// Gateway is that route's next hop ("" when Present is false or the
	// route is an interface route with no gateway address).
	Gateway string `json:"gateway,omitempty"`
	// Interface is the route's interface, when the lookup printed one.
	Interface string `json:"interface,omitempty"`
	// Correct: Present and Gateway is the wanted gateway.
	Correct bool `json:"correct"`
	// Detail says what the lookup found, e.g. "only the default route (via
	// 192.168.1.1, en0) covers 172.30.0.0/16".
	Detail string `json:"detail,omitempty"`
}

// Check looks the CIDR up without changing anything. want is the gateway
// the route should use (the VM's lima0 address); it only decides Correct and
// may be empty when unknown (Correct is then false).
func (r *Route) Check(ctx context.Context, want string) (RouteState, error) {
	pfx, err := r.prefix()
	if err != nil {
		return RouteState{}, err
	}
	var wantAddr netip.Addr
	if want != "" {
		if wantAddr, err = parseGateway(want, pfx); err != nil {
			return RouteState{}, err
		}
	}
	if err := r.runnable(); err != nil {
		return RouteState{}, err
	}
	var st RouteState
	switch r.OS {
	case Darwin:
		argv := []string{darwinRoute, "-n", "get", "-net", pfx.String()}
		out, err := r.Priv.Runner.Run(ctx, argv, nil)
		if err != nil {
			var ce *CommandError
			if errors.As(err, &ce) && strings.Contains(ce.Stderr, "not in table") {
				return RouteState{Detail: "no route covers " + pfx.String()}, nil
			}
			return RouteState{}, fmt.Errorf("looking up the route to %s: %w", pfx, err)
		}
		st = parseDarwinRouteGet(string(out), pfx)
	case Linux:
		argv := []string{"ip", "-4", "route", "show", "exact", pfx.String()}
		out, err := r.Priv.Runner.Run(ctx, argv, nil)
		if err != nil {
			return RouteState{}, fmt.Errorf("looking up the route to %s: %w", pfx, err)
		}
		st = parseLinuxRouteShow(string(out), pfx)
	}
	if st.Present && wantAddr.IsValid() {
		if gw, err := netip.ParseAddr(st.Gateway); err == nil && gw == wantAddr {
			st.Correct = true
		}
	}
	return st, nil
}

// Plan checks the route and returns the commands Ensure would run to make
// it point at gw: none when it already does; on macOS a delete only when a
// route for exactly the CIDR points elsewhere, then the add; on Linux one
// `ip route replace`.
func (r *Route) Plan(ctx context.Context, gw string) (RouteState, []Cmd, error) {
	pfx, err := r.prefix()
	if err != nil {
		return RouteState{}, nil, err
	}
	if gw == "" {
		return RouteState{}, nil, fmt.Errorf("route gateway (the VM's lima0 address) is empty: is the VM running?")
	}
	st, err := r.Check(ctx, gw)
	if err != nil {
		return st, nil, err
	}
	if st.Correct {
		return st, nil, nil
	}
	switch r.OS {
	case Darwin:
		var cmds []Cmd
		if st.Present {
			cmds = append(cmds, Cmd{Argv: []string{darwinRoute, "-n", "delete", "-net", pfx.String()}})
		}
		return st, append(cmds, Cmd{Argv: []string{darwinRoute, "-n", "add", "-net", pfx.String(), gw}}), nil
	default:
		if st.Present && st.Gateway == "" {
			return st, nil, fmt.Errorf("%s is directly connected on this machine (%s): it needs no route, "+
				"and marina will not replace it; use the host driver (vm.driver: host) when Docker runs here", pfx, st.Detail)
		}
		return st, []Cmd{{Argv: []string{"ip", "route", "replace", pfx.String(), "via", gw}}}, nil
	}
}

// Ensure makes the route for the CIDR point at gw, running privileged
// commands only when it does not already. It reports whether it changed
// anything.
func (r *Route) Ensure(ctx context.Context, gw string) (bool, error) {
	_, cmds, err := r.Plan(ctx, gw)
	if err != nil || len(cmds) == 0 {
		return false, err
	}
	if err := r.Priv.Do(ctx, fmt.Sprintf("route %s to the VM at %s", r.CIDR, gw), cmds...); err != nil {
		return false, err
	}
	return true, nil
}

// PlanRemove returns the commands Remove would run: none when no route for
// exactly the CIDR exists, or when it has no gateway address (a directly
// connected network is not marina's route).
func (r *Route) PlanRemove(ctx context.Context) (RouteState, []Cmd, error) {
	st, err := r.Check(ctx, "")
	if err != nil || !st.Present {
		return st, nil, err
	}
	if _, perr := netip.ParseAddr(st.Gateway); perr != nil {
		return st, nil, nil
	}
	pfx, _ := r.prefix()
	if r.OS == Darwin {
		return st, []Cmd{{Argv: []string{darwinRoute, "-n", "delete", "-net", pfx.String()}}}, nil
	}
	return st, []Cmd{{Argv: []string{"ip", "route", "del", pfx.String(), "via", st.Gateway}}}, nil
}

// Remove deletes the route for exactly the CIDR when it exists and goes
// through a gateway (`marina down --remove-route`, `marina destroy`). It
// reports whether it changed anything.
func (r *Route) Remove(ctx context.Context) (bool, error) {
	st, cmds, err := r.PlanRemove(ctx)
	if err != nil || len(cmds) == 0 {
		return false, err
	}
	if err := r.Priv.Do(ctx, fmt.Sprintf("remove the route %s via %s", r.CIDR, st.Gateway), cmds...); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Route) runnable() error {
	if r.OS != Darwin && r.OS != Linux {
		return fmt.Errorf("hostnet: route OS %q is not %q or %q", r.OS, Darwin, Linux)
	}
	if r.Priv == nil || r.Priv.Runner == nil {
		return errors.New("hostnet: Route.Priv (with a Runner) is required")
	}
	return nil
}

// prefix validates the CIDR: IPv4 and a network address.
func (r *Route) prefix() (netip.Prefix, error) {
	return parseBridgeCIDR(r.CIDR)
}

// parseBridgeCIDR validates an IPv4 network prefix; the error names the
// field and the fix.
func parseBridgeCIDR(s string) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bridge CIDR %q (network.bridgeCIDR) is not a CIDR such as 172.30.0.0/16", s)
	}
	if !pfx.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("bridge CIDR %q (network.bridgeCIDR) is not IPv4", s)
	}
	if pfx != pfx.Masked() {
		return netip.Prefix{}, fmt.Errorf("bridge CIDR %q (network.bridgeCIDR) is not a network address: use %s", s, pfx.Masked())
	}
	return pfx, nil
}

// parseGateway validates the route's next hop.
func parseGateway(s string, pfx netip.Prefix) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("route gateway %q (the VM's lima0 address) is not an IPv4 address", s)
	}
	if pfx.Contains(a) {
		return netip.Addr{}, fmt.Errorf("route gateway %s (the VM's lima0 address) lies inside the bridge CIDR %s: "+
			"choose a network.bridgeCIDR that does not overlap the VM's network", a, pfx)
	}
	return a, nil
}

// parseDarwinRouteGet reads the output of `route -n get -net <cidr>`:
//
//	   route to: 172.30.0.0
//	destination: 172.30.0.0
//	       mask: 255.255.0.0
//	    gateway: 192.168.64.3
//	  interface: bridge100
//
// The route is the CIDR's own only when destination and mask equal it: the
// kernel answers with the best route that covers the address, which is the
// default route when there is no specific one.
func parseDarwinRouteGet(out string, pfx netip.Prefix) RouteState {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := kv[k]; !seen {
			kv[k] = strings.TrimSpace(v)
		}
	}
	dest, mask, gw, ifc := kv["destination"], kv["mask"], kv["gateway"], kv["interface"]
	via := func() string {
		var parts []string
		if gw != "" {
			parts = append(parts, "via "+gw)
		}
		if ifc != "" {
			parts = append(parts, ifc)
		}
		return strings.Join(parts, ", ")
	}
	if dest == "" {
		return RouteState{Detail: "route(8) printed no destination for " + pfx.String()}
	}
	if dest == "default" {
		return RouteState{Detail: fmt.Sprintf("only the default route (%s) covers %s", via(), pfx)}
	}
	found, ok := darwinPrefix(dest, mask)
	if !ok {
		return RouteState{Detail: fmt.Sprintf("route(8) printed destination %q mask %q", dest, mask)}
	}
	if found != pfx {
		return RouteState{Detail: fmt.Sprintf("only the route to %s (%s) covers %s", found, via(), pfx)}
	}
	st := RouteState{Present: true, Interface: ifc, Detail: fmt.Sprintf("%s %s", pfx, via())}
	if _, err := netip.ParseAddr(gw); err == nil {
		st.Gateway = gw
	}
	return st
}

// darwinPrefix turns route(8)'s destination and dotted mask into a prefix;
// no mask means a host route.
func darwinPrefix(dest, mask string) (netip.Prefix, bool) {
	a, err := netip.ParseAddr(dest)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, false
	}
	bits := 32
	if mask != "" {
		m, err := netip.ParseAddr(mask)
		if err != nil || !m.Is4() {
			return netip.Prefix{}, false
		}
		b := m.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		bits = 0
		for v&0x80000000 != 0 {
			bits++
			v <<= 1
		}
		if v != 0 { // not a contiguous mask
			return netip.Prefix{}, false
		}
	}
	return netip.PrefixFrom(a, bits).Masked(), true
}

// parseLinuxRouteShow reads `ip -4 route show exact <cidr>`:
//
//	172.30.0.0/16 via 192.168.5.15 dev eth0
//	172.30.0.0/16 dev br-0123456789ab proto kernel scope link src 172.30.0.1
//
// Empty output means no route.
func parseLinuxRouteShow(out string, pfx netip.Prefix) RouteState {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		// Route types (unreachable, blackhole, ...) come before the prefix.
		if _, err := netip.ParsePrefix(dst); err != nil && len(f) > 1 {
			if _, err := netip.ParseAddr(dst); err != nil {
				dst = f[1]
				f = f[1:]
			}
		}
		got, err := netip.ParsePrefix(dst)
		if err != nil {
			if a, aerr := netip.ParseAddr(dst); aerr == nil {
				got = netip.PrefixFrom(a, 32)
			} else {
				continue
			}
		}
		if got.Masked() != pfx {
			continue
		}
		st := RouteState{Present: true, Detail: strings.Join(f, " ")}
		for i := 1; i+1 < len(f); i++ {
			switch f[i] {
			case "via":
				st.Gateway = f[i+1]
			case "dev":
				st.Interface = f[i+1]
			}
		}
		return st
	}
	return RouteState{Detail: "no route for exactly " + pfx.String()}
}
