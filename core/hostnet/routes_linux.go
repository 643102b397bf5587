package hostnet

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"syscall"

	"golang.org/x/sys/unix"
)

// readRoutes dumps every IPv4 routing table through netlink (RTM_GETROUTE):
// VPN clients on Linux (WireGuard, OpenVPN with policy routing) often keep
// their routes in a table of their own.
func readRoutes(context.Context) ([]HostRoute, error) {
	rib, err := syscall.NetlinkRIB(unix.RTM_GETROUTE, unix.AF_INET)
	if err != nil {
		return nil, fmt.Errorf("reading the routing tables (netlink): %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("reading the routing tables (netlink): %w", err)
	}
	names := map[uint32]string{}
	var routes []HostRoute
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		rt := (*syscall.RtMsg)(unsafePointer(m.Data))
		if rt.Family != unix.AF_INET || rt.Table == unix.RT_TABLE_LOCAL {
			continue
		}
		r := HostRoute{}
		switch rt.Type {
		case unix.RTN_UNICAST:
		case unix.RTN_BLACKHOLE:
			r.Kind = "blackhole"
		case unix.RTN_UNREACHABLE:
			r.Kind = "unreachable"
		case unix.RTN_PROHIBIT:
			r.Kind = "prohibit"
		default:
			continue // local, broadcast, multicast, anycast, nat
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, fmt.Errorf("reading the routing tables (netlink): %w", err)
		}
		dst := netip.IPv4Unspecified()
		table := uint32(rt.Table)
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.RTA_DST:
				if ad, ok := netip.AddrFromSlice(a.Value); ok {
					dst = ad.Unmap()
				}
			case unix.RTA_GATEWAY:
				if gw, ok := netip.AddrFromSlice(a.Value); ok {
					r.Gateway = gw.Unmap()
				}
			case unix.RTA_OIF:
				if len(a.Value) == 4 {
					idx := binary.NativeEndian.Uint32(a.Value)
					name, ok := names[idx]
					if !ok {
						if ifc, err := net.InterfaceByIndex(int(idx)); err == nil {
							name = ifc.Name
						} else {
							name = fmt.Sprintf("if%d", idx)
						}
						names[idx] = name
					}
					r.Iface = name
				}
			case unix.RTA_TABLE:
				if len(a.Value) == 4 {
					table = binary.NativeEndian.Uint32(a.Value)
				}
			}
		}
		if table == unix.RT_TABLE_LOCAL {
			continue
		}
		r.Dst = netip.PrefixFrom(dst, int(rt.Dst_len)).Masked()
		routes = append(routes, r)
	}
	return routes, nil
}
