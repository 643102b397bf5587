package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/sdk"
)

// The lima driver's network steps: the guest forwards and does not SNAT
// traffic between the bridge and the host, and the host routes the bridge
// CIDR to the VM. The host driver needs neither (the bridge is local).

func (l *Lab) guestNetSpec() hostnet.GuestNetSpec {
	return hostnet.GuestNetSpec{BridgeCIDR: l.Config.Network.BridgeCIDR}
}

func (l *Lab) guestIP() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.GuestIP
}

// stepGuestNetwork makes sure the guest forwards between the bridge and the
// host and exempts that traffic from SNAT (persisted across restarts).
func (l *Lab) stepGuestNetwork() lifecycle.Step {
	exec := hostnet.DriverExec(l.Driver)
	return lifecycle.NewStep("Guest network (forwarding, no SNAT to the host)",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			if l.dockerHost() == "" {
				return []lifecycle.Change{{Action: "configure", Target: "guest forwarding and no-SNAT rules"}}, nil
			}
			st, err := hostnet.CheckGuestNetwork(ctx, exec, l.guestNetSpec())
			if err != nil {
				return nil, err
			}
			var changes []lifecycle.Change
			for _, c := range st.Checks {
				if !c.OK {
					changes = append(changes, lifecycle.Change{Action: "fix", Target: c.Name, Detail: c.Detail})
				}
			}
			return changes, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			res, err := hostnet.EnsureGuestNetwork(ctx, exec, l.guestNetSpec())
			for _, c := range res.Changes {
				r.Progress(c)
			}
			return err
		})
}

// routeKeeper is a driver whose VM's host agent keeps the route on the
// VM's address between runs of `marina up` (the lima driver: sleep/wake or
// another network can change lima0's address). up tells it once the route
// is in place; down --remove-route and destroy tell it to stop first.
type routeKeeper interface {
	// KeepingRoute reports whether the agent keeps the route for cidr.
	KeepingRoute(cidr string) bool
	// KeepRoute asks the agent to keep the route for cidr (hostOS says
	// which route commands: hostnet.Darwin or hostnet.Linux).
	KeepRoute(cidr, hostOS string) error
	// ForgetRoute asks it to stop.
	ForgetRoute() error
}

func (l *Lab) routeKeeper() routeKeeper {
	k, _ := l.Driver.(routeKeeper)
	return k
}

// stepRoute routes the bridge CIDR to the VM's address (sudo only when the
// route is missing or points elsewhere: a changed lima0 address is fixed
// here, the kubeconfigs in stepFollowAddress), then asks the VM's host
// agent to keep it there until the next up.
func (l *Lab) stepRoute() lifecycle.Step {
	return lifecycle.NewStep("Route "+l.Config.Network.BridgeCIDR+" to the VM",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			gw := l.guestIP()
			if gw == "" {
				if l.dockerHost() == "" { // dry run before the VM exists
					return []lifecycle.Change{{Action: "add", Target: "route " + l.Config.Network.BridgeCIDR, Detail: "via the VM's address"}}, nil
				}
				return nil, errors.New("the VM reports no address on its host network (lima0); the bridge cannot be routed. " +
					"Check `marina status`; on Linux hosts the lima driver's qemu VMs have no lima0: use vm.driver host")
			}
			_, cmds, err := l.Route.Plan(ctx, gw)
			if err != nil {
				return nil, err
			}
			var changes []lifecycle.Change
			for _, c := range cmds {
				changes = append(changes, lifecycle.Change{Action: "run", Target: c.Render(true)})
			}
			if k := l.routeKeeper(); k != nil && !k.KeepingRoute(l.Config.Network.BridgeCIDR) {
				changes = append(changes, lifecycle.Change{Action: "follow", Target: "route " + l.Config.Network.BridgeCIDR,
					Detail: "the VM's host agent moves it when the VM's address changes"})
			}
			return changes, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			if _, err := l.Route.Ensure(ctx, l.guestIP()); err != nil {
				return err
			}
			if k := l.routeKeeper(); k != nil && !k.KeepingRoute(l.Config.Network.BridgeCIDR) {
				if err := k.KeepRoute(l.Config.Network.BridgeCIDR, l.Route.OS); err != nil {
					// The route is in place; only its following is lost.
					r.Progress("warning: the route will not follow the VM's address until the next marina up: " + err.Error())
				}
			}
			return nil
		})
}

