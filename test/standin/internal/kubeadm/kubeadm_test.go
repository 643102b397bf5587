package kubeadm

import (
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	sigsyaml "sigs.k8s.io/yaml"
)

// mustYAML marshals a patch document.
func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := sigsyaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nodeLabelsPatch is a patch of kind's node registration kubelet arguments,
// in v1beta4's list form, or in v1beta3's map form when asMap.
func nodeLabelsPatch(t *testing.T, kind, apiVersion, labels string, asMap bool) string {
	t.Helper()
	var extra any = []map[string]string{{"name": "node-labels", "value": labels}}
	if asMap {
		extra = map[string]string{"node-labels": labels}
	}
	p := map[string]any{"kind": kind, "nodeRegistration": map[string]any{"kubeletExtraArgs": extra}}
	if apiVersion != "" {
		p["apiVersion"] = apiVersion
	}
	return mustYAML(t, p)
}

// cluster is a defaulted kind config: one control plane, workers workers,
// labels on every node.
func cluster(workers int, labels map[string]string, patches ...string) *v1alpha4.Cluster {
	c := &v1alpha4.Cluster{Name: "dev", KubeadmConfigPatches: patches}
	c.Nodes = append(c.Nodes, v1alpha4.Node{Role: v1alpha4.ControlPlaneRole, Labels: maps.Clone(labels)})
	for range workers {
		c.Nodes = append(c.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, Labels: maps.Clone(labels)})
	}
	c.Networking.ServiceSubnet = "10.1.0.0/16"
	v1alpha4.SetDefaultsCluster(c)
	return c
}

func names(c *v1alpha4.Cluster) []string {
	out := []string{c.Name + "-control-plane"}
	for i := 1; i < len(c.Nodes); i++ {
		if i == 1 {
			out = append(out, c.Name+"-worker")
		} else {
			out = append(out, c.Name+"-worker"+string(rune('0'+i)))
		}
	}
	return out
}

func configure(t *testing.T, c *v1alpha4.Cluster) *Result {
	t.Helper()
	r, err := Configure(Input{Cluster: c, Names: names(c), KubernetesVersion: "v1.37.2", Arch: "amd64"})
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return r
}

// userLabels are a node's labels without those of the kubelet and kubeadm.
func userLabels(n Node) map[string]string {
	out := maps.Clone(n.Labels)
	for _, k := range []string{corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable,
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch", LabelControlPlane, LabelExcludeFromLB} {
		delete(out, k)
	}
	return out
}

// TestNodeLabels checks kind's rules for node-labels: the config's labels
// are kind's own node-labels argument; a patch naming node-labels replaces
// it (kind merges kubeletExtraArgs by name); a v1beta3 map form applies
// only without apiVersion; a patch of another kubeadm API version matches
// nothing; a node's own patches come after the cluster's.
func TestNodeLabels(t *testing.T) {
	cfgLabels := map[string]string{"topology.kubernetes.io/zone": "z1", "example.com/tier": "web"}
	tests := []struct {
		name        string
		patches     []string
		nodePatches []string // on the worker
		wantCP      map[string]string
		wantWorker  map[string]string
		unmatched   int
	}{
		{name: "config labels only", wantCP: cfgLabels, wantWorker: cfgLabels},
		{
			name:       "v1beta4 list patch replaces kind's node-labels",
			patches:    []string{nodeLabelsPatch(t, "InitConfiguration", APIVersion, "example.com/patched=init", false)},
			wantCP:     map[string]string{"example.com/patched": "init"},
			wantWorker: cfgLabels,
		},
		{
			name:       "v1beta3 map form without apiVersion is converted",
			patches:    []string{nodeLabelsPatch(t, "JoinConfiguration", "", "example.com/patched=join,example.com/b=", true)},
			wantCP:     cfgLabels,
			wantWorker: map[string]string{"example.com/patched": "join", "example.com/b": ""},
		},
		{
			name:       "v1beta3 apiVersion matches nothing",
			patches:    []string{nodeLabelsPatch(t, "InitConfiguration", "kubeadm.k8s.io/v1beta3", "example.com/ignored=yes", true)},
			wantCP:     cfgLabels,
			wantWorker: cfgLabels,
			unmatched:  1,
		},
		{
			name: "two documents in one patch, and a node patch last",
			patches: []string{nodeLabelsPatch(t, "InitConfiguration", "", "example.com/a=1", false) + "---\n" +
				nodeLabelsPatch(t, "JoinConfiguration", "", "example.com/a=2", false)},
			nodePatches: []string{nodeLabelsPatch(t, "JoinConfiguration", APIVersion, "example.com/a=3", false)},
			wantCP:      map[string]string{"example.com/a": "1"},
			wantWorker:  map[string]string{"example.com/a": "3"},
		},
		{
			name:       "an entry without value removes node-labels",
			patches:    []string{mustYAML(t, map[string]any{"kind": "JoinConfiguration", "nodeRegistration": map[string]any{"kubeletExtraArgs": []map[string]any{{"name": "node-labels"}}}})},
			wantCP:     cfgLabels,
			wantWorker: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(1, cfgLabels, tt.patches...)
			c.Nodes[1].KubeadmConfigPatches = tt.nodePatches
			r := configure(t, c)
			if got := userLabels(r.Nodes[0]); !maps.Equal(got, tt.wantCP) {
				t.Errorf("control-plane labels = %v, want %v", got, tt.wantCP)
			}
			if got := userLabels(r.Nodes[1]); !maps.Equal(got, tt.wantWorker) {
				t.Errorf("worker labels = %v, want %v", got, tt.wantWorker)
			}
			if len(r.Unmatched) != tt.unmatched {
				t.Errorf("Unmatched = %q, want %d entries", r.Unmatched, tt.unmatched)
			}
		})
	}
}

