package kind

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// MaxNameLength is the longest cluster name: node containers are named (and
// their hostnames are) <name>-control-plane, and a hostname has at most 63
// characters.
const MaxNameLength = 63 - len("-control-plane")

// ValidateName checks a cluster name: a DNS label (lower-case letters, digits
// and '-', starting and ending with a letter or digit) of at most
// MaxNameLength characters. Such a name is safe in container names, host
// names, file paths and argv.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("cluster name is empty; give a name such as dev")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("cluster name %q has %d characters; use at most %d (node names add -control-plane)", name, len(name), MaxNameLength)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("cluster name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// kubeletLabels and kubeletLabelNamespaces are the kubernetes.io labels a
// kubelet may set on its own node (k8s.io/kubelet/pkg/apis, v0.37.2).
var (
	kubeletLabels = []string{
		corev1.LabelHostname,
		corev1.LabelTopologyZone,
		corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone,
		corev1.LabelFailureDomainBetaRegion,
		corev1.LabelInstanceType,
		corev1.LabelInstanceTypeStable,
		corev1.LabelOSStable,
		corev1.LabelArchStable,
		"beta.kubernetes.io/os",
		"beta.kubernetes.io/arch",
	}
	kubeletLabelNamespaces = []string{
		corev1.LabelNamespaceSuffixKubelet,
		corev1.LabelNamespaceSuffixNode,
	}
)

// KubeletMaySet reports whether the kubelet accepts key in --node-labels. The
// kubelet refuses to start when a key in the kubernetes.io or k8s.io
// namespaces (including subdomains such as app.kubernetes.io) is not one of
// the few it may set on its own node (k8s.io/kubernetes cmd/kubelet/app/options
// ValidateKubeletFlags).
func KubeletMaySet(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	restricted := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") ||
		ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
	if !restricted {
		return true
	}
	for _, l := range kubeletLabels {
		if key == l {
			return true
		}
	}
	for _, allowed := range kubeletLabelNamespaces {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return true
		}
	}
	return false
}

// SplitNodeLabels separates labels into those the kubelet may set on its own
// node (RenderInput.Labels) and those only an admin may set, which the core
// applies through the API once the cluster is ready (for instance
// app.kubernetes.io/managed-by). Both results are non-nil.
func SplitNodeLabels(labels map[string]string) (kubelet, admin map[string]string) {
	kubelet, admin = map[string]string{}, map[string]string{}
	for k, v := range labels {
		if KubeletMaySet(k) {
			kubelet[k] = v
		} else {
			admin[k] = v
		}
	}
	return kubelet, admin
}

// ValidateLabel checks a node label's key and value with Kubernetes' own
// rules (an empty value is valid).
func ValidateLabel(k, v string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", k, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
	}
	return nil
}

// checkNodeLabel checks one node label for the kind config.
func checkNodeLabel(k, v string) error {
	if err := ValidateLabel(k, v); err != nil {
		return err
	}
	if !KubeletMaySet(k) {
		return fmt.Errorf("label %s: the kubelet refuses to set labels in the kubernetes.io and k8s.io namespaces on its own node (it would not start); set it after creation with admin credentials (see kind.SplitNodeLabels) or use another prefix", k)
	}
	return nil
}