// stepRemoveRoute removes the route (down --remove-route, destroy), after
// telling the host agent to stop keeping it.
func (l *Lab) stepRemoveRoute() lifecycle.Step {
	return lifecycle.NewStep("Remove route "+l.Config.Network.BridgeCIDR,
		func(ctx context.Context) ([]lifecycle.Change, error) {
			var changes []lifecycle.Change
			if k := l.routeKeeper(); k != nil && k.KeepingRoute(l.Config.Network.BridgeCIDR) {
				changes = append(changes, lifecycle.Change{Action: "stop following", Target: "route " + l.Config.Network.BridgeCIDR})
			}
			_, cmds, err := l.Route.PlanRemove(ctx)
			if err != nil {
				return nil, err
			}
			for _, c := range cmds {
				changes = append(changes, lifecycle.Change{Action: "run", Target: c.Render(true)})
			}
			return changes, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			if k := l.routeKeeper(); k != nil {
				if err := k.ForgetRoute(); err != nil {
					return fmt.Errorf("tell the VM's host agent to stop keeping the route: %w", err)
				}
			}
			_, err := l.Route.Remove(ctx)
			return err
		})
}

// RouteStatus reports the route for status and doctor ("" when the lab has
// no route to check).
func (l *Lab) routeCheck(ctx context.Context, st vm.Status) *Check {
	if l.Route == nil {
		return nil
	}
	name := "route " + l.Config.Network.BridgeCIDR
	if st.GuestIP == "" {
		return &Check{Name: name, Status: Warn, Detail: "the VM reports no lima0 address; nothing to route to"}
	}
	rs, err := l.Route.Check(ctx, st.GuestIP)
	if err != nil {
		return &Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "marina up"}
	}
	if !rs.Correct {
		detail := rs.Detail
		if detail == "" {
			detail = fmt.Sprintf("not via %s", st.GuestIP)
		}
		return &Check{Name: name, Status: Fail, Detail: detail, Fix: "marina up (adds or fixes the route; asks for sudo)"}
	}
	return &Check{Name: name, Status: OK, Detail: "via " + st.GuestIP}
}

// resolverCheck reports whether this machine sends the zone to the lab's
// DNS server (nil when localdns is off or the OS is not one marina
// configures).
func (l *Lab) resolverCheck(ctx context.Context, bridge string) *Check {
	if l.HostOS == "" || !l.pluginEnabled("localdns") {
		return nil
	}
	r := &hostnet.Resolver{OS: l.HostOS, Priv: &hostnet.Privileged{Runner: hostnet.ExecRunner{}}}
	if l.Driver.Name() == "host" {
		r.Link = bridge
	}
	name := "resolver " + l.Config.DNS.Zone
	st, err := r.Check(ctx, sdk.ResolverChange{Domain: l.Config.DNS.Zone, Nameservers: []string{l.Config.DNS.ServerIP}})
	if err != nil {
		return &Check{Name: name, Status: Warn, Detail: err.Error()}
	}
	if !st.InPlace {
		// On macOS the resolver file is the product's promise (names
		// resolve from the Mac); on Linux it is the user's choice.
		status := Warn
		if l.HostOS == hostnet.Darwin {
			status = Fail
		}
		c := &Check{Name: name, Status: status, Detail: st.Detail, Fix: st.Fix}
		if st.Manual != nil {
			c.Instructions = st.Manual.String()
		}
		return c
	}
	return &Check{Name: name, Status: OK, Detail: st.Detail}
}

// kubeconfigCheck reports clusters' kubeconfigs that do not point at the
// VM's current address (lima driver).
func (l *Lab) kubeconfigCheck(st vm.Status) *Check {
	if l.Route == nil || st.GuestIP == "" || l.KubeconfigDir == "" {
		return nil
	}
	stale, err := staleKubeconfigs(l.KubeconfigDir, st.GuestIP)
	if err != nil {
		return &Check{Name: "kubeconfigs", Status: Warn, Detail: err.Error()}
	}
	if len(stale) > 0 {
		return &Check{Name: "kubeconfigs", Status: Fail, Detail: fmt.Sprintf("%d point at an old VM address", len(stale)), Fix: "marina up (rewrites them)"}
	}
	return &Check{Name: "kubeconfigs", Status: OK, Detail: "all point at " + st.GuestIP}
}
