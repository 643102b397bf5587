// Package sdk is marina's public plugin SDK.
//
// A plugin is a program whose main calls Serve with a value that implements
// Plugin (who it is) and any subset of the hook interfaces (PostUpHook,
// PreClusterHook, PostClusterHook, PreClusterDeleteHook, PreDownHook,
// PreDestroyHook). marina starts the program as a child process and calls the
// hooks over gRPC (hashicorp/go-plugin); the SDK hides the handshake, the
// protocol, logging and panic recovery:
//
//	type addon struct{}
//
//	func (addon) Info() sdk.Info {
//		return sdk.Info{Name: "acme", Version: "1.0.0", Config: &Config{Replicas: 1}}
//	}
//
//	func (addon) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
//		var cfg Config
//		if err := req.Config(&cfg); err != nil {
//			return nil, err
//		}
//		req.Progress("installing acme in %s", req.Cluster.Name)
//		...
//		return &sdk.Result{}, nil
//	}
//
//	func main() { sdk.Serve(addon{}) }
//
// Hooks are declarations: they return what the host should apply (kind-config
// contributions, outputs for other plugins, host changes such as a resolver
// file) rather than changing the user's machine themselves. Every hook must
// be idempotent (marina re-runs them), must honour ctx (it carries the
// deadline and Ctrl-C), and must not write to stdout (logs go to stderr via
// Request.Logger).
//
// See docs/plugins.md for the author's guide.
package sdk

import (
	"context"
	"strings"
	"time"
)

// Protocol versions. The major is negotiated in the go-plugin handshake; the
// minor is reported by Describe: a host speaking 1.N runs plugins of 1.0..1.N.
const (
	ProtocolMajor = 1
	ProtocolMinor = 0
)

// Hook names a lifecycle hook.
type Hook string

// The lifecycle hooks, in the order a lab lives through them.
const (
	// PostUp runs after the VM, Docker and the bridge exist (marina up).
	PostUp Hook = "PostUp"
	// PreCluster runs before kind creates a cluster; it returns kind-config contributions.
	PreCluster Hook = "PreCluster"
	// PostCluster runs after a cluster is ready.
	PostCluster Hook = "PostCluster"
	// PreClusterDelete runs before a cluster is deleted: remove what was made for it.
	PreClusterDelete Hook = "PreClusterDelete"
	// PreDown runs before the VM stops (marina down).
	PreDown Hook = "PreDown"
	// PreDestroy runs before the VM and everything in it is destroyed (marina destroy).
	PreDestroy Hook = "PreDestroy"
)

// AllHooks lists every hook in lifecycle order.
var AllHooks = []Hook{PostUp, PreCluster, PostCluster, PreClusterDelete, PreDown, PreDestroy}

// IsClusterHook reports whether h is about one cluster (Request.Cluster is set).
func (h Hook) IsClusterHook() bool {
	return h == PreCluster || h == PostCluster || h == PreClusterDelete
}

// Capabilities a plugin may declare it needs (Info.Capabilities). marina
// gives a plugin what a capability unlocks only when the plugin declares it,
// and `marina plugin install` and `upgrade` ask the user to grant what a
// plugin declares: a plugin that does not declare CapDocker sees an empty
// Env.DockerHost, one that does not declare CapKubeconfig no kubeconfig, and
// a host change whose capability is not declared fails the hook. The
// environment of a plugin's process carries no DOCKER_* or KUBECONFIG
// variable either. See docs/plugins.md, "Capabilities".
const (
	// CapDocker: Env.DockerHost, the endpoint of the lab's Docker engine.
	CapDocker = "docker"
	// CapKubeconfig: Cluster.Kubeconfig and Cluster.KubeconfigPath, the
	// cluster's admin kubeconfig (cluster hooks from PostCluster on).
	CapKubeconfig = "kubeconfig"
	// CapHostResolver: Result.HostChanges with a Resolver, a DNS resolver
	// file on the user's machine (made by marina, with privileges).
	CapHostResolver = "host.resolver"
	// CapRegistryCredentials: the Username and Password of Env.Mirrors, the
	// credentials of the upstream registries, and the password in
	// Env.Proxy's URLs (other plugins see the mirrors and the proxy
	// without them).
	CapRegistryCredentials = "registry.credentials"
	// CapLabCA: Env.LabCA.Key, the private key of the lab's CA. With it a
	// plugin signs certificates for the lab's names (a cluster's
	// cert-manager issuer); every plugin sees the CA's certificate.
	CapLabCA = "lab.ca"
)

