package externaldns

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"

	"sigs.k8s.io/yaml"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

// request builds the Request a hook would get: the plugintest default
// environment and cluster, edited.
func request(t *testing.T, hook sdk.Hook, configJSON string, deps map[string]map[string]string, edit func(*sdk.Env, *sdk.Cluster)) *sdk.Request {
	t.Helper()
	env := plugintest.DefaultEnv(t.TempDir())
	cluster := plugintest.DefaultCluster()
	if edit != nil {
		edit(&env, cluster)
	}
	var cfg []byte
	if configJSON != "" {
		cfg = []byte(configJSON)
	}
	return sdk.NewRequest(hook, env, cluster, deps, cfg, defaultConfig(), nil, nil)
}

var localdnsDeps = map[string]map[string]string{LocalDNS: {LocalDNSEtcdOutput: "http://172.30.255.52:2379", "dnsServer": "172.30.255.53", "zone": "demo.internal"}}

// renderYAML marshals every object as it is applied and joins them as one
// multi-document YAML stream.
func renderYAML(t *testing.T, o *objects) []byte {
	t.Helper()
	var docs [][]byte
	for _, n := range o.list() {
		u, err := n.applyObject()
		if err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatalf("marshal %s: %v", n.Kind, err)
		}
		docs = append(docs, b)
	}
	return bytes.Join(docs, []byte("---\n"))
}

// TestRenderGolden renders every object PostCluster applies and compares it
// with testdata/<case>.golden (go test -run TestRenderGolden -update rewrites them).
func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name   string
		config string
		deps   map[string]map[string]string
		edit   func(*sdk.Env, *sdk.Cluster)
	}{
		{name: "default", deps: localdnsDeps},
		{
			// No localdns output: the endpoint comes from Env.DNSEtcdIP; the
			// image from Env.Images; every knob changed.
			name:   "overrides",
			config: `{"sources":["service","ingress"],"serviceTypes":["LoadBalancer","NodePort"],"interval":"1m","policy":"upsert-only","strictlyOwned":false}`,
			edit: func(e *sdk.Env, c *sdk.Cluster) {
				e.DNSZone = "lab.example"
				e.DNSEtcdIP = "172.30.255.60"
				e.Images = map[string]string{ImageKey: "127.0.0.1:5001/external-dns/external-dns:v0.23.0-test"}
				c.Name = "prod-eu"
			},
		},
		{name: "ingress-only", config: `{"sources":["ingress"]}`, deps: localdnsDeps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := paramsFor(request(t, sdk.PostCluster, tt.config, tt.deps, tt.edit))
			if err != nil {
				t.Fatal(err)
			}
			got := renderYAML(t, render(p))
			golden.Check(t, "testdata/"+tt.name+".golden", got)
		})
	}
}

// TestRenderDeploymentContract checks the facts the rest of marina relies on,
// independently of the golden files (which -update would rewrite).
func TestRenderDeploymentContract(t *testing.T) {
	p, err := paramsFor(request(t, sdk.PostCluster, "", localdnsDeps, nil))
	if err != nil {
		t.Fatal(err)
	}
	d := render(p).Deployment
	if *d.Spec.Replicas != 1 || d.Namespace != Namespace || d.Name != AppName {
		t.Fatalf("deployment %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != DefaultImage {
		t.Errorf("image = %s, want %s", c.Image, DefaultImage)
	}
	for _, want := range []string{
		"--provider=coredns",
		"--source=service",
		"--service-type-filter=LoadBalancer",
		"--domain-filter=demo.internal",
		"--fqdn-template={{.Name}}.{{.Namespace}}.dev.demo.internal",
		"--registry=txt",
		"--txt-owner-id=dev",
		"--coredns-prefix=/skydns/",
		"--coredns-strictly-owned",
		"--policy=sync",
		"--events",
		"--interval=1s",
		"--min-event-sync-interval=500ms",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	if len(c.Env) != 1 || c.Env[0].Name != "ETCD_URLS" || c.Env[0].Value != "http://172.30.255.52:2379" {
		t.Errorf("env = %+v, want ETCD_URLS=http://172.30.255.52:2379", c.Env)
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || c.Resources.Requests == nil {
		t.Errorf("container must run non-root, read-only, without escalation, with requests: %+v", sc)
	}
	if d.Spec.Template.Spec.ServiceAccountName != AppName {
		t.Errorf("serviceAccountName = %s", d.Spec.Template.Spec.ServiceAccountName)
	}
	for k, v := range podLabels {
		if d.Spec.Selector.MatchLabels[k] != v || d.Spec.Template.Labels[k] != v {
			t.Errorf("selector/template label %s=%s missing", k, v)
		}
	}
}

// TestRenderRBAC: the ClusterRole grants what the chosen sources read, read-only.
func TestRenderRBAC(t *testing.T) {
	tests := []struct {
		sources string
		want    []string // group/resource
	}{
		{`["service"]`, []string{"/services", "/pods", "/nodes", "discovery.k8s.io/endpointslices"}},
		{`["ingress"]`, []string{"networking.k8s.io/ingresses"}},
		{`["service","ingress"]`, []string{"/services", "/pods", "/nodes", "discovery.k8s.io/endpointslices", "networking.k8s.io/ingresses"}},
	}
	for _, tt := range tests {
		t.Run(tt.sources, func(t *testing.T) {
			p, err := paramsFor(request(t, sdk.PostCluster, `{"sources":`+tt.sources+`}`, localdnsDeps, nil))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range render(p).ClusterRole.Rules {
				for _, verb := range r.Verbs {
					if verb != "get" && verb != "list" && verb != "watch" {
						t.Errorf("rule %+v grants %q: ExternalDNS only reads", r, verb)
					}
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						got = append(got, g+"/"+res)
					}
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("rules cover %q, want %q", got, want)
			}
		})
	}
}

// TestParamsErrors: inputs that cannot make a valid Deployment are refused
// with a message naming them.
func TestParamsErrors(t *testing.T) {
	tests := []struct {
		name string
		deps map[string]map[string]string
		edit func(*sdk.Env, *sdk.Cluster)
		want string
	}{
		{name: "cluster name not a DNS label", edit: func(_ *sdk.Env, c *sdk.Cluster) { c.Name = "Dev_1" }, want: `cluster name "Dev_1"`},
		{name: "template injection", edit: func(_ *sdk.Env, c *sdk.Cluster) { c.Name = "{{.Spec}}" }, want: "cannot be part of a DNS name"},
		{name: "no zone", edit: func(e *sdk.Env, _ *sdk.Cluster) { e.DNSZone = "" }, want: "dns.zone"},
		{name: "bad zone", edit: func(e *sdk.Env, _ *sdk.Cluster) { e.DNSZone = "demo..internal" }, want: `DNS zone "demo..internal"`},
		{name: "no endpoint at all", edit: func(e *sdk.Env, _ *sdk.Cluster) { e.DNSEtcdIP = "" }, want: "enable the localdns plugin"},
		{name: "endpoint without scheme", deps: map[string]map[string]string{LocalDNS: {LocalDNSEtcdOutput: "172.30.255.52:2379"}}, want: "not an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := paramsFor(request(t, sdk.PostCluster, "", tt.deps, tt.edit))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
