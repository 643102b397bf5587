// Package kubeadm reproduces, for the stand-in, what kind v0.33.0 and
// kubeadm v1.37 decide from a kind config: kind's kubeadm config documents
// for each node (kind's ConfigTemplateBetaV4, reduced to the fields the
// stand-in reads) with the config's kubeadmConfigPatches and
// kubeadmConfigPatchesJSON6902 applied the way kind applies them (matched on
// kind and apiVersion, merged with kind's rules for extraArgs,
// kubeletExtraArgs and certSANs), and from those documents what the
// stand-in creates: the API server certificate's SANs, each Node's labels
// and taints, and kubeadm's CoreDNS Corefile.
//
// A patch kind cannot parse fails with kind's own message; a patch that
// matches no document is ignored, as kind ignores it (Result.Unmatched says
// which, for a warning).
package kubeadm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/test/standin/internal/spec"
)

// APIVersion is the kubeadm config API kind v0.33.0 renders for Kubernetes
// v1.36 and later (ConfigTemplateBetaV4), which the stand-in's node image
// runs (test/tools builds v1.37).
const APIVersion = "kubeadm.k8s.io/v1beta4"

// Other API versions of kind's kubeadm config documents.
const (
	kubeletAPIVersion   = "kubelet.config.k8s.io/v1beta1"
	kubeProxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
)

// DefaultDNSDomain is kubeadm's networking.dnsDomain when none is set.
const DefaultDNSDomain = "cluster.local"

// Labels and taints kubeadm and the kubelet set.
const (
	// LabelControlPlane is kubeadm's control-plane role label and taint key.
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	// LabelExcludeFromLB is the label kubeadm puts on control-plane nodes
	// and kind removes again from a single-node cluster.
	LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"
)

// Input is what kind renders the kubeadm config of a cluster from.
type Input struct {
	// Cluster is the kind config, loaded and defaulted
	// (v1alpha4.SetDefaultsCluster).
	Cluster *v1alpha4.Cluster
	// Names are the node names, one per Cluster.Nodes entry (kind's
	// naming: NAME-control-plane, NAME-worker, NAME-worker2, ...).
	Names []string
	// KubernetesVersion is kubeadm's kubernetesVersion (the node image's).
	KubernetesVersion string
	// Arch is the nodes' architecture (kubernetes.io/arch).
	Arch string
}

// Node is what kubeadm and the kubelet make of one node's config.
type Node struct {
	// Name is the node name.
	Name string
	// Role is spec.RoleControlPlane or spec.RoleWorker.
	Role string
	// Labels are the Node's labels once kubeadm and kind are done.
	Labels map[string]string
	// Taints are the Node's taints once kubeadm and kind are done.
	Taints []corev1.Taint
	// ProviderID is the kubelet's --provider-id.
	ProviderID string
}

// Result is kind's kubeadm config of a cluster, read back.
type Result struct {
	// Nodes are the cluster's nodes, in config order.
	Nodes []Node
	// CertSANs are apiServer.certSANs of the ClusterConfiguration the
	// bootstrap control plane's kubeadm init reads (kind's own entries
	// included).
	CertSANs []string
	// DNSDomain is networking.dnsDomain (DefaultDNSDomain when unset).
	DNSDomain string
	// ServiceSubnet is networking.serviceSubnet.
	ServiceSubnet string
	// Unmatched describes the patches that matched no document of any
	// node: kind ignores them silently.
	Unmatched []string
}

