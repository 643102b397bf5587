// Package config owns marina's configuration: the schema, its defaults, strict
// decoding of ~/.marina/config.yaml, the layering of file, MARINA_* environment
// variables and --set flags (through viper), validation that reports every
// problem at once with field paths, and the generated reference documentation.
//
// Precedence, lowest to highest: built-in default < config file < MARINA_*
// environment variable < --set flag. Every value of the effective config
// remembers where it came from (see Loaded.Sources).
package config

import "time"

// Config is marina's whole configuration. Field tags drive everything: `yaml`
// names the key (viper decodes with the same tag), `doc` documents it for
// `marina config init` and docs/config.md.
type Config struct {
	VM         VM                      `yaml:"vm" doc:"The virtual machine that hosts Docker and every kind cluster."`
	Network    Network                 `yaml:"network" doc:"The shared docker bridge and how the host reaches it."`
	Kind       Kind                    `yaml:"kind" doc:"Defaults for kind clusters."`
	Registries Registries              `yaml:"registries" doc:"Pull-through registry mirrors on the bridge."`
	DNS        DNS                     `yaml:"dns" doc:"The local DNS zone served on the bridge."`
	Plugins    map[string]PluginConfig `yaml:"plugins" doc:"Per-plugin settings, keyed by plugin name (built-in or installed)."`
	// PluginTrust says whose plugin signatures are trusted, and what
	// happens to a plugin that no trusted key signed.
	PluginTrust PluginTrust `yaml:"pluginTrust" doc:"Signature policy for installed plugins: the keys you trust and what to do with a plugin no trusted key signed."`
	// PluginSources are where `marina plugin search` and `plugin install
	// NAME` look for plugins.
	PluginSources []string `yaml:"pluginSources" doc:"OCI registry namespaces where marina plugin search and plugin install NAME[@CONSTRAINT] look for plugins, e.g. oci://registry.example.com/marina-plugins (each repository under it is a plugin)."`
	Images        Images   `yaml:"images" doc:"Every container image marina runs; override to use a mirror or a locally built image."`
	// Trust is what the lab trusts beyond the public roots.
	Trust Trust `yaml:"trust" doc:"Certificate authorities the lab trusts beyond the public roots: your company's (a TLS-intercepting proxy's, an internal registry's)."`
	// Proxy is the company's HTTP(S) proxy for the lab's traffic out.
	Proxy Proxy `yaml:"proxy" doc:"The HTTP(S) proxy the lab's traffic to the outside takes (the VM's Docker engine, the registry mirrors' upstreams, the kind nodes); each key empty: the environment marina runs in, as kind and colima read it."`
}

// Trust lists the extra CAs.
type Trust struct {
	ExtraCAs []string `yaml:"extraCAs" doc:"PEM files of CA certificates to trust everywhere the lab makes TLS connections out: the VM's trust store (the Docker engine pulls through the proxy), the registry mirrors (their upstreams) and every kind node; ~/ is your home directory. Changing the list updates them on the next marina up."`
}

// Proxy is the HTTP(S) proxy of a corporate network.
type Proxy struct {
	HTTP    string   `yaml:"http" doc:"Proxy URL for plain HTTP, e.g. http://proxy.corp.example:3128; empty: $HTTP_PROXY (or $http_proxy)."`
	HTTPS   string   `yaml:"https" doc:"Proxy URL for HTTPS; empty: $HTTPS_PROXY (or $https_proxy)."`
	NoProxy []string `yaml:"noProxy" doc:"Hosts, domains (corp.example covers its subdomains) and CIDRs that bypass the proxy; empty: $NO_PROXY (or $no_proxy). marina always adds everything that is the lab's: localhost, the bridge CIDR, every slot's service and pod subnets, the zone and the mirrors."`
}

// VM configures the virtual machine.
type VM struct {
	Name    string `yaml:"name" doc:"Lima instance name; also names the Docker context and the socket ~/.<name>.docker.sock."`
	Driver  string `yaml:"driver" doc:"auto (lima on macOS, host on Linux), lima (a Lima VM), or host (no VM: Docker on this machine)."`
	CPUs    int    `yaml:"cpus" doc:"Virtual CPUs of the VM."`
	Memory  string `yaml:"memory" doc:"Memory of the VM, e.g. 10GiB."`
	Disk    string `yaml:"disk" doc:"Disk size of the VM, e.g. 40GiB."`
	Rosetta bool   `yaml:"rosetta" doc:"Enable Rosetta for amd64 binaries in the VM (Apple silicon only)."`
	// StartTimeout bounds a VM boot (Lima's `limactl start --timeout`).
	StartTimeout time.Duration `yaml:"startTimeout" doc:"How long to wait for the VM to boot and pass its readiness checks (lima driver), e.g. 10m; Ctrl-C stops the wait, not the VM."`
}

// Network configures the shared docker bridge.
type Network struct {
	Name                 string `yaml:"name" doc:"Name of the shared docker bridge network every cluster and service joins (kind's default network is 'kind')."`
	BridgeCIDR           string `yaml:"bridgeCIDR" doc:"Subnet of the shared docker network 'kind'; must be an IPv4 /16. The host routes it to the VM."`
	DisablePortMirroring bool   `yaml:"disablePortMirroring" doc:"Reach API servers on the VM's own IP instead of Lima's 127.0.0.1 port mirroring (fixed when the VM is created)."`
}

