package metallb

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bcollard/marina/sdk"
)

// The MetalLB kinds the plugin writes (metallb.io/v1beta1).
var (
	ipAddressPoolGVK   = schema.GroupVersionKind{Group: "metallb.io", Version: "v1beta1", Kind: "IPAddressPool"}
	l2AdvertisementGVK = schema.GroupVersionKind{Group: "metallb.io", Version: "v1beta1", Kind: "L2Advertisement"}
)

// Labels on the pool and the L2Advertisement. The plugin owns exactly the
// objects carrying both (PoolSelector): those it finds under another name
// are left over from an earlier configuration and are removed.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPlugin    = "marina.dev/plugin"
	LabelSlot      = "marina.dev/slot"
	PoolSelector   = LabelManagedBy + "=marina," + LabelPlugin + "=metallb"
)

// PoolName is the name of the IPAddressPool (and of the L2Advertisement
// announcing it) for the cluster in slot: "marina-slot-<N>", so
// `kubectl get ipaddresspools -A` says which slot's addresses it holds.
func PoolName(slot int) string { return "marina-slot-" + strconv.Itoa(slot) }

// objectHeader is the apiVersion, kind and metadata of an object the plugin
// applies, with only the fields it sets (the apply configuration style:
// what is not set is not sent, so server-side apply owns only these
// fields).
type objectHeader struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
}

type objectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// ipAddressPool is metallb.io/v1beta1 IPAddressPool, with the fields the
// plugin sets.
type ipAddressPool struct {
	objectHeader `json:",inline"`
	Spec         ipAddressPoolSpec `json:"spec"`
}

type ipAddressPoolSpec struct {
	// Addresses are "first-last" ranges (or CIDRs, which the plugin does not use).
	Addresses []string `json:"addresses"`
}

// l2Advertisement is metallb.io/v1beta1 L2Advertisement.
type l2Advertisement struct {
	objectHeader `json:",inline"`
	Spec         l2AdvertisementSpec `json:"spec"`
}

type l2AdvertisementSpec struct {
	// IPAddressPools names the pools announced; the plugin names only its
	// own, so pools a user adds are not announced behind their back.
	IPAddressPools []string `json:"ipAddressPools"`
}

// poolObjects renders the IPAddressPool holding exactly the cluster's
// MetalLB ranges and the L2Advertisement announcing it, after checking the
// ranges.
func poolObjects(c *sdk.Cluster) ([]*unstructured.Unstructured, error) {
	addrs, err := poolAddresses(c)
	if err != nil {
		return nil, err
	}
	name := PoolName(c.Slot)
	header := func(gvk schema.GroupVersionKind) objectHeader {
		labels := map[string]string{LabelSlot: strconv.Itoa(c.Slot)}
		for k, v := range ownershipLabels {
			labels[k] = v
		}
		return objectHeader{
			APIVersion: gvk.GroupVersion().String(),
			Kind:       gvk.Kind,
			Metadata:   objectMeta{Name: name, Namespace: Namespace, Labels: labels},
		}
	}
	pool, err := toUnstructured(&ipAddressPool{
		objectHeader: header(ipAddressPoolGVK),
		Spec:         ipAddressPoolSpec{Addresses: addrs},
	})
	if err != nil {
		return nil, err
	}
	l2, err := toUnstructured(&l2Advertisement{
		objectHeader: header(l2AdvertisementGVK),
		Spec:         l2AdvertisementSpec{IPAddressPools: []string{name}},
	})
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{pool, l2}, nil
}

// poolAddresses returns the cluster's ranges as MetalLB writes them,
// "first-last", in the order given. Each must be an IPv4 range with first
// <= last, and no two may overlap (MetalLB's webhook would refuse the pool
// with a less precise message).
func poolAddresses(c *sdk.Cluster) ([]string, error) {
	if c.Slot < 1 {
		return nil, fmt.Errorf("cluster %q has no slot (got %d): marina assigns one before PostCluster", c.Name, c.Slot)
	}
	if len(c.MetalLBPools) == 0 {
		return nil, fmt.Errorf("cluster %q has no MetalLB address ranges: marina derives them from the slot (172.30.N.1-7, 172.30.N.16-254)", c.Name)
	}
	type span struct{ first, last netip.Addr }
	var spans []span
	out := make([]string, 0, len(c.MetalLBPools))
	for i, r := range c.MetalLBPools {
		first, err1 := netip.ParseAddr(r.First)
		last, err2 := netip.ParseAddr(r.Last)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cluster %q MetalLB range %d (%s): %w", c.Name, i+1, r, err)
		}
		if !first.Is4() || !last.Is4() {
			return nil, fmt.Errorf("cluster %q MetalLB range %d (%s): must be IPv4 addresses", c.Name, i+1, r)
		}
		if last.Less(first) {
			return nil, fmt.Errorf("cluster %q MetalLB range %d (%s): first address is after the last", c.Name, i+1, r)
		}
		for j, s := range spans {
			if !(last.Less(s.first) || s.last.Less(first)) {
				return nil, fmt.Errorf("cluster %q MetalLB ranges %d (%s) and %d (%s) overlap", c.Name, j+1, c.MetalLBPools[j], i+1, r)
			}
		}
		spans = append(spans, span{first, last})
		out = append(out, first.String()+"-"+last.String())
	}
	return out, nil
}
