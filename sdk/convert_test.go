package sdk

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

// requireAllProtoFieldsSet fails if a field of m (recursively) is unset, so
// a fixture keeps covering every field when the proto grows. In a oneof,
// one member must be set.
func requireAllProtoFieldsSet(t *testing.T, m protoreflect.Message, path string) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		p := path + "." + string(fd.Name())
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if m.WhichOneof(od) == nil {
				t.Errorf("oneof %s.%s is unset: the fixture or the conversion misses it", path, od.Name())
			}
			if !m.Has(fd) {
				continue
			}
		} else if !m.Has(fd) {
			t.Errorf("%s is unset: the fixture or the conversion misses it", p)
			continue
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := m.Get(fd).List()
			for j := 0; j < l.Len(); j++ {
				requireAllProtoFieldsSet(t, l.Get(j).Message(), p)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			m.Get(fd).Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
				requireAllProtoFieldsSet(t, v.Message(), p)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			requireAllProtoFieldsSet(t, m.Get(fd).Message(), p)
		}
	}
}

// requireNoZeroFields fails if a field of v (recursively) has its zero
// value. HostChange is exempt from "exactly one change" being all of them.
func requireNoZeroFields(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Errorf("fixture leaves %s nil", path)
			return
		}
		requireNoZeroFields(t, v.Elem(), path)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			requireNoZeroFields(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("fixture leaves %s empty", path)
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			requireNoZeroFields(t, v.Index(i), path+"[]")
		}
	case reflect.Map:
		if v.Len() == 0 {
			t.Errorf("fixture leaves %s empty", path)
		}
	default:
		if v.IsZero() {
			t.Errorf("fixture leaves %s zero", path)
		}
	}
}