// Info describes a plugin. Name and Version are required.
type Info struct {
	// Name is the plugin's name: lower-case letters, digits and '-'.
	Name string
	// Version is the plugin's semantic version, e.g. "1.2.3" (no leading v).
	Version string
	// Description is one line shown by `marina plugin list` and `info`.
	Description string
	// Maintainer says who maintains the plugin.
	Maintainer string
	// Dependencies are plugins whose hooks must run before this plugin's
	// (and whose outputs this plugin receives).
	Dependencies []Dependency
	// Capabilities lists the host capabilities the plugin needs (Cap* constants).
	Capabilities []string
	// Outputs names the values the plugin publishes in Result.Outputs.
	Outputs []string
	// Timeouts are the default deadlines per hook (the user can override them);
	// hooks without one get DefaultTimeout.
	Timeouts map[Hook]time.Duration
	// Config is a pointer to the plugin's config struct, filled with its
	// defaults; nil means the plugin takes no config. Its JSON Schema is
	// derived from the struct (json tags, `doc:"..."` tags for descriptions).
	// If the struct has a method `Validate() []Diagnostic`, it is called after
	// decoding.
	Config any
}

// DefaultTimeout is the deadline of a hook whose plugin declares none.
const DefaultTimeout = 5 * time.Minute

// Dependency is a plugin this plugin runs after.
type Dependency struct {
	Name string
	// Version is a semver constraint on the dependency; empty means any.
	Version string
	// Optional dependencies order hooks when present but are not required.
	Optional bool
}

// Plugin is what every plugin implements: who it is.
type Plugin interface {
	Info() Info
}

// The hook interfaces: a plugin implements any subset.
type (
	// PostUpHook runs after the VM, Docker and the bridge exist.
	PostUpHook interface {
		PostUp(ctx context.Context, req *Request) (*Result, error)
	}
	// PreClusterHook runs before kind creates a cluster.
	PreClusterHook interface {
		PreCluster(ctx context.Context, req *Request) (*Result, error)
	}
	// PostClusterHook runs after a cluster is ready.
	PostClusterHook interface {
		PostCluster(ctx context.Context, req *Request) (*Result, error)
	}
	// PreClusterDeleteHook runs before a cluster is deleted.
	PreClusterDeleteHook interface {
		PreClusterDelete(ctx context.Context, req *Request) (*Result, error)
	}
	// PreDownHook runs before the VM stops.
	PreDownHook interface {
		PreDown(ctx context.Context, req *Request) (*Result, error)
	}
	// PreDestroyHook runs before the VM is destroyed.
	PreDestroyHook interface {
		PreDestroy(ctx context.Context, req *Request) (*Result, error)
	}
)

// HookFunc is the signature every hook method has.
type HookFunc func(ctx context.Context, req *Request) (*Result, error)

// Hooks returns the hooks p implements, in lifecycle order, with their functions.
func Hooks(p Plugin) map[Hook]HookFunc {
	m := map[Hook]HookFunc{}
	if h, ok := p.(PostUpHook); ok {
		m[PostUp] = h.PostUp
	}
	if h, ok := p.(PreClusterHook); ok {
		m[PreCluster] = h.PreCluster
	}
	if h, ok := p.(PostClusterHook); ok {
		m[PostCluster] = h.PostCluster
	}
	if h, ok := p.(PreClusterDeleteHook); ok {
		m[PreClusterDelete] = h.PreClusterDelete
	}
	if h, ok := p.(PreDownHook); ok {
		m[PreDown] = h.PreDown
	}
	if h, ok := p.(PreDestroyHook); ok {
		m[PreDestroy] = h.PreDestroy
	}
	return m
}

