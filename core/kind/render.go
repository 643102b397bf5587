package kind

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk"
)

// The kind config's type meta.
const (
	ConfigKind       = "Cluster"
	ConfigAPIVersion = "kind.x-k8s.io/v1alpha4"
)

// APIServerContainerPort is the port the API server listens on inside the
// control-plane node (kind's common.APIServerInternalPort).
const APIServerContainerPort = 6443

// ListenAll is the listen address of the API server's host port when the
// kubeconfig uses a non-loopback address (see the package doc).
const ListenAll = "0.0.0.0"

// corePlugin names marina's own entries in conflict errors.
const corePlugin = "marina"

// NamedContribution is one plugin's PreCluster contribution to the kind
// config. A nil KindContribution contributes nothing.
type NamedContribution struct {
	// Plugin is the contributing plugin's name; it orders the merge and names
	// the plugin in conflict errors.
	Plugin string
	*sdk.KindContribution
}

// RenderInput is everything the kind config of one cluster is rendered from.
type RenderInput struct {
	// Name is the cluster name (see ValidateName).
	Name string
	// Slot is the cluster's slot: API port and subnets.
	Slot slot.Resources
	// NodeImage is the node image of every node; empty means kind's default.
	NodeImage string
	// Workers is the number of worker nodes besides the control-plane node.
	Workers int
	// Labels are the node labels of every node (slot.Resources.Labels plus the
	// user's). Each must be a label the kubelet may set on its own node: see
	// SplitNodeLabels for the others.
	Labels map[string]string
	// APIServerAddress is the address kubeconfigs use to reach the API server
	// (the VM's IP with Lima, the Docker host's IP otherwise); empty means
	// kind's default, 127.0.0.1 on the Docker host.
	APIServerAddress string
	// Contributions are the plugins' PreCluster contributions, in any order:
	// they are merged in plugin-name order.
	Contributions []NamedContribution
	// NodeFilesDir is the directory on the Docker host where the core places
	// the plugins' NodeFiles (NodeFiles, PlaceFiles); required when a
	// contribution has NodeFiles.
	NodeFilesDir string
}

// Render returns the kind config of the cluster described by in, validated
// (see Validate). Conflicting contributions — one node label key with two
// values, one host port twice, one node file path twice — are errors that
// name both sides.
func Render(in RenderInput) (*v1alpha4.Cluster, error) {
	if err := ValidateName(in.Name); err != nil {
		return nil, err
	}
	if err := checkSlot(in.Slot); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", in.Name, err)
	}
	if in.Workers < 0 {
		return nil, fmt.Errorf("cluster %s: workers is %d; use 0 or more", in.Name, in.Workers)
	}
	c := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: ConfigKind, APIVersion: ConfigAPIVersion},
		Name:     in.Name,
		Networking: v1alpha4.Networking{
			IPFamily:      v1alpha4.IPv4Family,
			APIServerPort: int32(in.Slot.APIPort),
			ServiceSubnet: in.Slot.ServiceSubnet.String(),
			PodSubnet:     in.Slot.PodSubnet.String(),
		},
	}
	if err := setAPIServerAddress(c, in.APIServerAddress); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", in.Name, err)
	}
	m, err := mergeContributions(in, apiBinding(c))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", in.Name, err)
	}
	c.ContainerdConfigPatches = m.containerd
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, m.kubeadm...)

	var mounts []v1alpha4.Mount
	if len(m.files) > 0 {
		placed, err := NodeFiles(in.Name, m.files, in.NodeFilesDir)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", in.Name, err)
		}
		for _, f := range placed {
			mounts = append(mounts, v1alpha4.Mount{ContainerPath: f.NodePath, HostPath: f.HostPath, Readonly: true})
		}
	}
	node := func(role v1alpha4.NodeRole) v1alpha4.Node {
		return v1alpha4.Node{
			Role:        role,
			Image:       in.NodeImage,
			Labels:      maps.Clone(m.labels),
			ExtraMounts: slices.Clone(mounts),
		}
	}
	cp := node(v1alpha4.ControlPlaneRole)
	cp.ExtraPortMappings = m.ports
	c.Nodes = append(c.Nodes, cp)
	for range in.Workers {
		c.Nodes = append(c.Nodes, node(v1alpha4.WorkerRole))
	}
	if err := Validate(c); err != nil {
		return nil, fmt.Errorf("rendered kind config of cluster %s is invalid (a marina bug unless a contribution caused it): %w", in.Name, err)
	}
	return c, nil
}

// Encode returns c as the YAML `kind create cluster --config` reads.
func Encode(c *v1alpha4.Cluster) ([]byte, error) {
	if c == nil {
		return nil, errors.New("encode kind config: no config")
	}
	b, err := sigsyaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode kind config of cluster %s: %w", c.Name, err)
	}
	return b, nil
}

