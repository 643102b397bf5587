package main

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// routeProtocol tags the routes nodenet installs (shown as "proto 78" by
// `ip route`). It lets a restarted agent find, and only ever delete, its own
// routes. Values above RTPROT_STATIC (4) are free for routing daemons; 78 is
// not assigned in iproute2's rt_protos.
const routeProtocol = netlink.RouteProtocol(78)

// netlinkRoutes implements routeOps on the host's main routing table.
type netlinkRoutes struct{}

func toNetlink(r Route) *netlink.Route {
	return &netlink.Route{
		Dst: &net.IPNet{
			IP:   r.Dst.Addr().AsSlice(),
			Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen()),
		},
		Gw:       r.Gw.AsSlice(),
		Protocol: routeProtocol,
	}
}

func (netlinkRoutes) Replace(r Route) error {
	return netlink.RouteReplace(toNetlink(r))
}

func (netlinkRoutes) Delete(r Route) error {
	err := netlink.RouteDel(toNetlink(r))
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

func (netlinkRoutes) List() ([]Route, error) {
	var out []Route
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(family,
			&netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return nil, err
		}
		for _, nr := range routes {
			if nr.Dst == nil || nr.Gw == nil {
				continue
			}
			addr, ok := netip.AddrFromSlice(nr.Dst.IP)
			if !ok {
				continue
			}
			ones, _ := nr.Dst.Mask.Size()
			gw, ok := netip.AddrFromSlice(nr.Gw)
			if !ok {
				continue
			}
			out = append(out, Route{
				Dst: netip.PrefixFrom(addr.Unmap(), ones).Masked(),
				Gw:  gw.Unmap(),
			})
		}
	}
	return out, nil
}
