package config

import (
	"slices"
	"time"
)

// Pinned versions and images. The kind node version is the one the kind
// library marina builds against (sigs.k8s.io/kind v0.33.0) defaults to.
const (
	DefaultVMName           = "marina"
	DefaultBridgeCIDR       = "172.30.0.0/16"
	DefaultNetworkName      = "kind"
	DefaultZone             = "demo.internal"
	DefaultNodeVersion      = "v1.37.0"
	DefaultMetalLBVersion   = "v0.16.2"
	DefaultRegistryImage    = "docker.io/library/registry:3.0.0"
	DefaultDNSEtcdImage     = "quay.io/coreos/etcd:v3.7.3"
	DefaultDNSServerImage   = "docker.io/coredns/coredns:1.15.0"
	DefaultExternalDNSImage = "registry.k8s.io/external-dns/external-dns:v0.23.0"
	// DefaultCertManagerControllerImage is cert-manager's controller, which
	// the certmanager plugin runs in every cluster.
	DefaultCertManagerControllerImage = "quay.io/jetstack/cert-manager-controller:v1.21.1"
	DefaultCacheStorage               = "host"
)

// BuiltinPlugins are the plugins that ship inside the marina binary, enabled
// by default except those in OptInBuiltins.
var BuiltinPlugins = []string{"registries", "localdns", "metallb", "coredns", "externaldns", "certmanager"}

// OptInBuiltins are the built-in plugins a user enables with one line
// (`marina plugin enable NAME`, or plugins.NAME.enabled: true). certmanager
// is one: it runs a controller in every cluster, and the certificates it
// issues are trusted by the user's machine only after the other opt-in,
// `marina trust install` (docs/networking.md, "HTTPS by name").
var OptInBuiltins = []string{"certmanager"}

// DefaultMirrors returns the default pull-through mirrors (a fresh slice each call).
func DefaultMirrors() []Mirror {
	return []Mirror{
		{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io"},
		{Name: "registry-quayio", Port: 5010, RemoteURL: "https://quay.io"},
		{Name: "registry-gcrio", Port: 5020, RemoteURL: "https://gcr.io"},
		{Name: "registry-us-docker-pkgdev", Port: 5040, RemoteURL: "https://us-docker.pkg.dev"},
		{Name: "registry-us-central1-docker-pkgdev", Port: 5050, RemoteURL: "https://us-central1-docker.pkg.dev"},
	}
}

// Default returns the built-in configuration (a fresh value each call).
func Default() *Config {
	plugins := make(map[string]PluginConfig, len(BuiltinPlugins))
	for _, name := range BuiltinPlugins {
		plugins[name] = PluginConfig{Enabled: !slices.Contains(OptInBuiltins, name)}
	}
	return &Config{
		VM: VM{
			Name:   DefaultVMName,
			Driver: "auto",
			CPUs:   4,
			Memory: "10GiB",
			Disk:   "40GiB",
			// Lima's own default (limactl start --timeout).
			StartTimeout: 10 * time.Minute,
		},
		Network: Network{
			Name:                 DefaultNetworkName,
			BridgeCIDR:           DefaultBridgeCIDR,
			DisablePortMirroring: true,
		},
		Kind: Kind{
			NodeVersion:          DefaultNodeVersion,
			MetalLBVersion:       DefaultMetalLBVersion,
			CustomDNSResolvers:   []DomainResolver{},
			AutoMergeKubeconfig:  true,
			AutoRemoveKubeconfig: true,
		},
		Registries: Registries{
			CacheStorage: DefaultCacheStorage,
			Mirrors:      DefaultMirrors(),
		},
		DNS: DNS{
			Zone:     DefaultZone,
			EtcdIP:   "172.30.255.52",
			ServerIP: "172.30.255.53",
		},
		Plugins:       plugins,
		PluginTrust:   PluginTrust{Policy: TrustWarn, Keys: []TrustedKey{}, Capabilities: []CapabilityLimit{}},
		PluginSources: []string{},
		Proxy:         Proxy{NoProxy: []string{}},
		Trust:         Trust{ExtraCAs: []string{}},
		Images: Images{
			Registry:    DefaultRegistryImage,
			DNSEtcd:     DefaultDNSEtcdImage,
			DNSServer:   DefaultDNSServerImage,
			ExternalDNS: DefaultExternalDNSImage,

			CertManagerController: DefaultCertManagerControllerImage,
		},
	}
}

// IsBuiltinName reports whether name is one of the built-in plugins.
func IsBuiltinName(name string) bool {
	for _, b := range BuiltinPlugins {
		if b == name {
			return true
		}
	}
	return false
}