func checkSlot(r slot.Resources) error {
	if r.Slot < slot.Min || r.Slot > slot.Max {
		return fmt.Errorf("slot %d is outside %d..%d; derive it with slot.Derive", r.Slot, slot.Min, slot.Max)
	}
	if r.APIPort < 1 || r.APIPort > 65535 {
		return fmt.Errorf("slot %d: API port %d is not a TCP port; derive it with slot.Derive", r.Slot, r.APIPort)
	}
	for _, s := range []struct {
		what string
		p    netip.Prefix
	}{{"service subnet", r.ServiceSubnet}, {"pod subnet", r.PodSubnet}} {
		if !s.p.IsValid() || !s.p.Addr().Is4() || s.p.Masked() != s.p {
			return fmt.Errorf("slot %d: %s %q is not an IPv4 network; derive it with slot.Derive", r.Slot, s.what, s.p.String())
		}
	}
	return nil
}

// setAPIServerAddress chooses where the API server's host port listens and
// which addresses its certificate covers (see the package doc).
func setAPIServerAddress(c *v1alpha4.Cluster, address string) error {
	if address == "" {
		return nil // kind: 127.0.0.1, in the certificate already
	}
	a, err := netip.ParseAddr(address)
	if err != nil || !a.Is4() || a.IsUnspecified() {
		return fmt.Errorf("API server address %q is not an IPv4 address a kubeconfig can use; give the VM's (or Docker host's) IP, or none for 127.0.0.1", address)
	}
	if a.IsLoopback() {
		c.Networking.APIServerAddress = a.String() // kind puts it in the certificate
		return nil
	}
	c.Networking.APIServerAddress = ListenAll
	patch, err := sigsyaml.Marshal(clusterConfigurationPatch{
		Kind:      "ClusterConfiguration",
		APIServer: apiServerPatch{CertSANs: []string{a.String(), "127.0.0.1"}},
	})
	if err != nil {
		return fmt.Errorf("render the API server certificate patch: %w", err)
	}
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, string(patch))
	return nil
}

// clusterConfigurationPatch is a kubeadm ClusterConfiguration merge patch. It
// carries no apiVersion on purpose: kind then applies it whatever kubeadm API
// version the node image uses (apiServer.certSANs is the same in v1beta3 and
// v1beta4), and kind merges certSANs lists instead of replacing them.
type clusterConfigurationPatch struct {
	Kind      string         `json:"kind"`
	APIServer apiServerPatch `json:"apiServer"`
}

type apiServerPatch struct {
	CertSANs []string `json:"certSANs"`
}

// binding is a host port binding with the plugin that asked for it.
type binding struct {
	owner string
	pm    v1alpha4.PortMapping
}

// apiBinding is the host port binding kind adds for the API server.
func apiBinding(c *v1alpha4.Cluster) binding {
	addr := c.Networking.APIServerAddress
	if addr == "" {
		addr = "127.0.0.1"
	}
	return binding{
		owner: corePlugin + " (API server)",
		pm: v1alpha4.PortMapping{
			ContainerPort: APIServerContainerPort,
			HostPort:      c.Networking.APIServerPort,
			ListenAddress: addr,
			Protocol:      v1alpha4.PortMappingProtocolTCP,
		},
	}
}

// String renders the binding as "0.0.0.0:8080/TCP".
func (b binding) String() string {
	return netip.AddrPortFrom(listenAddr(b.pm), uint16(b.pm.HostPort)).String() + "/" + string(protocolOf(b.pm))
}

func protocolOf(pm v1alpha4.PortMapping) v1alpha4.PortMappingProtocol {
	if pm.Protocol == "" {
		return v1alpha4.PortMappingProtocolTCP
	}
	return pm.Protocol
}

// overlaps reports whether two host bindings cannot both exist: same port and
// protocol, and the same listen address or a wildcard on either side (kind's
// own rule, plus Docker's).
func (b binding) overlaps(o binding) bool {
	if b.pm.HostPort != o.pm.HostPort || protocolOf(b.pm) != protocolOf(o.pm) {
		return false
	}
	ab, ao := listenAddr(b.pm), listenAddr(o.pm)
	return ab.IsUnspecified() || ao.IsUnspecified() || ab == ao
}

func listenAddr(pm v1alpha4.PortMapping) netip.Addr {
	if pm.ListenAddress == "" {
		return netip.IPv4Unspecified()
	}
	a, err := netip.ParseAddr(pm.ListenAddress)
	if err != nil {
		return netip.IPv4Unspecified() // rejected earlier; be conservative
	}
	if a.Is6() && a.IsUnspecified() {
		return netip.IPv4Unspecified() // [::] and 0.0.0.0 both take every address
	}
	return a.Unmap()
}