// TestKubeletAndKubeadmLabels checks the labels and taints every Node gets
// from the kubelet, kubeadm and kind, with and without workers.
func TestKubeletAndKubeadmLabels(t *testing.T) {
	r := configure(t, cluster(1, nil))
	cp, w := r.Nodes[0], r.Nodes[1]
	want := map[string]string{
		corev1.LabelHostname: "dev-control-plane", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", LabelControlPlane: "", LabelExcludeFromLB: "",
	}
	if !maps.Equal(cp.Labels, want) {
		t.Errorf("control-plane labels = %v, want %v", cp.Labels, want)
	}
	if want := []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}; !slices.Equal(cp.Taints, want) {
		t.Errorf("control-plane taints = %v, want %v", cp.Taints, want)
	}
	if _, ok := w.Labels[LabelControlPlane]; ok || w.Labels[corev1.LabelHostname] != "dev-worker" || len(w.Taints) != 0 {
		t.Errorf("worker labels %v taints %v: want hostname dev-worker, no role, no taint", w.Labels, w.Taints)
	}
	if cp.ProviderID != "kind://docker/dev/dev-control-plane" || cp.Role != "control-plane" || w.Role != "worker" {
		t.Errorf("provider id %q, roles %q %q", cp.ProviderID, cp.Role, w.Role)
	}

	// kind's kubeadminit action: a single node loses the taint and the
	// load-balancer exclusion.
	single := configure(t, cluster(0, nil)).Nodes[0]
	if _, ok := single.Labels[LabelExcludeFromLB]; ok || len(single.Taints) != 0 {
		t.Errorf("single node: labels %v taints %v, want no %s and no taint", single.Labels, single.Taints, LabelExcludeFromLB)
	}

	// Taints from a patch replace kubeadm's default.
	taints := mustYAML(t, map[string]any{"kind": "InitConfiguration", "nodeRegistration": map[string]any{
		"taints": []corev1.Taint{{Key: "example.com/dedicated", Value: "x", Effect: corev1.TaintEffectNoExecute}}}})
	patched := configure(t, cluster(1, nil, taints)).Nodes[0]
	if len(patched.Taints) != 1 || patched.Taints[0].Key != "example.com/dedicated" {
		t.Errorf("patched taints = %v, want only example.com/dedicated", patched.Taints)
	}
}