// Env describes the environment every hook runs in.
type Env struct {
	HostVersion string
	VMName      string
	// Driver is "lima" or "host".
	Driver string
	// HostOS is the user's OS ("darwin", "linux").
	HostOS string
	// DockerHost is the Docker endpoint, e.g. unix:///Users/me/.marina.docker.sock.
	DockerHost string
	// NetworkName is the shared docker network ("kind"), BridgeCIDR its subnet,
	// Gateway its gateway and DynamicIPRange the range docker assigns from.
	NetworkName    string
	BridgeCIDR     string
	Gateway        string
	DynamicIPRange string
	// DNSZone is the local zone (demo.internal); DNSEtcdIP and DNSServerIP its servers.
	DNSZone     string
	DNSEtcdIP   string
	DNSServerIP string
	// StateDir is a directory this plugin owns for persistent files.
	StateDir string
	// Images are the effective images by config key (e.g. "registry", "dnsEtcd").
	Images map[string]string
	// CustomDNSResolvers are extra domains to forward.
	CustomDNSResolvers []DomainResolvers
	// Mirrors are the configured registry mirrors.
	Mirrors []Mirror
	// RegistryCacheStorage is "host" or "guest"; RegistryCacheDir the host cache directory.
	RegistryCacheStorage string
	RegistryCacheDir     string
	// Proxy is the HTTP(S) proxy the lab's traffic to the outside takes
	// (zero: none). A plugin that runs something reaching the outside
	// (a mirror's upstream, a download) gives it Proxy.Env().
	Proxy Proxy
	// ExtraCAs are the company's CA certificates (trust.extraCAs), PEM
	// ("" none): what runs TLS connections to the outside for the plugin
	// trusts them beside the public roots (a TLS-intercepting proxy's CA).
	ExtraCAs string
	// LabCA is the lab's own CA (made by `marina up`, name-constrained to
	// DNSZone and BridgeCIDR; zero before the first up): its certificate for
	// every plugin, its key only for plugins that declare CapLabCA.
	LabCA LabCA
}

// LabCA is the lab's certificate authority, PEM encoded. Workloads that
// serve the lab's names with certificates it signs are trusted wherever
// the user ran `marina trust install`.
type LabCA struct {
	// Cert is the CA certificate.
	Cert string
	// Key is the CA's private key (PKCS #8): "" unless the plugin declares
	// CapLabCA.
	Key string
}

// Proxy is a corporate network's HTTP(S) proxy: the config's proxy
// section, else the environment marina runs in. NoProxy lists what
// bypasses it, the lab's own addresses included (the bridge CIDR, the
// slots' subnets, the zone, the mirrors): pass it along whole. The URLs'
// passwords reach only plugins that declare CapRegistryCredentials.
type Proxy struct {
	HTTP    string
	HTTPS   string
	NoProxy []string
}

// Set reports whether a proxy is in use.
func (p Proxy) Set() bool { return p.HTTP != "" || p.HTTPS != "" }

// Env returns the variables a program behind the proxy reads: HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY and their lower-case twins; none without a proxy.
func (p Proxy) Env() []string {
	if !p.Set() {
		return nil
	}
	var env []string
	for _, kv := range [][2]string{{"HTTP_PROXY", p.HTTP}, {"HTTPS_PROXY", p.HTTPS}, {"NO_PROXY", strings.Join(p.NoProxy, ",")}} {
		if kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
		}
	}
	return env
}

// DomainResolvers forwards one domain to resolvers.
type DomainResolvers struct {
	Domain    string
	Resolvers []string
}

// Mirror is a pull-through registry mirror.
type Mirror struct {
	Name      string
	Port      int
	RemoteURL string
	Username  string
	Password  string
}