// Configure renders kind's kubeadm config of every node of in.Cluster,
// applies the config's patches as kind does, and reads back what kubeadm
// and the kubelet would make of it. Errors are kind's (a patch that is not
// YAML) or the kubelet's (--node-labels it refuses).
func Configure(in Input) (*Result, error) {
	c := in.Cluster
	if c == nil {
		return nil, errors.New("kubeadm config: no kind config")
	}
	if len(in.Names) != len(c.Nodes) {
		return nil, fmt.Errorf("kubeadm config: %d node names for %d nodes", len(in.Names), len(c.Nodes))
	}
	clusterPatches, err := parsePatches("cluster", c.KubeadmConfigPatches, c.KubeadmConfigPatchesJSON6902)
	if err != nil {
		return nil, fmt.Errorf("failed to generate kubeadm config content: %w", err)
	}
	res := &Result{}
	bootstrap := -1
	for i, n := range c.Nodes {
		if n.Role == v1alpha4.ControlPlaneRole && bootstrap < 0 {
			bootstrap = i
		}
	}
	if bootstrap < 0 {
		return nil, errors.New("kubeadm config: no control-plane node")
	}
	single := len(c.Nodes) == 1
	all := slices.Clone(clusterPatches)
	for i, n := range c.Nodes {
		nodePatches, err := parsePatches(fmt.Sprintf("nodes[%d]", i), n.KubeadmConfigPatches, n.KubeadmConfigPatchesJSON6902)
		if err != nil {
			return nil, fmt.Errorf("failed to generate kubeadm config content: %w", err)
		}
		all = append(all, nodePatches...)
		docs, err := baseDocuments(in, i)
		if err != nil {
			return nil, err
		}
		for _, set := range [][]*patch{clusterPatches, nodePatches} {
			for _, d := range docs {
				if err := d.apply(set); err != nil {
					return nil, fmt.Errorf("failed to generate kubeadm config content for node %s: %w", in.Names[i], err)
				}
			}
		}
		read, err := readBack(docs, i == bootstrap)
		if err != nil {
			return nil, fmt.Errorf("kubeadm would not accept the config of node %s: %w", in.Names[i], err)
		}
		if i == bootstrap {
			res.CertSANs = read.certSANs
			res.DNSDomain = read.dnsDomain
			res.ServiceSubnet = read.serviceSubnet
		}
		node, err := nodeOf(in, i, read, single)
		if err != nil {
			return nil, err
		}
		res.Nodes = append(res.Nodes, node)
	}
	for _, p := range all {
		if p.matched == 0 {
			res.Unmatched = append(res.Unmatched, p.String())
		}
	}
	return res, nil
}

// readBackResult is what the stand-in reads from one node's patched
// documents.
type readBackResult struct {
	certSANs      []string
	dnsDomain     string
	serviceSubnet string
	nodeLabels    []string // every node-labels value, in order
	taints        *[]corev1.Taint
}

// readBack decodes the documents kubeadm reads on the node: the
// ClusterConfiguration and the InitConfiguration (bootstrap control plane)
// or JoinConfiguration (every other node).
func readBack(docs []*document, bootstrap bool) (readBackResult, error) {
	var r readBackResult
	nodeKind := "JoinConfiguration"
	if bootstrap {
		nodeKind = "InitConfiguration"
	}
	for _, d := range docs {
		if d.apiVersion != APIVersion {
			continue
		}
		switch d.kind {
		case "ClusterConfiguration":
			var cc struct {
				APIServer struct {
					CertSANs []string `json:"certSANs"`
				} `json:"apiServer"`
				Networking struct {
					DNSDomain     string `json:"dnsDomain"`
					ServiceSubnet string `json:"serviceSubnet"`
				} `json:"networking"`
			}
			if err := json.Unmarshal(d.json, &cc); err != nil {
				return r, fmt.Errorf("ClusterConfiguration: %w", err)
			}
			r.certSANs = cc.APIServer.CertSANs
			r.dnsDomain = cc.Networking.DNSDomain
			if r.dnsDomain == "" {
				r.dnsDomain = DefaultDNSDomain
			}
			r.serviceSubnet = cc.Networking.ServiceSubnet
		case nodeKind:
			var nc struct {
				NodeRegistration struct {
					KubeletExtraArgs args            `json:"kubeletExtraArgs"`
					Taints           *[]corev1.Taint `json:"taints"`
				} `json:"nodeRegistration"`
			}
			if err := json.Unmarshal(d.json, &nc); err != nil {
				return r, fmt.Errorf("%s: %w", nodeKind, err)
			}
			for _, a := range nc.NodeRegistration.KubeletExtraArgs {
				if a.Name == "node-labels" {
					r.nodeLabels = append(r.nodeLabels, a.Value)
				}
			}
			r.taints = nc.NodeRegistration.Taints
		}
	}
	return r, nil
}

