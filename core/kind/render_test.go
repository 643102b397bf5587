package kind

import (
	"bytes"
	"maps"
	"net/netip"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/test/golden"
)

var bridge = netip.MustParsePrefix("172.30.0.0/16")

const (
	testImage    = "kindest/node:v1.37.0"
	testFilesDir = "/var/lib/marina/node-files"
)

func mustSlot(t *testing.T, n int) slot.Resources {
	t.Helper()
	r, err := slot.Derive(n, bridge)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// nodeLabels returns the slot's node labels the kubelet may set, checking
// that only managed-by is left for the admin.
func nodeLabels(t *testing.T, r slot.Resources, region, zone string, extra map[string]string) map[string]string {
	t.Helper()
	all := r.Labels(region, zone)
	maps.Copy(all, extra)
	kubelet, admin := SplitNodeLabels(all)
	if want := map[string]string{slot.LabelManagedBy: slot.ManagedBy}; !maps.Equal(admin, want) {
		t.Fatalf("SplitNodeLabels admin part = %v, want %v", admin, want)
	}
	return kubelet
}

// registriesContribution has the shape of what plugins/registries declares
// for the docker.io and quay.io mirrors (see its testdata).
func registriesContribution() *sdk.KindContribution {
	hosts := func(upstream, mirror string) []byte {
		return []byte("server = '" + upstream + "'\n\n[host]\n  [host.'" + mirror + "']\n    capabilities = ['pull', 'resolve']\n")
	}
	return &sdk.KindContribution{
		NodeFiles: []sdk.NodeFile{
			{Path: "/etc/containerd/certs.d/docker.io/hosts.toml", Content: hosts("https://registry-1.docker.io", "http://registry-dockerio:5030"), Mode: 0o644},
			{Path: "/etc/containerd/certs.d/quay.io/hosts.toml", Content: hosts("https://quay.io", "http://registry-quayio:5010")},
		},
		ContainerdConfigPatches: []string{"[plugins]\n  [plugins.'io.containerd.cri.v1.images']\n    [plugins.'io.containerd.cri.v1.images'.registry]\n      config_path = '/etc/containerd/certs.d'\n"},
	}
}

func TestRenderGolden(t *testing.T) {
	s1, s42 := mustSlot(t, 1), mustSlot(t, 42)
	tests := []struct {
		name string
		in   RenderInput
	}{
		{"slot1-default", RenderInput{
			Name: "dev", Slot: s1, NodeImage: testImage,
			Labels: nodeLabels(t, s1, "", "", nil),
		}},
		{"slot42-workers-labels", RenderInput{
			Name: "team-a", Slot: s42, NodeImage: testImage, Workers: 2,
			Labels: nodeLabels(t, s42, "us-east1", "", map[string]string{"tier": "gold", "marina.dev/fleet": "demo"}),
		}},
		{"registries", RenderInput{
			Name: "dev", Slot: s1, NodeImage: testImage, Workers: 1,
			Labels:        nodeLabels(t, s1, "", "", nil),
			Contributions: []NamedContribution{{Plugin: "registries", KindContribution: registriesContribution()}},
			NodeFilesDir:  testFilesDir,
		}},
		{"api-address", RenderInput{
			Name: "dev", Slot: s1, NodeImage: testImage,
			Labels:           nodeLabels(t, s1, "", "", nil),
			APIServerAddress: "192.168.105.7",
		}},
		{"api-address-loopback", RenderInput{
			Name: "dev", Slot: s1, NodeImage: testImage,
			Labels:           nodeLabels(t, s1, "", "", nil),
			APIServerAddress: "127.0.0.1",
		}},
		{"default-image", RenderInput{Name: "bare", Slot: s1}},
		{"contributions-merged-in-plugin-order", RenderInput{
			Name: "dev", Slot: s1, NodeImage: testImage, Workers: 1,
			Labels:           nodeLabels(t, s1, "", "", nil),
			APIServerAddress: "192.168.105.7",
			NodeFilesDir:     testFilesDir,
			// Given out of order, with a nil contribution: merged as ingress, nothing, registries.
			Contributions: []NamedContribution{
				{Plugin: "registries", KindContribution: registriesContribution()},
				{Plugin: "quiet"},
				{Plugin: "ingress", KindContribution: &sdk.KindContribution{
					KubeadmConfigPatches: []string{"kind: InitConfiguration\nnodeRegistration:\n  taints: []\n"},
					NodeLabels:           map[string]string{"ingress-ready": "true", slot.LabelRegion: "europe-west1"},
					PortMappings: []sdk.PortMapping{
						{ContainerPort: 80, HostPort: 8001},
						{ContainerPort: 443, HostPort: 8443, ListenAddress: "127.0.0.1", Protocol: "tcp"},
						{ContainerPort: 53, HostPort: 8001, Protocol: "UDP"},
					},
				}},
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Render(tt.in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			got, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/"+tt.name+".yaml", got)

			// What kind reads back is what was rendered (strict decoding,
			// as kind's loader does).
			var back v1alpha4.Cluster
			dec := yaml.NewDecoder(bytes.NewReader(got))
			dec.KnownFields(true)
			if err := dec.Decode(&back); err != nil {
				t.Fatalf("strict decode of the rendered YAML: %v", err)
			}
			again, err := Encode(&back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, got) {
				t.Errorf("YAML does not round-trip through kind's types:\n%s\nvs\n%s", got, again)
			}
		})
	}
}

// TestRenderEverySlot renders every slot and checks the fields the slot
// owns, so that no slot's config is refused by kind's rules.
func TestRenderEverySlot(t *testing.T) {
	for n := slot.Min; n <= slot.Max; n++ {
		r := mustSlot(t, n)
		c, err := Render(RenderInput{Name: "c", Slot: r, NodeImage: testImage, Labels: nodeLabels(t, r, "", "", nil), APIServerAddress: "10.0.2.15"})
		if err != nil {
			t.Fatalf("slot %d: %v", n, err)
		}
		if c.Networking.APIServerPort != int32(7000+n) || c.Networking.APIServerAddress != ListenAll ||
			c.Networking.ServiceSubnet != r.ServiceSubnet.String() || c.Networking.PodSubnet != r.PodSubnet.String() {
			t.Fatalf("slot %d: networking %+v does not match the slot %+v", n, c.Networking, r)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	s1 := mustSlot(t, 1)
	base := func() RenderInput {
		return RenderInput{Name: "dev", Slot: s1, NodeImage: testImage, NodeFilesDir: testFilesDir,
			Labels: map[string]string{slot.LabelRegion: "europe-west1"}}
	}
	with := func(cs ...NamedContribution) RenderInput {
		in := base()
		in.Contributions = cs
		return in
	}
	kc := func(plugin string, k sdk.KindContribution) NamedContribution {
		return NamedContribution{Plugin: plugin, KindContribution: &k}
	}
	file := func(p string) sdk.NodeFile { return sdk.NodeFile{Path: p, Content: []byte("x")} }

	tests := []struct {
		name string
		in   RenderInput
		want []string // substrings of the error
	}{
		{"empty name", func() RenderInput { in := base(); in.Name = ""; return in }(), []string{"cluster name is empty"}},
		{"name with shell", func() RenderInput { in := base(); in.Name = "dev;rm -rf /"; return in }(), []string{`cluster name "dev;rm -rf /"`}},
		{"name too long", func() RenderInput { in := base(); in.Name = strings.Repeat("a", 50); return in }(), []string{"at most 49"}},
		{"no slot", func() RenderInput { in := base(); in.Slot = slot.Resources{}; return in }(), []string{"slot 0 is outside 1..99"}},
		{"negative workers", func() RenderInput { in := base(); in.Workers = -1; return in }(), []string{"workers is -1"}},
		{"unspecified API address", func() RenderInput { in := base(); in.APIServerAddress = "0.0.0.0"; return in }(), []string{`API server address "0.0.0.0"`}},
		{"IPv6 API address", func() RenderInput { in := base(); in.APIServerAddress = "fd00::1"; return in }(), []string{`API server address "fd00::1"`}},
		{"core label the kubelet refuses", func() RenderInput {
			in := base()
			in.Labels[slot.LabelManagedBy] = slot.ManagedBy
			return in
		}(), []string{"node label from marina", slot.LabelManagedBy, "SplitNodeLabels"}},
		{"invalid label value", func() RenderInput { in := base(); in.Labels["tier"] = "a,b=c"; return in }(), []string{`label tier value "a,b=c"`}},
		{"label conflicts with the core", with(kc("metallb", sdk.KindContribution{NodeLabels: map[string]string{slot.LabelRegion: "mars"}})),
			[]string{"node label " + slot.LabelRegion, `marina sets "europe-west1"`, `plugin metallb sets "mars"`}},
		{"label conflicts between plugins", with(
			kc("zeta", sdk.KindContribution{NodeLabels: map[string]string{"ingress-ready": "false"}}),
			kc("alpha", sdk.KindContribution{NodeLabels: map[string]string{"ingress-ready": "true"}})),
			[]string{"node label ingress-ready", `plugin alpha sets "true"`, `plugin zeta sets "false"`}},
		{"plugin label the kubelet refuses", with(kc("acme", sdk.KindContribution{NodeLabels: map[string]string{"node-role.kubernetes.io/edge": ""}})),
			[]string{"node label from plugin acme", "node-role.kubernetes.io/edge"}},
		{"host port conflict between plugins", with(
			kc("web", sdk.KindContribution{PortMappings: []sdk.PortMapping{{ContainerPort: 80, HostPort: 8080}}}),
			kc("api", sdk.KindContribution{PortMappings: []sdk.PortMapping{{ContainerPort: 8080, HostPort: 8080, ListenAddress: "127.0.0.1"}}})),
			[]string{"host port conflict", "plugin web asks for 0.0.0.0:8080/TCP", "plugin api already has 127.0.0.1:8080/TCP"}},
		{"host port conflict with the API server", func() RenderInput {
			in := with(kc("web", sdk.KindContribution{PortMappings: []sdk.PortMapping{{ContainerPort: 80, HostPort: 7001}}}))
			in.APIServerAddress = "192.168.105.7"
			return in
		}(), []string{"plugin web asks for 0.0.0.0:7001/TCP", "marina (API server) already has 0.0.0.0:7001/TCP"}},
		{"host port conflict within a plugin", with(kc("web", sdk.KindContribution{PortMappings: []sdk.PortMapping{
			{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 81, HostPort: 8080, Protocol: "TCP"}}})),
			[]string{"plugin web asks for 0.0.0.0:8080/TCP but plugin web already has"}},
		{"random host port", with(kc("web", sdk.KindContribution{PortMappings: []sdk.PortMapping{{ContainerPort: 80}}})),
			[]string{"plugin web: portMappings[0]: hostPort 0"}},
		{"bad protocol", with(kc("web", sdk.KindContribution{PortMappings: []sdk.PortMapping{{ContainerPort: 80, HostPort: 80, Protocol: "QUIC"}}})),
			[]string{`protocol "QUIC"`}},
		{"bad listen address", with(kc("web", sdk.KindContribution{PortMappings: []sdk.PortMapping{{ContainerPort: 80, HostPort: 80, ListenAddress: "localhost"}}})),
			[]string{`listenAddress "localhost"`}},
		{"same node file from two plugins", with(
			kc("registries", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/containerd/certs.d/docker.io/hosts.toml")}}),
			kc("mirrors", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/containerd/certs.d/docker.io/hosts.toml")}})),
			[]string{"node file /etc/containerd/certs.d/docker.io/hosts.toml: both plugin mirrors and plugin registries place it"}},
		{"node file inside another", with(
			kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/acme")}}),
			kc("b", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/acme/conf")}})),
			[]string{"one path lies inside the other", "plugin a", "plugin b"}},
		{"node file escaping", with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/../../root/x")}})),
			[]string{"plugin a: nodeFiles[0]", "must be clean"}},
		{"relative node file", with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("etc/x")}})),
			[]string{"must be absolute"}},
		{"node file with a colon", with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/containerd/certs.d/host:5000/hosts.toml")}})),
			[]string{"must be absolute, with segments of letters"}},
		{"node file kind owns", with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/containerd/config.toml")}})),
			[]string{"belongs to kind or Docker"}},
		{"node file under /var", with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/var/lib/x")}})),
			[]string{"/var belongs to kind or Docker"}},
		{"node file setuid", with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{{Path: "/etc/x", Mode: 0o4755}}})),
			[]string{"bits beyond the permission bits"}},
		{"node files without a directory", func() RenderInput {
			in := with(kc("a", sdk.KindContribution{NodeFiles: []sdk.NodeFile{file("/etc/x")}}))
			in.NodeFilesDir = ""
			return in
		}(), []string{"node files directory is empty"}},
		{"kubeadm patch without kind", with(kc("a", sdk.KindContribution{KubeadmConfigPatches: []string{"apiServer:\n  certSANs: [x]\n"}})),
			[]string{"plugin a: kubeadmConfigPatches[0]", `kind ""`}},
		{"kubeadm patch of an unknown kind", with(kc("a", sdk.KindContribution{KubeadmConfigPatches: []string{"kind: ClusterConfiguration\n---\nkind: Deployment\n"}})),
			[]string{`document 2 has kind "Deployment"`}},
		{"kubeadm patch not YAML", with(kc("a", sdk.KindContribution{KubeadmConfigPatches: []string{"kind: [unclosed"}})),
			[]string{"not YAML"}},
		{"containerd patch not TOML", with(kc("a", sdk.KindContribution{ContainerdConfigPatches: []string{"[plugins"}})),
			[]string{"plugin a: containerdConfigPatches[0]: not TOML"}},
		{"empty containerd patch", with(kc("a", sdk.KindContribution{ContainerdConfigPatches: []string{" \n"}})),
			[]string{"empty patch"}},
		{"bad plugin name", with(kc("Bad Name", sdk.KindContribution{})), []string{`plugin "Bad Name"`}},
		{"plugin twice", with(kc("a", sdk.KindContribution{}), kc("a", sdk.KindContribution{})), []string{"plugin a contributed twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Render(tt.in)
			if err == nil {
				out, _ := Encode(c)
				t.Fatalf("Render succeeded, want an error containing %q; got:\n%s", tt.want, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestValidate feeds kind configs that Render never makes, to show that
// Validate applies kind's rules.
func TestValidate(t *testing.T) {
	valid := func() *v1alpha4.Cluster {
		return &v1alpha4.Cluster{
			TypeMeta: v1alpha4.TypeMeta{Kind: ConfigKind, APIVersion: ConfigAPIVersion},
			Name:     "dev",
			Nodes:    []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole}},
			Networking: v1alpha4.Networking{
				APIServerPort: 7001,
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(c *v1alpha4.Cluster)
		want   string // "" = valid
	}{
		{"valid", func(*v1alpha4.Cluster) {}, ""},
		{"defaults fill an empty node list", func(c *v1alpha4.Cluster) { c.Nodes = nil }, ""},
		{"wrong apiVersion", func(c *v1alpha4.Cluster) { c.APIVersion = "kind.x-k8s.io/v1alpha3" }, "kind loads only"},
		{"upper-case name", func(c *v1alpha4.Cluster) { c.Name = "Dev" }, `name "Dev" does not match`},
		{"API port out of range", func(c *v1alpha4.Cluster) { c.Networking.APIServerPort = 70000 }, "apiServerPort 70000"},
		{"bad ipFamily", func(c *v1alpha4.Cluster) { c.Networking.IPFamily = "ipv5" }, `ipFamily "ipv5"`},
		{"IPv6 subnet in an IPv4 cluster", func(c *v1alpha4.Cluster) { c.Networking.PodSubnet = "fd00::/64" }, "not an IPv4 CIDR"},
		{"two subnets single stack", func(c *v1alpha4.Cluster) { c.Networking.ServiceSubnet = "10.1.0.0/16,10.2.0.0/16" }, "allows one CIDR"},
		{"bad subnet", func(c *v1alpha4.Cluster) { c.Networking.ServiceSubnet = "10.1.0.0" }, "not a CIDR"},
		{"bad kube-proxy mode", func(c *v1alpha4.Cluster) { c.Networking.KubeProxyMode = "userspace" }, `kubeProxyMode "userspace"`},
		{"no control plane", func(c *v1alpha4.Cluster) { c.Nodes[0].Role = v1alpha4.WorkerRole }, "no control-plane node"},
		{"bad role", func(c *v1alpha4.Cluster) { c.Nodes[0].Role = "etcd" }, `role "etcd"`},
		{"duplicate mapping", func(c *v1alpha4.Cluster) {
			c.Nodes[0].ExtraPortMappings = []v1alpha4.PortMapping{{ContainerPort: 80, HostPort: 80}, {ContainerPort: 81, HostPort: 80, ListenAddress: "127.0.0.1"}}
		}, "extraPortMappings[1] (127.0.0.1:80/TCP) collides with extraPortMappings[0] (0.0.0.0:80/TCP)"},
		{"same port other protocol", func(c *v1alpha4.Cluster) {
			c.Nodes[0].ExtraPortMappings = []v1alpha4.PortMapping{{ContainerPort: 53, HostPort: 53}, {ContainerPort: 53, HostPort: 53, Protocol: v1alpha4.PortMappingProtocolUDP}}
		}, ""},
		{"mapping on the API port", func(c *v1alpha4.Cluster) {
			c.Nodes[0].ExtraPortMappings = []v1alpha4.PortMapping{{ContainerPort: 6443, HostPort: 7001, ListenAddress: "0.0.0.0"}}
		}, "collides with marina (API server) (127.0.0.1:7001/TCP)"},
		{"mapping on the API port of a worker is fine", func(c *v1alpha4.Cluster) {
			c.Nodes = append(c.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, ExtraPortMappings: []v1alpha4.PortMapping{{ContainerPort: 80, HostPort: 7001}}})
		}, ""},
		{"host port out of range", func(c *v1alpha4.Cluster) {
			c.Nodes[0].ExtraPortMappings = []v1alpha4.PortMapping{{ContainerPort: 80, HostPort: 65536}}
		}, "hostPort 65536"},
		{"relative mount", func(c *v1alpha4.Cluster) {
			c.Nodes[0].ExtraMounts = []v1alpha4.Mount{{HostPath: "files/x", ContainerPath: "/etc/x"}}
		}, `hostPath "files/x" must be absolute`},
		{"bad API server address", func(c *v1alpha4.Cluster) { c.Networking.APIServerAddress = "vm.local" }, `apiServerAddress "vm.local"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(c)
			err := Validate(c)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate accepted the config, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q\ndoes not contain %q", err, tt.want)
			}
		})
	}
}

func TestKubeletMaySet(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"tier", true},
		{"marina.dev/slot", true},
		{"ingress-ready", true},
		{slot.LabelRegion, true},
		{slot.LabelZone, true},
		{"node.kubernetes.io/exclude-from-external-load-balancers", true},
		{"team.node.kubernetes.io/x", true},
		{"kubelet.kubernetes.io/x", true},
		{"kubernetes.io/hostname", true},
		{slot.LabelManagedBy, false},
		{"node-role.kubernetes.io/control-plane", false},
		{"kubernetes.io/foo", false},
		{"example.k8s.io/foo", false},
		{"k8s.io/foo", false},
		{"notkubernetes.io/foo", true},
	}
	for _, tt := range tests {
		if got := KubeletMaySet(tt.key); got != tt.want {
			t.Errorf("KubeletMaySet(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"dev", "a", "team-a", "c1", "1c", strings.Repeat("a", MaxNameLength)} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Dev", "-dev", "dev-", "dev.x", "dev_x", "../x", "a b", "dev;id", strings.Repeat("a", MaxNameLength+1)} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) accepted it", bad)
		}
	}
}