// kindNameRE is kind v0.33.0's cluster name rule.
var kindNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9.-]+$`) })

// Validate checks c as `kind create cluster` would: it encodes c to YAML and
// decodes it strictly (unknown fields are errors), applies kind's defaults
// (on a copy) and runs the checks of kind v0.33.0's config validation — name,
// API server port, IP family, subnets, kube-proxy mode, node roles, images
// and port mappings, at least one control-plane node. kind's own Validate is
// internal to its module, hence this re-implementation. On top of kind's
// checks it refuses an extra port mapping that collides with kind's API
// server binding and extra mounts whose paths Docker's --volume syntax cannot
// carry.
func Validate(c *v1alpha4.Cluster) error {
	raw, err := Encode(c)
	if err != nil {
		return err
	}
	var d v1alpha4.Cluster
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("kind would not load the config: %w", err)
	}
	if d.Kind != ConfigKind || d.APIVersion != ConfigAPIVersion {
		return fmt.Errorf("kind and apiVersion are %q, %q; kind loads only %q, %q", d.Kind, d.APIVersion, ConfigKind, ConfigAPIVersion)
	}
	v1alpha4.SetDefaultsCluster(&d)

	var errs []error
	if !kindNameRE().MatchString(d.Name) {
		errs = append(errs, fmt.Errorf("name %q does not match %s", d.Name, kindNameRE()))
	}
	if p := d.Networking.APIServerPort; p != 0 && (p < -1 || p > 65535) {
		errs = append(errs, fmt.Errorf("networking.apiServerPort %d is not a port", p))
	}
	switch d.Networking.IPFamily {
	case v1alpha4.IPv4Family, v1alpha4.IPv6Family, v1alpha4.DualStackFamily:
	default:
		errs = append(errs, fmt.Errorf("networking.ipFamily %q is not ipv4, ipv6 or dual", d.Networking.IPFamily))
	}
	if a := d.Networking.APIServerAddress; net.ParseIP(a) == nil {
		errs = append(errs, fmt.Errorf("networking.apiServerAddress %q is not an IP address", a))
	}
	for _, s := range []struct{ field, value string }{
		{"networking.podSubnet", d.Networking.PodSubnet},
		{"networking.serviceSubnet", d.Networking.ServiceSubnet},
	} {
		if err := checkSubnets(s.value, d.Networking.IPFamily); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", s.field, s.value, err))
		}
	}
	switch d.Networking.KubeProxyMode {
	case v1alpha4.IPTablesProxyMode, v1alpha4.IPVSProxyMode, v1alpha4.NFTablesProxyMode, "none":
	default:
		errs = append(errs, fmt.Errorf("networking.kubeProxyMode %q is not iptables, ipvs, nftables or none", d.Networking.KubeProxyMode))
	}

	api := apiBinding(&d)
	controlPlanes := 0
	for i, n := range d.Nodes {
		if err := checkNode(n, api); err != nil {
			errs = append(errs, fmt.Errorf("nodes[%d]: %w", i, err))
		}
		if n.Role == v1alpha4.ControlPlaneRole {
			controlPlanes++
		}
	}
	if controlPlanes == 0 {
		errs = append(errs, errors.New("nodes: no control-plane node; kind needs at least one"))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

func checkNode(n v1alpha4.Node, api binding) error {
	var errs []error
	switch n.Role {
	case v1alpha4.ControlPlaneRole, v1alpha4.WorkerRole:
	default:
		errs = append(errs, fmt.Errorf("role %q is not control-plane or worker", n.Role))
	}
	if n.Image == "" {
		errs = append(errs, errors.New("image is empty"))
	}
	var bs []binding
	if n.Role == v1alpha4.ControlPlaneRole && api.pm.HostPort > 0 {
		bs = append(bs, api)
	}
	for i, pm := range n.ExtraPortMappings {
		if pm.HostPort < -1 || pm.HostPort > 65535 {
			errs = append(errs, fmt.Errorf("extraPortMappings[%d]: hostPort %d is not a port", i, pm.HostPort))
			continue
		}
		if pm.ContainerPort < -1 || pm.ContainerPort > 65535 {
			errs = append(errs, fmt.Errorf("extraPortMappings[%d]: containerPort %d is not a port", i, pm.ContainerPort))
		}
		if pm.ListenAddress != "" && net.ParseIP(pm.ListenAddress) == nil {
			errs = append(errs, fmt.Errorf("extraPortMappings[%d]: listenAddress %q is not an IP address", i, pm.ListenAddress))
			continue
		}
		if pm.HostPort <= 0 {
			continue // random host port: duplicates are fine
		}
		b := binding{owner: fmt.Sprintf("extraPortMappings[%d]", i), pm: pm}
		for _, o := range bs {
			if b.overlaps(o) {
				errs = append(errs, fmt.Errorf("%s (%s) collides with %s (%s)", b.owner, b, o.owner, o))
			}
		}
		bs = append(bs, b)
	}
	for i, m := range n.ExtraMounts {
		for _, p := range []struct{ field, value string }{{"hostPath", m.HostPath}, {"containerPath", m.ContainerPath}} {
			if !strings.HasPrefix(p.value, "/") || strings.ContainsAny(p.value, ":,") {
				errs = append(errs, fmt.Errorf("extraMounts[%d]: %s %q must be absolute and hold no ':' or ','", i, p.field, p.value))
			}
		}
	}
	return errors.Join(errs...)
}

// checkSubnets is kind's validateSubnets: one CIDR (two of different
// families for dual stack) of the cluster's family.
func checkSubnets(s string, family v1alpha4.ClusterIPFamily) error {
	var ps []netip.Prefix
	for _, c := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("not a CIDR: %w", err)
		}
		ps = append(ps, p)
	}
	switch {
	case family == v1alpha4.DualStackFamily:
		if len(ps) > 2 || (len(ps) == 2 && ps[0].Addr().Is4() == ps[1].Addr().Is4()) {
			return errors.New("dual stack needs one CIDR, or one IPv4 and one IPv6 CIDR")
		}
	case len(ps) > 1:
		return errors.New("single-stack networking allows one CIDR")
	case family == v1alpha4.IPv4Family && !ps[0].Addr().Is4():
		return errors.New("not an IPv4 CIDR")
	case family == v1alpha4.IPv6Family && ps[0].Addr().Is4():
		return errors.New("not an IPv6 CIDR")
	}
	return nil
}