// Kind configures cluster defaults.
type Kind struct {
	NodeVersion          string           `yaml:"nodeVersion" doc:"Kubernetes version of kind node images (kindest/node:<version>)."`
	MetalLBVersion       string           `yaml:"metalLBVersion" doc:"MetalLB version installed in every cluster."`
	CustomDNSResolvers   []DomainResolver `yaml:"customDNSResolvers" doc:"Extra domains that each cluster's CoreDNS forwards to the given resolvers."`
	AutoMergeKubeconfig  bool             `yaml:"autoMergeKubeconfig" doc:"Merge a new cluster's kubeconfig into ~/.kube/config."`
	AutoRemoveKubeconfig bool             `yaml:"autoRemoveKubeconfig" doc:"Remove a deleted cluster's entries from ~/.kube/config."`
}

// DomainResolver forwards one DNS domain to a list of resolvers.
type DomainResolver struct {
	Domain    string   `yaml:"domain" doc:"DNS domain to forward, e.g. example.dev."`
	Resolvers []string `yaml:"resolvers" doc:"Resolver addresses (IP or IP:port)."`
}

// Registries configures the pull-through mirrors.
type Registries struct {
	CacheStorage string   `yaml:"cacheStorage" doc:"Where mirrors cache blobs: host (survives destroy) or guest (wiped by destroy)."`
	Mirrors      []Mirror `yaml:"mirrors" doc:"Pull-through mirrors; omit for the defaults, [] for none."`
}

// Mirror is one pull-through registry mirror.
type Mirror struct {
	Name      string `yaml:"name" doc:"Container name on the bridge; must not look like a hostname (no '.' or ':')."`
	Port      int    `yaml:"port" doc:"Port the mirror listens on."`
	RemoteURL string `yaml:"remoteURL" doc:"Upstream registry URL, e.g. https://quay.io."`
	Username  string `yaml:"username,omitempty" doc:"Upstream user name (optional)."`
	Password  string `yaml:"password,omitempty" doc:"Upstream password or token (optional; never logged)."`
}

// DNS configures the local DNS zone.
type DNS struct {
	Zone     string `yaml:"zone" doc:"DNS zone served locally and resolved from the host."`
	EtcdIP   string `yaml:"etcdIP" doc:"Address of the etcd container that stores the zone's records (default: <bridge>.255.52)."`
	ServerIP string `yaml:"serverIP" doc:"Address of the CoreDNS container that answers for the zone (default: <bridge>.255.53)."`
}

// PluginConfig selects and configures one plugin.
type PluginConfig struct {
	Enabled bool           `yaml:"enabled" doc:"Run this plugin's hooks."`
	Version string         `yaml:"version,omitempty" doc:"Semver constraint selecting an installed version, e.g. ^1.2."`
	Timeout time.Duration  `yaml:"timeout,omitempty" doc:"Deadline for each hook of this plugin, e.g. 5m (default: the plugin's own)."`
	Config  map[string]any `yaml:"config,omitempty" doc:"The plugin's own settings, checked against the schema it declares."`
}

// The pluginTrust policies.
const (
	TrustWarn    = "warn"
	TrustEnforce = "enforce"
)

// PluginTrust is the signature policy for installed plugins.
type PluginTrust struct {
	Policy string       `yaml:"policy" doc:"warn: install and run a plugin no trusted key signed, and say so (plugin install, list, verify); enforce: refuse to install or run it."`
	Keys   []TrustedKey `yaml:"keys" doc:"Public keys whose signatures you trust (marina plugin keygen writes a key pair)."`
	// Capabilities cap what the plugins of some sources may declare.
	Capabilities []CapabilityLimit `yaml:"capabilities" doc:"Caps on the capabilities plugins may declare, by source: a plugin from a source a rule covers may declare only what the rule allows (every covering rule), or it is refused at install and at launch."`
}

// CapabilityLimit caps the capabilities of the plugins from some sources.
type CapabilityLimit struct {
	Sources []string `yaml:"sources" doc:"The plugin sources the rule covers, as prefixes (e.g. oci://registry.example.com/contrib/); empty: every installed plugin (built-ins are not covered)."`
	Allow   []string `yaml:"allow" doc:"The capabilities those plugins may declare: docker, kubeconfig, host.resolver, registry.credentials, lab.ca; empty: none."`
}

// TrustedKey is one trusted public key.
type TrustedKey struct {
	Name      string   `yaml:"name" doc:"A name for the key, shown as 'signed by NAME'."`
	PublicKey string   `yaml:"publicKey" doc:"The ed25519 public key: marina-ed25519-pub:BASE64, as marina plugin keygen writes it."`
	Sources   []string `yaml:"sources" doc:"The plugin sources the key is trusted for, as prefixes (e.g. oci://registry.example.com/team/); empty: every source."`
}

// Images lists every container image marina runs.
type Images struct {
	KindNode          string `yaml:"kindNode" doc:"kind node image; empty means kindest/node:<kind.nodeVersion>."`
	Registry          string `yaml:"registry" doc:"Image of the pull-through registry mirrors."`
	DNSEtcd           string `yaml:"dnsEtcd" doc:"Image of the local DNS etcd."`
	DNSServer         string `yaml:"dnsServer" doc:"Image of the local DNS CoreDNS server."`
	MetalLBController string `yaml:"metallbController" doc:"MetalLB controller image; empty means quay.io/metallb/controller:<kind.metalLBVersion>."`
	MetalLBSpeaker    string `yaml:"metallbSpeaker" doc:"MetalLB speaker image; empty means quay.io/metallb/speaker:<kind.metalLBVersion>."`
	ExternalDNS       string `yaml:"externalDNS" doc:"ExternalDNS image deployed in every cluster."`
	// CertManagerController is run by the opt-in certmanager plugin.
	CertManagerController string `yaml:"certManagerController" doc:"cert-manager controller image deployed in every cluster by the certmanager plugin (opt-in)."`
}