// Cluster describes the cluster a cluster hook is about.
type Cluster struct {
	Name          string
	Slot          int
	APIPort       int
	ServiceSubnet string
	PodSubnet     string
	MetalLBPools  []AddressRange
	NodeVersion   string
	NodeImage     string
	Labels        map[string]string
	// Kubeconfig is the admin kubeconfig (PostCluster and later).
	Kubeconfig     []byte
	KubeconfigPath string
	Workers        int
	// Mirrors are the registry mirror names this cluster uses.
	Mirrors []string
}

// AddressRange is an inclusive IPv4 range.
type AddressRange struct{ First, Last string }

// String returns "first-last", as MetalLB writes ranges.
func (r AddressRange) String() string { return r.First + "-" + r.Last }

// Result is what a hook declares; the host applies it.
type Result struct {
	// Outputs are values for plugins that depend on this one.
	Outputs map[string]string
	// Kind holds PreCluster contributions to the kind config.
	Kind *KindContribution
	// HostChanges are changes on the user's machine that the host makes.
	HostChanges []HostChange
	// Warnings are shown to the user; they do not fail the hook.
	Warnings []Diagnostic
	// Steady (PostUp only, optional) names what proves the hook's work is
	// still in place. While the hook's inputs (the plugin's binary, config,
	// environment and dependencies' outputs) are unchanged and every
	// container listed still exists, runs and has the same spec, marina
	// skips the next PostUp and reuses this result (outputs, host changes
	// and warnings) without starting the plugin; `marina up --reconcile`
	// always runs it. Leave it nil for a PostUp that checks something else
	// (a file, a remote service) every time. A Steady with no containers
	// says the result depends on the inputs alone.
	Steady *Steady
}

// Steady is what proves a PostUp's work is still in place (Result.Steady).
type Steady struct {
	Containers []SteadyContainer `json:"containers"`
}

// SteadyContainer is a container a PostUp created or checked: it must still
// exist with this ID, be running, and carry this spec label (the
// marina.dev/spec label sdk/container's Ensure sets; Outcome.Steady fills
// both).
type SteadyContainer struct {
	ID   string `json:"id"`
	Spec string `json:"spec"`
}

// KindContribution is merged into the kind config of the cluster being created.
type KindContribution struct {
	// ContainerdConfigPatches are TOML fragments for containerd's config.
	ContainerdConfigPatches []string
	// KubeadmConfigPatches are YAML fragments for kubeadm, applied to every node.
	KubeadmConfigPatches []string
	// NodeFiles are placed in every node.
	NodeFiles []NodeFile
	// NodeLabels are set on every node.
	NodeLabels map[string]string
	// PortMappings are added to the control-plane node.
	PortMappings []PortMapping
}

// NodeFile is a file placed in every node.
type NodeFile struct {
	Path    string
	Content []byte
	// Mode is the permission bits; 0 means 0644.
	Mode uint32
}

// PortMapping maps a host port to a node port.
type PortMapping struct {
	ContainerPort int
	HostPort      int
	ListenAddress string
	// Protocol is "TCP" (default), "UDP" or "SCTP".
	Protocol string
}

// HostChange is a change on the user's machine that only the host may make.
// Exactly one field other than Reason is set.
type HostChange struct {
	Resolver *ResolverChange
	// Reason is shown to the user before any privileged command runs.
	Reason string
}

// ResolverChange sends a DNS domain to nameservers on the host.
type ResolverChange struct {
	Domain      string
	Nameservers []string
	// Remove undoes the change instead of ensuring it.
	Remove bool
}

// Severity of a Diagnostic.
type Severity string

// The severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is a problem or warning about a plugin's config or a hook.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail,omitempty"`
	// Path is the config field concerned, e.g. "pools[0].name".
	Path string `json:"path,omitempty"`
}

// Errorf returns an error Diagnostic for the config field at path.
func Errorf(path, format string, args ...any) Diagnostic {
	return Diagnostic{Severity: SeverityError, Path: path, Summary: sprintf(format, args...)}
}
