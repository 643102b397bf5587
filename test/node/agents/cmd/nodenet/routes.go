package main

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Route is a route to another node's pod CIDR through that node's InternalIP.
type Route struct {
	Dst  netip.Prefix // the other node's pod CIDR (masked)
	Gw   netip.Addr   // the other node's InternalIP, same family as Dst
	Node string       // the node the route leads to (for logs)
}

// PodCIDRs returns the node's pod CIDRs: spec.podCIDRs, or spec.podCIDR when
// the list is empty. It returns nil when no CIDR is allocated yet.
func PodCIDRs(node *corev1.Node) []string {
	if len(node.Spec.PodCIDRs) > 0 {
		return slices.Clone(node.Spec.PodCIDRs)
	}
	if node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return nil
}

// internalIP returns the node's first InternalIP of the requested family.
func internalIP(node *corev1.Node, v6 bool) (netip.Addr, bool) {
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.Is6() == v6 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// DesiredRoutes computes, from the cluster's nodes, the routes this node
// (self) needs: one route per pod CIDR of every other node, through that
// node's InternalIP of the same family. CIDRs that do not parse, and CIDRs of
// a family for which the node has no InternalIP, are skipped (they are
// retried on the next resync, when the node may have been updated). When two
// nodes claim the same CIDR the first one by name wins. The result is sorted
// by destination.
func DesiredRoutes(nodes []corev1.Node, self string) []Route {
	sorted := make([]*corev1.Node, 0, len(nodes))
	for i := range nodes {
		sorted = append(sorted, &nodes[i])
	}
	slices.SortFunc(sorted, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })

	byDst := map[netip.Prefix]Route{}
	for _, n := range sorted {
		if n.Name == self {
			continue
		}
		for _, c := range PodCIDRs(n) {
			dst, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			dst = dst.Masked()
			gw, ok := internalIP(n, dst.Addr().Is6())
			if !ok {
				continue
			}
			if _, dup := byDst[dst]; dup {
				continue
			}
			byDst[dst] = Route{Dst: dst, Gw: gw, Node: n.Name}
		}
	}

	out := make([]Route, 0, len(byDst))
	for _, r := range byDst {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Route) int { return a.Dst.Compare(b.Dst) })
	return out
}
