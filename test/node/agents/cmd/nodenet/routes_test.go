package main

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node builds a Node; addrs are "Type=address" pairs, e.g. "InternalIP=172.18.0.2".
func node(name string, podCIDRs []string, addrs ...string) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDRs: podCIDRs},
	}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
	}
	for _, a := range addrs {
		typ, addr, _ := strings.Cut(a, "=")
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(typ), Address: addr})
	}
	return n
}

func route(dst, gw, nodeName string) Route {
	return Route{Dst: netip.MustParsePrefix(dst), Gw: netip.MustParseAddr(gw), Node: nodeName}
}

func TestDesiredRoutes(t *testing.T) {
	legacyOnly := node("worker", nil, "InternalIP=172.18.0.3")
	legacyOnly.Spec.PodCIDR = "10.244.1.0/24" // only the singular field is set

	tests := []struct {
		name  string
		nodes []corev1.Node
		self  string
		want  []Route
	}{
		{
			name:  "one node",
			nodes: []corev1.Node{node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2")},
			self:  "cp",
			want:  nil,
		},
		{
			name: "three nodes",
			nodes: []corev1.Node{
				node("worker2", []string{"10.244.2.0/24"}, "InternalIP=172.18.0.4", "Hostname=worker2"),
				node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2"),
				node("worker", []string{"10.244.1.0/24"}, "Hostname=worker", "InternalIP=172.18.0.3"),
			},
			self: "cp",
			want: []Route{
				route("10.244.1.0/24", "172.18.0.3", "worker"),
				route("10.244.2.0/24", "172.18.0.4", "worker2"),
			},
		},
		{
			name: "three nodes, seen from a worker",
			nodes: []corev1.Node{
				node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2"),
				node("worker", []string{"10.244.1.0/24"}, "InternalIP=172.18.0.3"),
				node("worker2", []string{"10.244.2.0/24"}, "InternalIP=172.18.0.4"),
			},
			self: "worker",
			want: []Route{
				route("10.244.0.0/24", "172.18.0.2", "cp"),
				route("10.244.2.0/24", "172.18.0.4", "worker2"),
			},
		},
		{
			name: "dual-stack",
			nodes: []corev1.Node{
				node("cp", []string{"10.244.0.0/24", "fd00:10:244::/64"}, "InternalIP=172.18.0.2", "InternalIP=fc00:f853:ccd:e793::2"),
				node("worker", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, "InternalIP=fc00:f853:ccd:e793::3", "InternalIP=172.18.0.3"),
			},
			self: "cp",
			want: []Route{
				route("10.244.1.0/24", "172.18.0.3", "worker"),
				route("fd00:10:244:1::/64", "fc00:f853:ccd:e793::3", "worker"),
			},
		},
		{
			name: "ipv6 only",
			nodes: []corev1.Node{
				node("cp", []string{"fd00:10:244::/64"}, "InternalIP=fc00:f853:ccd:e793::2"),
				node("worker", []string{"fd00:10:244:1::/64"}, "InternalIP=fc00:f853:ccd:e793::3"),
			},
			self: "cp",
			want: []Route{route("fd00:10:244:1::/64", "fc00:f853:ccd:e793::3", "worker")},
		},
		{
			name: "node without podCIDR yet",
			nodes: []corev1.Node{
				node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2"),
				node("worker", nil, "InternalIP=172.18.0.3"),
				node("worker2", []string{"10.244.2.0/24"}, "InternalIP=172.18.0.4"),
			},
			self: "cp",
			want: []Route{route("10.244.2.0/24", "172.18.0.4", "worker2")},
		},
		{
			name: "node without InternalIP",
			nodes: []corev1.Node{
				node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2"),
				node("worker", []string{"10.244.1.0/24"}, "ExternalIP=203.0.113.3", "Hostname=worker"),
				node("worker2", []string{"10.244.2.0/24"}, "InternalIP=172.18.0.4"),
			},
			self: "cp",
			want: []Route{route("10.244.2.0/24", "172.18.0.4", "worker2")},
		},
		{
			name: "dual-stack CIDRs but only an IPv4 InternalIP",
			nodes: []corev1.Node{
				node("cp", []string{"10.244.0.0/24", "fd00:10:244::/64"}, "InternalIP=172.18.0.2"),
				node("worker", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, "InternalIP=172.18.0.3"),
			},
			self: "cp",
			want: []Route{route("10.244.1.0/24", "172.18.0.3", "worker")},
		},
		{
			name: "legacy spec.podCIDR only",
			nodes: []corev1.Node{
				node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2"),
				legacyOnly,
			},
			self: "cp",
			want: []Route{route("10.244.1.0/24", "172.18.0.3", "worker")},
		},
		{
			name: "own node not in the list yet",
			nodes: []corev1.Node{
				node("worker", []string{"10.244.1.0/24"}, "InternalIP=172.18.0.3"),
			},
			self: "cp",
			want: []Route{route("10.244.1.0/24", "172.18.0.3", "worker")},
		},
		{
			name: "invalid CIDR and invalid address are skipped",
			nodes: []corev1.Node{
				node("a", []string{"not-a-cidr", "10.244.1.0/24"}, "InternalIP=172.18.0.3"),
				node("b", []string{"10.244.2.0/24"}, "InternalIP=bogus", "InternalIP=172.18.0.4"),
			},
			self: "cp",
			want: []Route{
				route("10.244.1.0/24", "172.18.0.3", "a"),
				route("10.244.2.0/24", "172.18.0.4", "b"),
			},
		},
		{
			name: "two nodes claiming one CIDR: first by name wins",
			nodes: []corev1.Node{
				node("z", []string{"10.244.1.0/24"}, "InternalIP=172.18.0.9"),
				node("a", []string{"10.244.1.0/24"}, "InternalIP=172.18.0.3"),
			},
			self: "cp",
			want: []Route{route("10.244.1.0/24", "172.18.0.3", "a")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DesiredRoutes(tt.nodes, tt.self)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("DesiredRoutes() =\n  %v\nwant\n  %v", got, tt.want)
			}
		})
	}
}

func TestPodCIDRs(t *testing.T) {
	n := node("n", []string{"10.244.0.0/24", "fd00::/64"})
	if got := PodCIDRs(&n); fmt.Sprint(got) != "[10.244.0.0/24 fd00::/64]" {
		t.Errorf("PodCIDRs = %v", got)
	}
	n = node("n", nil)
	n.Spec.PodCIDR = "10.244.5.0/24"
	if got := PodCIDRs(&n); fmt.Sprint(got) != "[10.244.5.0/24]" {
		t.Errorf("PodCIDRs (legacy) = %v", got)
	}
	n = node("n", nil)
	if got := PodCIDRs(&n); got != nil {
		t.Errorf("PodCIDRs (none) = %v, want nil", got)
	}
}
