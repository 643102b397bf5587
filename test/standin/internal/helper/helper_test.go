package helper

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bcollard/marina/test/standin/internal/pki"
)

func yamlOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := sigsyaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadConfig checks that a config loads as kind loads it: strictly,
// defaulted, validated; and that what the stand-in cannot do is refused.
func TestLoadConfig(t *testing.T) {
	good := map[string]any{"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "name": "dev",
		"nodes": []map[string]any{{"role": "control-plane"}, {"role": "worker"}}}
	cfg, err := LoadConfig(yamlOf(t, good))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Networking.ServiceSubnet != "10.96.0.0/16" || cfg.Nodes[0].Image == "" || cfg.Networking.APIServerAddress != "127.0.0.1" {
		t.Errorf("kind's defaults were not applied: %+v", cfg.Networking)
	}

	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		m[k] = v
		return m
	}
	tests := []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"unknown field", with("bogus", 1), "unable to decode config: yaml: unmarshal errors:\n  line 2: field bogus not found in type v1alpha4.Cluster"},
		{"unknown node field", with("nodes", []map[string]any{{"role": "control-plane", "replicas": 2}}), "field replicas not found in type v1alpha4.Node"},
		{"apiVersion", with("apiVersion", "kind.x-k8s.io/v1alpha3"), "unknown apiVersion: kind.x-k8s.io/v1alpha3"},
		{"kind", with("kind", "Config"), "unknown kind Config for apiVersion: kind.x-k8s.io/v1alpha4"},
		{"kind's validation", with("nodes", []map[string]any{{"role": "master"}}), "invalid kind config: nodes[0]: role \"master\" is not control-plane or worker"},
		{"two control planes", with("nodes", []map[string]any{{"role": "control-plane"}, {"role": "control-plane"}}), "exactly one control-plane node, the config has 2"},
		{"IPv6", with("networking", map[string]any{"ipFamily": "ipv6"}), "IPv4 clusters only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(yamlOf(t, tt.cfg))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadConfig = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNodeNames(t *testing.T) {
	c := &v1alpha4.Cluster{Name: "dev", Nodes: []v1alpha4.Node{{Role: "control-plane"}, {Role: "worker"}, {Role: "worker"}, {Role: "worker"}}}
	if got, want := nodeNames(c), []string{"dev-control-plane", "dev-worker", "dev-worker2", "dev-worker3"}; !slices.Equal(got, want) {
		t.Errorf("nodeNames = %q, want %q", got, want)
	}
}

func TestPortBindings(t *testing.T) {
	exposed, bindings, err := portBindings([]v1alpha4.PortMapping{
		{ContainerPort: 6443, HostPort: 7001, ListenAddress: "0.0.0.0"},
		{ContainerPort: 80, HostPort: 8080},
		{ContainerPort: 53, Protocol: v1alpha4.PortMappingProtocolUDP, ListenAddress: "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]network.PortBinding{
		"6443/tcp": {HostIP: netip.MustParseAddr("0.0.0.0"), HostPort: "7001"},
		"80/tcp":   {HostIP: netip.MustParseAddr("0.0.0.0"), HostPort: "8080"},
		"53/udp":   {HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: ""},
	}
	if len(exposed) != 3 || len(bindings) != 3 {
		t.Fatalf("exposed %v bindings %v", exposed, bindings)
	}
	for p, b := range want {
		got := bindings[network.MustParsePort(p)]
		if len(got) != 1 || got[0] != b {
			t.Errorf("%s: %v, want %v", p, got, b)
		}
	}
	if _, _, err := portBindings([]v1alpha4.PortMapping{{ContainerPort: 1, Protocol: "ICMP"}}); err == nil || !strings.Contains(err.Error(), "unknown port mapping protocol") {
		t.Errorf("protocol ICMP: %v", err)
	}
}

func TestMountBindings(t *testing.T) {
	got, err := mountBindings([]v1alpha4.Mount{
		{HostPath: "/srv/a", ContainerPath: "/a", Readonly: true},
		{HostPath: "/srv/b", ContainerPath: "/b", SelinuxRelabel: true, Propagation: v1alpha4.MountPropagationHostToContainer},
		{HostPath: "/srv/c", ContainerPath: "/c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/srv/a:/a:ro", "/srv/b:/b:Z,rslave", "/srv/c:/c"}; !slices.Equal(got, want) {
		t.Errorf("mountBindings = %q, want %q", got, want)
	}
}

// TestKindKubeconfig checks kind's treatment of admin.conf: one of each
// entry, renamed kind-NAME, the server replaced only when given.
func TestKindKubeconfig(t *testing.T) {
	raw, err := pki.Kubeconfig("dev", "https://dev-control-plane:6443", pki.AdminUser, []byte("ca"), []byte("cert"), []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"", "https://0.0.0.0:7001"} {
		out, err := kindKubeconfig(raw, "dev", server)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.Load([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		want := server
		if want == "" {
			want = "https://dev-control-plane:6443"
		}
		c, u, x := cfg.Clusters["kind-dev"], cfg.AuthInfos["kind-dev"], cfg.Contexts["kind-dev"]
		if c == nil || u == nil || x == nil || cfg.CurrentContext != "kind-dev" || x.Cluster != "kind-dev" || x.AuthInfo != "kind-dev" {
			t.Fatalf("entries not renamed kind-dev: %+v", cfg)
		}
		if c.Server != want || string(u.ClientKeyData) != "key" {
			t.Errorf("server %q key %q, want %q", c.Server, u.ClientKeyData, want)
		}
	}
	if _, err := kindKubeconfig([]byte("apiVersion: v1\nkind: Config\n"), "dev", ""); err == nil {
		t.Error("an empty kubeconfig was accepted")
	}
}

func TestAPIEndpoint(t *testing.T) {
	c := container.InspectResponse{Name: "/dev-control-plane", NetworkSettings: &container.NetworkSettings{Ports: network.PortMap{
		network.MustParsePort("6443/tcp"): {{HostIP: netip.MustParseAddr("0.0.0.0"), HostPort: "7001"}, {HostIP: netip.MustParseAddr("::"), HostPort: "7001"}},
	}}}
	if got, err := apiEndpoint(c); err != nil || got != "https://0.0.0.0:7001" {
		t.Errorf("apiEndpoint = %q, %v", got, err)
	}
	c.NetworkSettings.Ports = nil
	if _, err := apiEndpoint(c); err == nil || !strings.Contains(err.Error(), "dev-control-plane") {
		t.Errorf("no binding: %v", err)
	}
}
