// The hook environment: HookEnv turns marina's configuration and the facts of the running
// lab into the typed context plugins receive: sdk.Env for every hook and
// sdk.Cluster for cluster hooks. It is the single place where config keys
// map to what plugins see, so the contract stays in one file.

package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk"
)

// Image keys of sdk.Env.Images, one per entry of the config's images section.
const (
	ImageKindNode          = "kindNode"
	ImageRegistry          = "registry"
	ImageDNSEtcd           = "dnsEtcd"
	ImageDNSServer         = "dnsServer"
	ImageMetalLBController = "metallbController"
	ImageMetalLBSpeaker    = "metallbSpeaker"
	ImageExternalDNS       = "externalDNS"
	// ImageCertManagerController is cert-manager's controller (the
	// certmanager plugin).
	ImageCertManagerController = "certManagerController"
)

// Runtime holds the facts that come from the running lab rather than the
// config.
type Runtime struct {
	// HostVersion is marina's version.
	HostVersion string
	// Driver is the VM driver in use: "lima" or "host".
	Driver string
	// HostOS is the user's OS; empty means this process's GOOS.
	HostOS string
	// DockerHost is the Docker endpoint as seen from the user's machine.
	DockerHost string
	// RegistryCacheDir is the host registry cache directory, at the same
	// path on the user's machine and in the Docker host.
	RegistryCacheDir string
	// Getenv reads the environment marina runs in (the proxy's defaults);
	// nil is os.Getenv.
	Getenv func(string) string
	// Home expands ~/ in trust.extraCAs; "" is the user's home directory.
	Home string
	// CADir holds the lab's CA (sdk.Env.LabCA); "" or a directory without
	// a CA gives plugins none.
	CADir string
}

// Env builds the environment of every hook from cfg (already validated) and rt.
func HookEnv(cfg *config.Config, rt Runtime) (sdk.Env, error) {
	bridge, err := netip.ParsePrefix(cfg.Network.BridgeCIDR)
	if err != nil {
		return sdk.Env{}, fmt.Errorf("network.bridgeCIDR %q: %w", cfg.Network.BridgeCIDR, err)
	}
	dynamic, err := slot.DockerIPRange(bridge)
	if err != nil {
		return sdk.Env{}, fmt.Errorf("network.bridgeCIDR: %w", err)
	}
	hostOS := rt.HostOS
	if hostOS == "" {
		hostOS = runtime.GOOS
	}
	env := sdk.Env{
		HostVersion:          rt.HostVersion,
		VMName:               cfg.VM.Name,
		Driver:               rt.Driver,
		HostOS:               hostOS,
		DockerHost:           rt.DockerHost,
		NetworkName:          cfg.Network.Name,
		BridgeCIDR:           bridge.String(),
		Gateway:              Gateway(bridge).String(),
		DynamicIPRange:       dynamic.String(),
		DNSZone:              cfg.DNS.Zone,
		DNSEtcdIP:            cfg.DNS.EtcdIP,
		DNSServerIP:          cfg.DNS.ServerIP,
		Images:               Images(cfg),
		RegistryCacheStorage: cfg.Registries.CacheStorage,
		RegistryCacheDir:     rt.RegistryCacheDir,
	}
	for _, d := range cfg.Kind.CustomDNSResolvers {
		env.CustomDNSResolvers = append(env.CustomDNSResolvers, sdk.DomainResolvers{Domain: d.Domain, Resolvers: append([]string(nil), d.Resolvers...)})
	}
	for _, m := range cfg.Registries.Mirrors {
		env.Mirrors = append(env.Mirrors, sdk.Mirror{Name: m.Name, Port: m.Port, RemoteURL: m.RemoteURL, Username: m.Username, Password: m.Password})
	}
	getenv := rt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := cfg.EffectiveProxy(getenv); p.Set() {
		env.Proxy = p.SDK()
	}
	home := rt.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	cas, problems := cfg.ExtraCAs(home)
	if len(problems) > 0 {
		return sdk.Env{}, &config.ValidationError{Problems: problems}
	}
	env.ExtraCAs = string(cas.PEM)
	if rt.CADir != "" {
		ca, err := labca.Load(rt.CADir)
		switch {
		case errors.Is(err, labca.ErrNoCA):
		case err != nil:
			return sdk.Env{}, fmt.Errorf("the lab CA: %w", err)
		default:
			env.LabCA = sdk.LabCA{Cert: string(ca.CertPEM), Key: string(ca.KeyPEM())}
		}
	}
	return env, nil
}

// Gateway returns the bridge's gateway address: its first host (a.b.0.1).
func Gateway(bridge netip.Prefix) netip.Addr {
	return bridge.Masked().Addr().Next()
}

// Images returns the effective image of every images.* key: the configured
// one, or the default derived from the pinned versions.
func Images(cfg *config.Config) map[string]string {
	im := cfg.Images
	pick := func(v, def string) string {
		if strings.TrimSpace(v) != "" {
			return v
		}
		return def
	}
	return map[string]string{
		ImageKindNode:          pick(im.KindNode, "kindest/node:"+cfg.Kind.NodeVersion),
		ImageRegistry:          pick(im.Registry, config.DefaultRegistryImage),
		ImageDNSEtcd:           pick(im.DNSEtcd, config.DefaultDNSEtcdImage),
		ImageDNSServer:         pick(im.DNSServer, config.DefaultDNSServerImage),
		ImageMetalLBController: pick(im.MetalLBController, "quay.io/metallb/controller:"+cfg.Kind.MetalLBVersion),
		ImageMetalLBSpeaker:    pick(im.MetalLBSpeaker, "quay.io/metallb/speaker:"+cfg.Kind.MetalLBVersion),
		ImageExternalDNS:       pick(im.ExternalDNS, config.DefaultExternalDNSImage),

		ImageCertManagerController: pick(im.CertManagerController, config.DefaultCertManagerControllerImage),
	}
}
