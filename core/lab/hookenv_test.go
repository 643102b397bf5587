package lab

import (
	"reflect"
	"testing"

	"github.com/bcollard/marina/core/config"
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
