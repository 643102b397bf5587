package lab

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/slot"
)

// ReadHostRoutes reads the routes of the user's machine; tests replace it.
var ReadHostRoutes = hostnet.ReadRoutes

// RouteReport is what the host's routes do to the lab.
type RouteReport struct {
	// Routes is how many routes were read.
	Routes int `json:"routes"`
	// Overlaps are the routes over the lab's blocks, capturing ones first.
	Overlaps []hostnet.Overlap `json:"overlaps"`
	// SuggestedBridge is a /16 for network.bridgeCIDR no route overlaps
	// ("" when none is free).
	SuggestedBridge string `json:"suggestedBridge,omitempty"`
	// FreeSlot is a slot whose service and pod subnets no route overlaps
	// (0 when none), for overlaps over a cluster's subnets.
	FreeSlot int `json:"freeSlot,omitempty"`
}

// Captures reports whether a route takes the lab's traffic.
func (r *RouteReport) Captures() bool {
	return len(r.Overlaps) > 0 && r.Overlaps[0].Captures
}

// RouteOverlaps reads the host's routes and compares them with the lab's
// blocks: the bridge CIDR (routed from this machine to the lab) and the
// service and pod subnets of the slots given (cluster name → slot), which
// live inside the lab.
func (l *Lab) RouteOverlaps(ctx context.Context, slots map[string]int) (*RouteReport, error) {
	bridge, err := netip.ParsePrefix(l.Config.Network.BridgeCIDR)
	if err != nil {
		return nil, fmt.Errorf("network.bridgeCIDR %q: %w", l.Config.Network.BridgeCIDR, err)
	}
	routes, err := ReadHostRoutes(ctx)
	if err != nil {
		return nil, err
	}
	nets := []hostnet.LabNet{{What: "the bridge network (network.bridgeCIDR)", Prefix: bridge, Routed: true}}
	names := make([]string, 0, len(slots))
	for n := range slots {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		res, err := slot.Derive(slots[name], bridge)
		if err != nil {
			continue
		}
		nets = append(nets,
			hostnet.LabNet{What: fmt.Sprintf("the service subnet of cluster %s (slot %d)", name, res.Slot), Prefix: res.ServiceSubnet},
			hostnet.LabNet{What: fmt.Sprintf("the pod subnet of cluster %s (slot %d)", name, res.Slot), Prefix: res.PodSubnet})
	}
	// The lab's own route: the docker bridge's (host driver), or, when the
	// lab keeps a route to the VM (lima driver), the one route exactly the
	// bridge CIDR via a gateway — whatever the interface is called (the
	// route step corrects its gateway).
	owned := func(r hostnet.HostRoute) bool {
		if l.Route != nil && r.Dst == bridge && r.Kind == "" && r.Gateway.IsValid() {
			return true
		}
		return hostnet.Owned(r, bridge)
	}
	rep := &RouteReport{Routes: len(routes), Overlaps: hostnet.Overlaps(routes, nets, owned)}
	if rep.Overlaps == nil {
		rep.Overlaps = []hostnet.Overlap{}
	}
	if s, ok := hostnet.SuggestBridge(routes, owned); ok {
		rep.SuggestedBridge = s.String()
	}
	rep.FreeSlot = freeSlot(routes, bridge)
	return rep, nil
}

// freeSlot is the lowest slot whose service and pod subnets no route
// overlaps (the default route aside), 0 when none.
func freeSlot(routes []hostnet.HostRoute, bridge netip.Prefix) int {
next:
	for n := slot.Min; n <= slot.Max; n++ {
		res, err := slot.Derive(n, bridge)
		if err != nil {
			return 0
		}
		for _, r := range routes {
			if r.Dst.Bits() > 0 && (r.Dst.Overlaps(res.ServiceSubnet) || r.Dst.Overlaps(res.PodSubnet)) {
				continue next
			}
		}
		return n
	}
	return 0
}

// fix says what moves the lab away from overlap o.
func (r *RouteReport) fix(o hostnet.Overlap, bridge string) string {
	if strings.HasPrefix(o.With, "the bridge network") {
		move := "choose another /16 for network.bridgeCIDR"
		if r.SuggestedBridge != "" {
			move = "set network.bridgeCIDR: " + r.SuggestedBridge
		}
		return move + " in the config, then marina destroy && marina up (or have the VPN exclude " + bridge + ")"
	}
	if r.FreeSlot > 0 {
		return fmt.Sprintf("recreate the cluster on a slot the route does not cover: marina cluster delete NAME && marina cluster create NAME --slot %d", r.FreeSlot)
	}
	return "every slot's subnets (10.N.0.0/16, 10.1N.0.0/16) are routed by it: have the VPN exclude the cluster's subnets"
}

// Checks are the report as doctor checks: FAIL for a route that captures
// the lab's traffic, WARN for the others, one OK when none overlaps.
func (r *RouteReport) Checks(bridge string) []Check {
	if len(r.Overlaps) == 0 {
		return []Check{{Name: "host routes", Status: OK, Detail: fmt.Sprintf("no route of this machine overlaps the lab (%d routes read)", r.Routes)}}
	}
	var out []Check
	for _, o := range r.Overlaps {
		c := Check{Name: "host route " + o.Route.Dst.String(), Status: Warn, Detail: fmt.Sprintf("%s overlaps %s %s: %s", o.Route, o.With, o.Block, o.Effect), Fix: r.fix(o, bridge)}
		if o.Captures {
			c.Status = Fail
		}
		out = append(out, c)
	}
	return out
}

// stepHostRoutes is up's first step: it refuses to go on while a route of
// this machine captures the bridge CIDR's traffic (a VPN's, typically),
// naming the route, its interface and the config change that moves the
// lab, unless AllowRouteOverlap. Routes that overlap without capturing
// become warnings (Warnings).
func (l *Lab) stepHostRoutes() lifecycle.Step {
	return lifecycle.NewStep("Check host routes",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			rep, err := l.RouteOverlaps(ctx, nil)
			if err != nil {
				l.addWarning("the host's routes were not checked for overlaps with the lab: " + err.Error())
				return nil, nil
			}
			var captures []string
			for _, c := range rep.Checks(l.Config.Network.BridgeCIDR) {
				line := c.Detail + "\n    fix: " + c.Fix
				switch {
				case c.Status == Fail && !l.AllowRouteOverlap:
					captures = append(captures, line)
				case c.Status != OK:
					l.addWarning(line)
				}
			}
			if len(captures) > 0 {
				return nil, fmt.Errorf("a route of this machine takes the lab's traffic (a VPN's?); nothing was changed:\n  %s\n(marina up --allow-route-overlap goes on anyway)", strings.Join(captures, "\n  "))
			}
			return nil, nil
		}, nil)
}

func (l *Lab) addWarning(w string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warnings = append(l.warnings, w)
}

// Warnings are what up's checks found that does not stop it (routes that
// overlap without capturing, a CA that no longer covers the lab), for
// the command to show after the pipeline.
func (l *Lab) Warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.warnings...)
}
