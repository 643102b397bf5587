package lab

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/sdk"
)

func TestEnvFromDefaults(t *testing.T) {
	cfg := config.Default()
	cfg.Kind.CustomDNSResolvers = []config.DomainResolver{{Domain: "corp.example", Resolvers: []string{"10.0.0.53"}}}
	cfg.Registries.Mirrors[0].Password = "s3cret"
	env, err := HookEnv(cfg, Runtime{HostVersion: "1.2.3", Driver: "host", HostOS: "linux", DockerHost: "unix:///var/run/docker.sock", RegistryCacheDir: "/cache"})
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string][2]string{
		"NetworkName":    {env.NetworkName, "kind"},
		"BridgeCIDR":     {env.BridgeCIDR, "172.30.0.0/16"},
		"Gateway":        {env.Gateway, "172.30.0.1"},
		"DynamicIPRange": {env.DynamicIPRange, "172.30.128.0/18"},
		"DNSZone":        {env.DNSZone, "demo.internal"},
		"DNSEtcdIP":      {env.DNSEtcdIP, "172.30.255.52"},
		"DNSServerIP":    {env.DNSServerIP, "172.30.255.53"},
		"VMName":         {env.VMName, "marina"},
		"Driver":         {env.Driver, "host"},
		"DockerHost":     {env.DockerHost, "unix:///var/run/docker.sock"},
		"CacheStorage":   {env.RegistryCacheStorage, "host"},
		"CacheDir":       {env.RegistryCacheDir, "/cache"},
		"kindNode":       {env.Images[ImageKindNode], "kindest/node:" + config.DefaultNodeVersion},
		"controller":     {env.Images[ImageMetalLBController], "quay.io/metallb/controller:" + config.DefaultMetalLBVersion},
		"speaker":        {env.Images[ImageMetalLBSpeaker], "quay.io/metallb/speaker:" + config.DefaultMetalLBVersion},
		"registry":       {env.Images[ImageRegistry], config.DefaultRegistryImage},
		"externalDNS":    {env.Images[ImageExternalDNS], config.DefaultExternalDNSImage},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if len(env.Mirrors) != len(config.DefaultMirrors()) || env.Mirrors[0].Password != "s3cret" || env.Mirrors[0].Name != "registry-dockerio" {
		t.Errorf("Mirrors = %+v", env.Mirrors)
	}
	want := []sdk.DomainResolvers{{Domain: "corp.example", Resolvers: []string{"10.0.0.53"}}}
	if !reflect.DeepEqual(env.CustomDNSResolvers, want) {
		t.Errorf("CustomDNSResolvers = %+v", env.CustomDNSResolvers)
	}
}

func TestEnvOverrides(t *testing.T) {
	cfg := config.Default()
	cfg.Network.BridgeCIDR = "172.28.0.0/16"
	cfg.Images.KindNode = "my/node:1"
	cfg.Images.MetalLBSpeaker = "my/speaker:2"
	env, err := HookEnv(cfg, Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	if env.Gateway != "172.28.0.1" || env.DynamicIPRange != "172.28.128.0/18" {
		t.Errorf("gateway %s range %s", env.Gateway, env.DynamicIPRange)
	}
	if env.Images[ImageKindNode] != "my/node:1" || env.Images[ImageMetalLBSpeaker] != "my/speaker:2" {
		t.Errorf("images = %v", env.Images)
	}
	cfg.Network.BridgeCIDR = "172.28.0.0/24"
	if _, err := HookEnv(cfg, Runtime{}); err == nil {
		t.Error("a /24 bridge was accepted")
	}
}

// TestEnvProxy (issue 25): hooks get the lab's proxy — from the
// environment marina runs in when the config has none — with the lab's
// own addresses in NoProxy; no proxy, no Proxy.
func TestEnvProxy(t *testing.T) {
	cfg := config.Default()
	getenv := func(k string) string {
		return map[string]string{"HTTPS_PROXY": "http://proxy.corp.example:3128", "no_proxy": "corp.example"}[k]
	}
	env, err := HookEnv(cfg, Runtime{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if env.Proxy.HTTPS != "http://proxy.corp.example:3128" || env.Proxy.HTTP != "" || env.Proxy.NoProxy[0] != "corp.example" ||
		!slices.Contains(env.Proxy.NoProxy, "172.30.0.0/16") || !slices.Contains(env.Proxy.NoProxy, "demo.internal") {
		t.Errorf("Proxy = %+v", env.Proxy)
	}
	env, err = HookEnv(cfg, Runtime{Getenv: func(string) string { return "" }})
	if err != nil || env.Proxy.Set() || env.Proxy.NoProxy != nil {
		t.Errorf("without a proxy: %+v %v", env.Proxy, err)
	}
}

// TestEnvExtraCAs (issue 25): hooks get trust.extraCAs as one PEM bundle;
// a file gone bad since the config loaded is an error naming the item.
func TestEnvExtraCAs(t *testing.T) {
	home := t.TempDir()
	ca, err := labca.Create(filepath.Join(home, "ca"), labca.Scope{Lab: "corp", Zone: "corp.example", Bridge: netip.MustParsePrefix("10.0.0.0/8")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Trust.ExtraCAs = []string{"~/ca/ca.crt"}
	env, err := HookEnv(cfg, Runtime{Home: home})
	if err != nil || env.ExtraCAs != string(ca.CertPEM) {
		t.Fatalf("ExtraCAs = %q, %v", env.ExtraCAs, err)
	}
	cfg.Trust.ExtraCAs = []string{"~/ca/ca.key"}
	if _, err := HookEnv(cfg, Runtime{Home: home}); err == nil || !strings.Contains(err.Error(), "trust.extraCAs[0]") {
		t.Errorf("a key as an extra CA: %v", err)
	}
}
