// Package slot owns the mapping from a kind cluster's slot number N (1..99)
// to every resource marina derives from it, and the allocator that picks N
// so that no two live clusters ever share one of those resources.
//
// For slot N on the shared docker bridge a.b.0.0/16 (default 172.30.0.0/16):
//
//	API host port    7000+N                          (7001..7099)
//	service subnet   10.N.0.0/16
//	pod subnet       10.1N.0.0/16                     ("10.1" followed by N: 10.11, 10.110, 10.199)
//	MetalLB pools    a.b.N.1-a.b.N.7, a.b.N.16-a.b.N.254
//	kubeconfig       ~/.kube/marina/<name>.kubeconfig
//	node labels      topology.kubernetes.io/region=europe-westN, .../zone=europe-westN-b,
//	                 app.kubernetes.io/managed-by=marina, marina.dev/slot=N
//
// The pod subnet is built by writing "1" in front of N, not by adding
// numbers, so the pod subnet of slot n (1..9) is the service subnet of slot
// 10+n: the pairs 1/11 ... 9/19 can never be live together. That is why at
// most 90 clusters fit on the default bridge (see MaxConcurrent). A bridge
// in 10.0.0.0/8 can also collide with a slot's subnets (10.5.0.0/16 is slot
// 5's service subnet); such slots are never handed out. Allocate skips or
// refuses every such slot and says which slot and which resource collide.
//
// Inside the bridge, a.b.1.0-a.b.99.255 belong to the slots' MetalLB pools;
// a.b.0.1 is the gateway, a.b.255.52 and a.b.255.53 are the local DNS
// containers, and docker's dynamic container addresses are confined to
// DockerIPRange (a.b.128.0/18) so that they never land on any of those.
//
// Everything here is a pure function: no I/O, no global state.
package slot

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
)

// The valid slot numbers and the base of the API host port.
const (
	Min         = 1
	Max         = 99
	APIPortBase = 7000
)

// Label keys and values marina puts on every node of a cluster it manages.
const (
	LabelRegion    = "topology.kubernetes.io/region"
	LabelZone      = "topology.kubernetes.io/zone"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelSlot      = "marina.dev/slot"
	ManagedBy      = "marina"
)

// ErrOutOfRange is wrapped by every error about a slot number outside Min..Max.
var ErrOutOfRange = errors.New("cluster slot outside 1..99")

// ErrExhausted is wrapped by the error Allocate returns when no slot is free.
var ErrExhausted = errors.New("no free cluster slot")

// Range is an inclusive range of IPv4 addresses, as MetalLB writes it.
type Range struct{ First, Last netip.Addr }

// String returns the range as "172.30.1.1-172.30.1.7".
func (r Range) String() string { return r.First.String() + "-" + r.Last.String() }

// Overlaps reports whether r and o share at least one address.
func (r Range) Overlaps(o Range) bool {
	return r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// Contains reports whether a lies in r.
func (r Range) Contains(a netip.Addr) bool {
	return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Resources is everything a cluster in one slot uses that another cluster
// must not use at the same time.
type Resources struct {
	Slot          int
	APIPort       int
	ServiceSubnet netip.Prefix
	PodSubnet     netip.Prefix
	Pools         []Range
}

// Derive returns the resources of slot n on the given bridge, which must be
// an IPv4 /16 without host bits. It does not check n against other slots or
// the bridge's own range: Allocate does.
func Derive(n int, bridge netip.Prefix) (Resources, error) {
	if err := checkBridge(bridge); err != nil {
		return Resources{}, err
	}
	if n < Min || n > Max {
		return Resources{}, fmt.Errorf("%w: got %d; use a slot between %d and %d, or none to take the lowest free one", ErrOutOfRange, n, Min, Max)
	}
	num := strconv.Itoa(n)
	svc, err := netip.ParsePrefix("10." + num + ".0.0/16")
	if err != nil {
		return Resources{}, fmt.Errorf("service subnet of slot %d: %w", n, err)
	}
	pod, err := netip.ParsePrefix("10.1" + num + ".0.0/16") // literal on purpose, see package doc
	if err != nil {
		return Resources{}, fmt.Errorf("pod subnet of slot %d: %w", n, err)
	}
	b := bridge.Addr().As4()
	ip := func(last byte) netip.Addr { return netip.AddrFrom4([4]byte{b[0], b[1], byte(n), last}) }
	return Resources{
		Slot:          n,
		APIPort:       APIPortBase + n,
		ServiceSubnet: svc,
		PodSubnet:     pod,
		Pools:         []Range{{ip(1), ip(7)}, {ip(16), ip(254)}},
	}, nil
}

// KubeconfigPath returns where marina writes the kubeconfig of cluster name:
// <home>/.kube/marina/<name>.kubeconfig. name must already be a validated
// cluster name (a DNS label), so it cannot leave that directory.
func KubeconfigPath(home, name string) string {
	return filepath.Join(home, ".kube", "marina", name+".kubeconfig")
}

// Labels returns the node labels of the slot's cluster. An empty region
// defaults to "europe-west<N>"; an empty zone defaults to the region
// followed by "-b" (so "europe-west<N>-b" when neither is set).
func (r Resources) Labels(region, zone string) map[string]string {
	if region == "" {
		region = "europe-west" + strconv.Itoa(r.Slot)
	}
	if zone == "" {
		zone = region + "-b"
	}
	return map[string]string{
		LabelRegion:    region,
		LabelZone:      zone,
		LabelManagedBy: ManagedBy,
		LabelSlot:      strconv.Itoa(r.Slot),
	}
}

// DockerIPRange returns the ip-range the `kind` docker network must use for
// the addresses docker hands to containers itself: a.b.128.0/18
// (a.b.128.0-a.b.191.255). It lies inside the bridge and outside every
// slot's MetalLB pools (a.b.1-99.x), the gateway a.b.0.1 and the local DNS
// addresses a.b.255.52/53.
func DockerIPRange(bridge netip.Prefix) (netip.Prefix, error) {
	if err := checkBridge(bridge); err != nil {
		return netip.Prefix{}, err
	}
	b := bridge.Addr().As4()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], 128, 0}), 18), nil
}

func checkBridge(bridge netip.Prefix) error {
	const want = "expected an IPv4 /16 such as 172.30.0.0/16"
	switch {
	case !bridge.IsValid():
		return fmt.Errorf("bridge CIDR %q is not a valid prefix; %s", bridge.String(), want)
	case !bridge.Addr().Is4():
		return fmt.Errorf("bridge CIDR %s is not IPv4; %s", bridge, want)
	case bridge.Bits() != 16:
		return fmt.Errorf("bridge CIDR %s is a /%d; %s (slots use the third octet)", bridge, bridge.Bits(), want)
	case bridge.Masked() != bridge:
		return fmt.Errorf("bridge CIDR %s has host bits set; expected %s", bridge, bridge.Masked())
	}
	return nil
}
