package localdns

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
)

// Image keys in Env.Images and the images used when a key is absent.
const (
	ImageKeyEtcd       = "dnsEtcd"
	ImageKeyServer     = "dnsServer"
	DefaultEtcdImage   = "quay.io/coreos/etcd:v3.7.3"
	DefaultServerImage = "docker.io/coredns/coredns:1.15.0"
)

// Paths inside the etcd container. The upstream image (quay.io/coreos/etcd)
// has no entrypoint and its binaries in /usr/local/bin; marina's test image
// has the same layout with etcd as entrypoint. Setting the entrypoint to the
// binary's path works with both, and with any image laid out like upstream.
const (
	etcdBinary  = "/usr/local/bin/etcd"
	etcdctlPath = "/usr/local/bin/etcdctl"
	// etcdDataMount is where the data volume is mounted; the data directory
	// is a subdirectory, so etcd creates it with its own permissions.
	etcdDataMount = "/var/lib/etcd"
	etcdDataDir   = etcdDataMount + "/data"
	etcdName      = "marina-dns"
)

// Output keys published by PostUp for plugins that depend on localdns
// (externaldns writes records to OutputEtcdEndpoint; coredns forwards
// OutputZone to OutputDNSServer).
const (
	OutputEtcdEndpoint = "etcdEndpoint"
	OutputDNSServer    = "dnsServer"
	OutputZone         = "zone"
)

// Components, the values of LabelComponent.
const (
	componentEtcd   = "localdns-etcd"
	componentServer = "localdns-server"
)

// lab is everything the hooks need, derived from the request and checked
// before anything is contacted.
type lab struct {
	cfg         Config
	zone        string
	etcdIP      netip.Addr
	serverIP    netip.Addr
	network     string
	etcdImage   string
	serverImage string
}

// newLab reads the config and the environment and checks them; every error
// names the setting to change.
func newLab(req *sdk.Request) (*lab, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	env := req.Env
	zone, err := parseZone(env.DNSZone)
	if err != nil {
		return nil, err
	}
	var bridge netip.Prefix
	if env.BridgeCIDR != "" {
		if bridge, err = netip.ParsePrefix(env.BridgeCIDR); err != nil {
			return nil, fmt.Errorf("the bridge network %q is not a CIDR such as 172.30.0.0/16; fix network.bridgeCIDR in ~/.marina/config.yaml", env.BridgeCIDR)
		}
	}
	addr := func(key, val string) (netip.Addr, error) {
		a, err := netip.ParseAddr(val)
		if err != nil || !a.Is4() {
			return netip.Addr{}, fmt.Errorf("dns.%s %q is not an IPv4 address; fix: set dns.%s in ~/.marina/config.yaml to an address on the bridge such as 172.30.255.52", key, val, key)
		}
		if bridge.IsValid() && !bridge.Contains(a) {
			return netip.Addr{}, fmt.Errorf("dns.%s %s is not on the bridge network %s, so no container can have it; fix: set dns.%s to an address inside %s (default <bridge>.255.52 / .53)", key, a, bridge, key, bridge)
		}
		return a, nil
	}
	etcdIP, err := addr("etcdIP", env.DNSEtcdIP)
	if err != nil {
		return nil, err
	}
	serverIP, err := addr("serverIP", env.DNSServerIP)
	if err != nil {
		return nil, err
	}
	if etcdIP == serverIP {
		return nil, fmt.Errorf("dns.etcdIP and dns.serverIP are both %s; the etcd and CoreDNS containers need an address each (default <bridge>.255.52 and .255.53)", etcdIP)
	}
	if env.NetworkName == "" {
		return nil, errors.New("the environment names no Docker network (Env.NetworkName is empty): marina must pass the bridge network the clusters use")
	}
	l := &lab{cfg: cfg, zone: zone, etcdIP: etcdIP, serverIP: serverIP, network: env.NetworkName,
		etcdImage: DefaultEtcdImage, serverImage: DefaultServerImage}
	if img := strings.TrimSpace(env.Images[ImageKeyEtcd]); img != "" {
		l.etcdImage = img
	}
	if img := strings.TrimSpace(env.Images[ImageKeyServer]); img != "" {
		l.serverImage = img
	}
	return l, nil
}