// nodeOf returns the Node object node i ends up as.
func nodeOf(in Input, i int, r readBackResult, single bool) (Node, error) {
	name := in.Names[i]
	cp := in.Cluster.Nodes[i].Role == v1alpha4.ControlPlaneRole
	n := Node{
		Name:       name,
		Role:       spec.RoleWorker,
		ProviderID: fmt.Sprintf("kind://docker/%s/%s", in.Cluster.Name, name),
		// The labels every kubelet sets on its own Node.
		Labels: map[string]string{
			corev1.LabelHostname:      name,
			corev1.LabelOSStable:      "linux",
			corev1.LabelArchStable:    in.Arch,
			"beta.kubernetes.io/os":   "linux",
			"beta.kubernetes.io/arch": in.Arch,
		},
	}
	for _, v := range r.nodeLabels {
		labels, err := ParseNodeLabels(v)
		if err != nil {
			return n, fmt.Errorf("node %s: the kubelet would not start: --node-labels=%q: %w", name, v, err)
		}
		for k, v := range labels {
			n.Labels[k] = v
		}
	}
	if cp {
		n.Role = spec.RoleControlPlane
		// kubeadm's mark-control-plane phase.
		n.Labels[LabelControlPlane] = ""
		n.Labels[LabelExcludeFromLB] = ""
	}
	switch {
	case r.taints != nil:
		n.Taints = slices.Clone(*r.taints)
	case cp:
		n.Taints = []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
	}
	if single {
		// kind's kubeadminit action: a lone node must run workloads and
		// load balancers.
		delete(n.Labels, LabelExcludeFromLB)
		n.Taints = slices.DeleteFunc(n.Taints, func(t corev1.Taint) bool { return t.Key == LabelControlPlane })
	}
	if len(n.Taints) == 0 {
		n.Taints = nil
	}
	return n, nil
}

// ParseNodeLabels parses a --node-labels value the way the kubelet does
// (comma-separated key=value pairs) and checks each label as the kubelet
// does before it starts: a valid label, and none in the kubernetes.io or
// k8s.io namespaces that a kubelet may not set on itself.
func ParseNodeLabels(v string) (map[string]string, error) {
	out := map[string]string{}
	var refused []string
	for _, pair := range strings.Split(v, ",") {
		if pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("malformed pair %q, expect string=string", pair)
		}
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if err := kind.ValidateLabel(k, val); err != nil {
			return nil, err
		}
		if !kind.KubeletMaySet(k) {
			refused = append(refused, k)
		}
		out[k] = val
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return nil, fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v", refused)
	}
	return out, nil
}

// APIServerSANs returns the subject alternative names kubeadm puts in the
// API server's serving certificate: its fixed names, the node name, the
// first address of the service subnet, and certSANs (kind's
// [localhost, apiServerAddress] plus the patches'). 0.0.0.0, which kind
// lists when the API listens on every address, is left out. The node's own
// container address is not known before the node starts and is left out
// too: nothing reaches the API server by it.
func (r *Result) APIServerSANs(nodeName string) (dns []string, ips []net.IP, err error) {
	dns = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + r.DNSDomain, nodeName}
	first := strings.Split(r.ServiceSubnet, ",")[0]
	p, err := netip.ParsePrefix(strings.TrimSpace(first))
	if err != nil {
		return nil, nil, fmt.Errorf("networking.serviceSubnet %q: %w", r.ServiceSubnet, err)
	}
	seen := map[string]bool{}
	addIP := func(a netip.Addr) {
		if a.IsUnspecified() || seen[a.String()] {
			return
		}
		seen[a.String()] = true
		ips = append(ips, net.IP(a.AsSlice()))
	}
	addIP(p.Masked().Addr().Next())
	for _, s := range r.CertSANs {
		if a, err := netip.ParseAddr(s); err == nil {
			addIP(a.Unmap())
			continue
		}
		if s != "" && !slices.Contains(dns, s) {
			dns = append(dns, s)
		}
	}
	if !slices.Contains(dns, "localhost") {
		dns = append(dns, "localhost")
	}
	return dns, ips, nil
}