// TestCertSANsAndNetworking checks that certSANs patches add to kind's
// (kind merges the list) and that networking patches reach the result.
func TestCertSANsAndNetworking(t *testing.T) {
	c := cluster(0, nil,
		mustYAML(t, map[string]any{"kind": "ClusterConfiguration", "apiServer": map[string]any{"certSANs": []string{"192.168.5.15", "127.0.0.1", "api.example.com"}}}),
		mustYAML(t, map[string]any{"kind": "ClusterConfiguration", "apiVersion": APIVersion, "networking": map[string]any{"dnsDomain": "corp.internal"}}),
	)
	c.Networking.APIServerAddress = "0.0.0.0"
	r := configure(t, c)
	if want := []string{"localhost", "0.0.0.0", "192.168.5.15", "127.0.0.1", "api.example.com"}; !slices.Equal(r.CertSANs, want) {
		t.Errorf("CertSANs = %q, want %q", r.CertSANs, want)
	}
	if r.DNSDomain != "corp.internal" || r.ServiceSubnet != "10.1.0.0/16" {
		t.Errorf("DNSDomain %q ServiceSubnet %q", r.DNSDomain, r.ServiceSubnet)
	}
	dns, ips, err := r.APIServerSANs("dev-control-plane")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.corp.internal", "localhost", "dev-control-plane", "api.example.com"} {
		if !slices.Contains(dns, want) {
			t.Errorf("DNS SANs %q lack %s", dns, want)
		}
	}
	var got []string
	for _, ip := range ips {
		got = append(got, ip.String())
	}
	if want := []string{"10.1.0.1", "192.168.5.15", "127.0.0.1"}; !slices.Equal(got, want) {
		t.Errorf("IP SANs = %q, want %q (0.0.0.0 left out)", got, want)
	}
	if slices.ContainsFunc(ips, func(ip net.IP) bool { return ip.IsUnspecified() }) {
		t.Errorf("IP SANs hold 0.0.0.0: %v", ips)
	}
}

// TestJSON6902Patch checks kind's JSON 6902 patches of kubeadm documents.
func TestJSON6902Patch(t *testing.T) {
	c := cluster(0, nil)
	c.KubeadmConfigPatchesJSON6902 = []v1alpha4.PatchJSON6902{{
		Group: "kubeadm.k8s.io", Version: "v1beta4", Kind: "ClusterConfiguration",
		Patch: mustYAML(t, []map[string]any{{"op": "add", "path": "/apiServer/certSANs/-", "value": "json6902.example.com"}}),
	}}
	r := configure(t, c)
	if !slices.Contains(r.CertSANs, "json6902.example.com") {
		t.Errorf("CertSANs = %q, want the JSON 6902 patch's name", r.CertSANs)
	}
}

// TestRefusals checks the errors kind and the kubelet would give.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name    string
		patches []string
		want    string
	}{
		{"patch is not YAML", []string{"kind: [InitConfiguration"}, "failed to generate kubeadm config content: failed to parse patches: failed to parse type meta for"},
		{"kind is not a string", []string{mustYAML(t, map[string]any{"kind": []string{"a"}})}, "failed to parse type meta"},
		{"kubelet refuses a kubernetes.io label", []string{nodeLabelsPatch(t, "InitConfiguration", "", "app.kubernetes.io/managed-by=marina", false)},
			"the kubelet would not start: --node-labels=\"app.kubernetes.io/managed-by=marina\": unknown 'kubernetes.io' or 'k8s.io' labels"},
		{"malformed node-labels", []string{nodeLabelsPatch(t, "InitConfiguration", "", "novalue", false)}, "malformed pair"},
		{"bad JSON 6902 op", nil, "failed to apply JSON 6902 patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(0, nil, tt.patches...)
			if tt.patches == nil {
				c.KubeadmConfigPatchesJSON6902 = []v1alpha4.PatchJSON6902{{Group: "kubeadm.k8s.io", Version: "v1beta4", Kind: "InitConfiguration",
					Patch: mustYAML(t, []map[string]any{{"op": "remove", "path": "/nothing/here"}})}}
			}
			_, err := Configure(Input{Cluster: c, Names: names(c), KubernetesVersion: "v1.37.2", Arch: "amd64"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Configure = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseNodeLabels(t *testing.T) {
	got, err := ParseNodeLabels(" a.example/x = 1 ,b=,,topology.kubernetes.io/zone=z")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a.example/x": "1", "b": "", "topology.kubernetes.io/zone": "z"}; !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"x", "node-role.kubernetes.io/worker=", "a=b c", "-a=b"} {
		if _, err := ParseNodeLabels(bad); err == nil {
			t.Errorf("ParseNodeLabels(%q) succeeded", bad)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"a: 1\n", []string{"a: 1\n"}},
		{"a: 1\n---\nb: 2\n", []string{"a: 1", "b: 2\n"}},
		{"a: 1\n--- # comment\nb: 2", []string{"a: 1", "b: 2"}},
		{"---\na: 1", []string{"---\na: 1"}},
		{"a: 1\n---", []string{"a: 1"}},
	} {
		if got := splitDocuments(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitDocuments(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