// overTheWire marshals and unmarshals m, as gRPC does.
func overTheWire[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func fullEnv() Env {
	return Env{
		HostVersion: "0.4.0", VMName: "marina", Driver: "lima", HostOS: "darwin",
		DockerHost: "unix:///Users/me/.marina/docker.sock", NetworkName: "kind", BridgeCIDR: "172.30.0.0/16",
		Gateway: "172.30.0.1", DynamicIPRange: "172.30.200.0/22", DNSZone: "demo.internal",
		DNSEtcdIP: "172.30.255.52", DNSServerIP: "172.30.255.53", StateDir: "/Users/me/.marina/plugins-state/acme",
		Images:               map[string]string{"registry": "registry:2", "dnsEtcd": "quay.io/coreos/etcd:v3.5.17"},
		CustomDNSResolvers:   []DomainResolvers{{Domain: "corp.example", Resolvers: []string{"10.0.0.53", "10.0.1.53"}}},
		Mirrors:              []Mirror{{Name: "docker.io", Port: 5001, RemoteURL: "https://registry-1.docker.io", Username: "me", Password: "s3cret"}},
		RegistryCacheStorage: "host", RegistryCacheDir: "/Users/me/.marina/cache",
		ExtraCAs: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		LabCA:    LabCA{Cert: "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n", Key: "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"},
		Proxy:    Proxy{HTTP: "http://proxy.corp.example:3128", HTTPS: "http://proxy.corp.example:3128", NoProxy: []string{"172.30.0.0/16", "demo.internal"}},
	}
}

func fullCluster() *Cluster {
	return &Cluster{
		Name: "dev", Slot: 1, APIPort: 7001, ServiceSubnet: "10.1.0.0/16", PodSubnet: "10.11.0.0/16",
		MetalLBPools: []AddressRange{{"172.30.1.1", "172.30.1.7"}, {"172.30.1.16", "172.30.1.254"}},
		NodeVersion:  "v1.33.1", NodeImage: "kindest/node:v1.33.1",
		Labels:     map[string]string{"topology.kubernetes.io/region": "eu", "topology.kubernetes.io/zone": "eu-1"},
		Kubeconfig: []byte("apiVersion: v1\nkind: Config\n"), KubeconfigPath: "/Users/me/.kube/marina/dev.kubeconfig",
		Workers: 2, Mirrors: []string{"docker.io", "quay.io"},
	}
}

func fullResult() *Result {
	return &Result{
		Outputs: map[string]string{"endpoint": "http://172.30.255.52:2379"},
		Kind: &KindContribution{
			ContainerdConfigPatches: []string{"[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n"},
			KubeadmConfigPatches:    []string{"kind: ClusterConfiguration\napiServer:\n  extraArgs:\n    v: \"2\"\n"},
			NodeFiles: []NodeFile{
				{Path: "/etc/containerd/certs.d/docker.io/hosts.toml", Content: []byte("server = \"https://registry-1.docker.io\"\n"), Mode: 0o600},
				{Path: "/etc/marina/ca.pem", Content: []byte{0, 1, 2, 0xff}, Mode: 0o644},
			},
			NodeLabels:   map[string]string{"marina.dev/cluster": "dev"},
			PortMappings: []PortMapping{{ContainerPort: 80, HostPort: 8080, ListenAddress: "127.0.0.1", Protocol: "UDP"}},
		},
		HostChanges: []HostChange{
			{Resolver: &ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53"}, Remove: true}, Reason: "resolve the lab's DNS zone"},
		},
		Warnings: []Diagnostic{
			{Severity: SeverityWarning, Summary: "slow", Detail: "took 3m", Path: "wait"},
			{Severity: SeverityError, Summary: "odd", Detail: "error-level warning", Path: "pools[0]"},
		},
		Steady: &Steady{Containers: []SteadyContainer{{ID: "0123abcd", Spec: "f00d"}, {ID: "4567ef01", Spec: "beef"}}},
	}
}

func TestEnvRoundTrip(t *testing.T) {
	in := fullEnv()
	requireNoZeroFields(t, reflect.ValueOf(in), "Env")
	p := envToPB(in)
	requireAllProtoFieldsSet(t, p.ProtoReflect(), "Env")
	if got := envFromPB(overTheWire(t, p)); !reflect.DeepEqual(got, in) {
		t.Errorf("Go -> proto -> Go:\n got %+v\nwant %+v", got, in)
	}
	if back := envToPB(envFromPB(p)); !proto.Equal(back, p) {
		t.Errorf("proto -> Go -> proto:\n got %v\nwant %v", back, p)
	}
	if got := envFromPB(nil); !reflect.DeepEqual(got, Env{}) {
		t.Errorf("envFromPB(nil) = %+v, want zero", got)
	}
}

func TestClusterRoundTrip(t *testing.T) {
	in := fullCluster()
	requireNoZeroFields(t, reflect.ValueOf(in), "Cluster")
	p := clusterToPB(in)
	requireAllProtoFieldsSet(t, p.ProtoReflect(), "Cluster")
	if got := clusterFromPB(overTheWire(t, p)); !reflect.DeepEqual(got, in) {
		t.Errorf("Go -> proto -> Go:\n got %+v\nwant %+v", got, in)
	}
	if back := clusterToPB(clusterFromPB(p)); !proto.Equal(back, p) {
		t.Errorf("proto -> Go -> proto:\n got %v\nwant %v", back, p)
	}
	if clusterToPB(nil) != nil || clusterFromPB(nil) != nil {
		t.Errorf("a missing cluster must stay missing")
	}
}

func TestResultRoundTrip(t *testing.T) {
	in := fullResult()
	requireNoZeroFields(t, reflect.ValueOf(in), "Result")
	p := resultToPB(in)
	requireAllProtoFieldsSet(t, p.ProtoReflect(), "HookResult")
	if got := resultFromPB(overTheWire(t, p)); !reflect.DeepEqual(got, in) {
		t.Errorf("Go -> proto -> Go:\n got %+v\nwant %+v", got, in)
	}
	if back := resultToPB(resultFromPB(p)); !proto.Equal(back, p) {
		t.Errorf("proto -> Go -> proto:\n got %v\nwant %v", back, p)
	}
}

func TestResultEmpty(t *testing.T) {
	if p := resultToPB(nil); !proto.Equal(p, &pb.HookResult{}) {
		t.Errorf("resultToPB(nil) = %v, want an empty result", p)
	}
	got := resultFromPB(overTheWire(t, resultToPB(&Result{})))
	if !reflect.DeepEqual(got, &Result{}) {
		t.Errorf("empty result came back as %+v", got)
	}
	// A host change the host does not know (a newer plugin) keeps its reason.
	got = resultFromPB(&pb.HookResult{HostChanges: []*pb.HostChange{{Reason: "future"}}})
	if len(got.HostChanges) != 1 || got.HostChanges[0].Reason != "future" || got.HostChanges[0].Resolver != nil {
		t.Errorf("unknown host change = %+v", got.HostChanges)
	}
}

func TestDescriptionRoundTrip(t *testing.T) {
	in := &Description{
		Name: "acme", Version: "1.2.3", Protocol: "1.0", Description: "Acme", Maintainer: "acme team",
		Hooks:          []Hook{PostUp, PreCluster, PostCluster, PreClusterDelete, PreDown, PreDestroy},
		Dependencies:   []Dependency{{Name: "localdns", Version: "^1", Optional: true}},
		ConfigSchema:   []byte(`{"type":"object"}`),
		ConfigDefaults: []byte(`{"replicas":1}`),
		Capabilities:   []string{CapDocker, CapHostResolver},
		Timeouts:       map[Hook]time.Duration{PostCluster: 90 * time.Second, PreDestroy: 1500 * time.Millisecond},
		Outputs:        []string{"endpoint"},
	}
	requireNoZeroFields(t, reflect.ValueOf(in), "Description")
	p := descriptionToPB(in)
	requireAllProtoFieldsSet(t, p.ProtoReflect(), "Description")
	got, err := descriptionFromPB(overTheWire(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("Go -> proto -> Go:\n got %+v\nwant %+v", got, in)
	}
	back, err := descriptionFromPB(p)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(descriptionToPB(back), p) {
		t.Errorf("proto -> Go -> proto:\n got %v\nwant %v", descriptionToPB(back), p)
	}
}

func TestDescriptionFromNewerPlugin(t *testing.T) {
	_, err := descriptionFromPB(&pb.Description{Name: "future", Hooks: []pb.Hook{pb.Hook_HOOK_POST_UP, pb.Hook(42)}})
	if err == nil || !strings.Contains(err.Error(), "plugin future") || !strings.Contains(err.Error(), "newer marina") {
		t.Errorf("unknown hook: err = %v, want one naming the plugin and suggesting a newer marina", err)
	}
	d, err := descriptionFromPB(&pb.Description{Name: "future", Hooks: []pb.Hook{pb.Hook_HOOK_POST_UP},
		TimeoutsMs: map[int32]int64{int32(pb.Hook_HOOK_POST_UP): 2000, 42: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[Hook]time.Duration{PostUp: 2 * time.Second}; !reflect.DeepEqual(d.Timeouts, want) {
		t.Errorf("Timeouts = %v, want %v (unknown hooks dropped)", d.Timeouts, want)
	}
}

func TestHookNames(t *testing.T) {
	seen := map[pb.Hook]bool{}
	for _, h := range AllHooks {
		p, ok := hookToPB[h]
		if !ok || p == pb.Hook_HOOK_UNSPECIFIED || seen[p] {
			t.Errorf("hook %s maps to %v", h, p)
		}
		seen[p] = true
		back, err := hookFromPB(p)
		if err != nil || back != h {
			t.Errorf("hookFromPB(%v) = %v, %v; want %s", p, back, err, h)
		}
		parsed, err := ParseHook(string(h))
		if err != nil || parsed != h {
			t.Errorf("ParseHook(%q) = %v, %v", h, parsed, err)
		}
	}
	if len(hookToPB) != len(AllHooks) || len(pb.Hook_name) != len(AllHooks)+1 {
		t.Errorf("%d Go hooks, %d mapped, %d proto hooks (with UNSPECIFIED)", len(AllHooks), len(hookToPB), len(pb.Hook_name))
	}
	if _, err := hookFromPB(pb.Hook_HOOK_UNSPECIFIED); err == nil {
		t.Errorf("hookFromPB(UNSPECIFIED) succeeded")
	}
	if _, err := ParseHook("postcluster"); err == nil || !strings.Contains(err.Error(), "PostCluster") {
		t.Errorf("ParseHook(postcluster) = %v, want an error listing the hooks", err)
	}
}

func TestDiagnosticsRoundTrip(t *testing.T) {
	in := []Diagnostic{
		{Severity: SeverityError, Summary: "a", Detail: "b", Path: "c"},
		{Severity: SeverityWarning, Summary: "d"},
	}
	if got := diagsFromPB(diagsToPB(in)); !reflect.DeepEqual(got, in) {
		t.Errorf("got %+v, want %+v", got, in)
	}
	// An unset severity is an error on both sides.
	if got := diagsFromPB(diagsToPB([]Diagnostic{{Summary: "x"}})); got[0].Severity != SeverityError {
		t.Errorf("unset severity came back as %q", got[0].Severity)
	}
	if got := diagsFromPB([]*pb.Diagnostic{{Summary: "x"}}); got[0].Severity != SeverityError {
		t.Errorf("UNSPECIFIED severity came back as %q", got[0].Severity)
	}
}