// labels are the labels of one of the plugin's containers.
func (l *lab) labels(component string) map[string]string {
	m := map[string]string{LabelComponent: component}
	for k, v := range l.cfg.Labels {
		if _, reserved := m[k]; !reserved {
			m[k] = v
		}
	}
	return m
}

// etcdSpec is the etcd container: one member, data in a named volume so the
// records survive the container's recreation, clients on <etcdIP>:2379.
func (l *lab) etcdSpec() container.Spec {
	return container.Spec{
		Name:       l.cfg.EtcdContainer,
		Image:      l.etcdImage,
		Entrypoint: []string{etcdBinary},
		Cmd: []string{
			"--name", etcdName,
			"--data-dir", etcdDataDir,
			"--listen-client-urls", "http://0.0.0.0:2379",
			"--advertise-client-urls", etcdEndpoint(l.etcdIP),
			// The single member's peer URL stays on loopback: it never
			// changes with the container's address, so the data directory
			// stays valid when dns.etcdIP changes.
			"--listen-peer-urls", "http://127.0.0.1:2380",
			"--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", etcdName + "=http://127.0.0.1:2380",
			// ExternalDNS rewrites records as Services change: keep the
			// revision history from growing without bound.
			"--auto-compaction-mode", "periodic",
			"--auto-compaction-retention", "1h",
		},
		Labels:  l.labels(componentEtcd),
		Network: l.network,
		IP:      l.etcdIP.String(),
		Mounts:  []container.Mount{{Type: "volume", Source: l.cfg.etcdVolume(), Target: etcdDataMount}},
		Restart: "always",
	}
}

// corefile renders the CoreDNS configuration.
func (l *lab) corefile() ([]byte, error) {
	return serverCorefile(l.zone, l.etcdIP, serverOptions{CacheSeconds: l.cfg.CacheSeconds, LogQueries: l.cfg.LogQueries}).render()
}

// serverSpec is the CoreDNS container, its Corefile placed in it before it
// starts (a changed Corefile changes the spec's hash: the container is
// recreated).
func (l *lab) serverSpec() (container.Spec, error) {
	cf, err := l.corefile()
	if err != nil {
		return container.Spec{}, err
	}
	return container.Spec{
		Name:    l.cfg.ServerContainer,
		Image:   l.serverImage,
		Cmd:     []string{"-conf", CorefilePath},
		Labels:  l.labels(componentServer),
		Network: l.network,
		IP:      l.serverIP.String(),
		Files:   []container.File{{Path: CorefilePath, Content: cf, Mode: 0o644}},
		Restart: "always",
	}, nil
}

// outputs are what PostUp publishes for dependent plugins.
func (l *lab) outputs() map[string]string {
	return map[string]string{
		OutputEtcdEndpoint: etcdEndpoint(l.etcdIP),
		OutputDNSServer:    l.serverIP.String(),
		OutputZone:         l.zone,
	}
}

// resolverChange is the host change that sends the zone to the server
// (remove: undo it).
func (l *lab) resolverChange(remove bool) sdk.HostChange {
	reason := fmt.Sprintf("resolve %s on this machine through marina's local DNS server at %s (the names ExternalDNS publishes for your clusters)", l.zone, l.serverIP)
	if remove {
		reason = fmt.Sprintf("stop sending %s lookups to %s: marina's local DNS is being removed", l.zone, l.serverIP)
	}
	return sdk.HostChange{
		Resolver: &sdk.ResolverChange{Domain: l.zone, Nameservers: []string{l.serverIP.String()}, Remove: remove},
		Reason:   reason,
	}
}

// warnings are the diagnostics PostUp adds to a successful result.
func (l *lab) warnings() []sdk.Diagnostic {
	if !isMDNSZone(l.zone) {
		return nil
	}
	return []sdk.Diagnostic{{
		Severity: sdk.SeverityWarning,
		Summary:  fmt.Sprintf("dns.zone %s is under .local, which macOS and Avahi use for multicast DNS (Bonjour): sending it to marina's server can break local device discovery", l.zone),
		Detail:   "Choose a zone under .internal (reserved for private use), such as demo.internal.",
	}}
}
