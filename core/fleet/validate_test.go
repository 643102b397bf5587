package fleet

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
)

var testCtx = ValidateContext{
	KnownMirrors: []string{"docker-io", "ghcr-io", "quay-io"},
	KnownPlugins: []string{"coredns", "externaldns", "localdns", "metallb", "registries"},
}

func parseOrFatal(t testing.TB, data string) *Fleet {
	t.Helper()
	f, err := Parse([]byte(data), "fleet.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func TestValidateAccepts(t *testing.T) {
	for _, name := range []string{"full.yaml", "minimal.yaml"} {
		data, err := os.ReadFile("testdata/manifests/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(parseOrFatal(t, string(data)), testCtx); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	const long = "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefg" // 51
	tests := []struct {
		name string
		yaml string
		ctx  *ValidateContext
		want []want
	}{
		{"missing fleet name", "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nspec: {clusters: [a]}\n", nil, []want{
			{"metadata.name", 1, 1, "is required: it names the fleet and labels its nodes marina.dev/fleet=<name>; add metadata: {name: my-fleet}"}}},
		{"bad fleet name", "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: My_Fleet\nspec: {clusters: [a]}\n", nil, []want{
			{"metadata.name", 4, 9, `fleet name "My_Fleet" is not a DNS label`}}},
		{"negative maxParallel", head + "spec: {maxParallel: -1, clusters: [a]}\n", nil, []want{
			{"spec.maxParallel", 4, 21, "must be 0 (the default, 4 at once) or more, got -1"}}},
		{"strategy case", head + "spec: {strategy: failfast, clusters: [a]}\n", nil, []want{
			{"spec.strategy", 4, 18, `unknown strategy "failfast"; did you mean "FailFast"? (case matters); use FailFast (the default) or ContinueOnError`}}},
		{"no clusters", head + "spec:\n  clusters: []\n", nil, []want{
			{"spec.clusters", 5, 3, "a fleet needs at least one cluster; add spec.clusters: [my-cluster]"}}},
		{"no spec", head, nil, []want{
			{"spec.clusters", 1, 1, "a fleet needs at least one cluster"}}},
		{"bad cluster name", head + "spec:\n  clusters: [East_1]\n", nil, []want{
			{"spec.clusters[0].name", 5, 14, `cluster name "East_1" is not a DNS label`}}},
		{"long cluster name", head + "spec:\n  clusters: [" + long + "]\n", nil, []want{
			{"spec.clusters[0].name", 5, 14, "has 51 characters; use at most 50 (node hostnames are <name>-control-plane)"}}},
		{"entry without name", head + "spec:\n  clusters:\n  - num: 2\n", nil, []want{
			{"spec.clusters[0].name", 6, 5, "a cluster needs a name; write the entry as a bare name or add name:"}}},
		{"duplicate names", head + "spec:\n  clusters: [a, b, a]\n", nil, []want{
			{"spec.clusters[2].name", 5, 20, `duplicate cluster name "a" (also spec.clusters[0]); give each cluster its own name`}}},
		{"unknown dependency", head + "spec:\n  clusters:\n  - hub\n  - {name: e, dependsOn: [hubb]}\n", nil, []want{
			{"spec.clusters[1].dependsOn[0]", 7, 27, `unknown cluster "hubb"; did you mean "hub"?; dependsOn names clusters of this manifest`}}},
		{"self dependency", head + "spec:\n  clusters:\n  - {name: a, dependsOn: [a]}\n", nil, []want{
			{"spec.clusters[0].dependsOn[0]", 6, 27, `cluster "a" depends on itself; remove this dependency`}}},
		{"dependency twice", head + "spec:\n  clusters:\n  - b\n  - {name: a, dependsOn: [b, b]}\n", nil, []want{
			{"spec.clusters[1].dependsOn[1]", 7, 30, `"b" is listed twice; keep one`}}},
		{"empty dependency", head + "spec:\n  clusters:\n  - {name: a, dependsOn: [\"\"]}\n", nil, []want{
			{"spec.clusters[0].dependsOn[0]", 6, 27, "empty dependency; name a cluster of this manifest or remove the item"}}},
		{"two cycles", head + "spec:\n  clusters:\n  - {name: a, dependsOn: [b]}\n  - {name: b, dependsOn: [a]}\n  - {name: c, dependsOn: [d]}\n  - {name: d, dependsOn: [c, a]}\n", nil, []want{
			{"spec.clusters[1].dependsOn[0]", 7, 27, "dependency cycle a -> b -> a; remove one of these dependencies"},
			{"spec.clusters[3].dependsOn[0]", 9, 27, "dependency cycle c -> d -> c"},
		}},
		{"num out of range", head + "spec:\n  clusters:\n  - {name: a, num: 100}\n  - {name: b, num: -1}\n", nil, []want{
			{"spec.clusters[0].num", 6, 20, "must be between 1 and 99, got 100; pin a slot in that range, or leave it out for the lowest free one"},
			{"spec.clusters[1].num", 7, 20, "must be between 1 and 99, got -1"},
		}},
		// num: 0 is written, so it is not "unset": refused at its line
		{"num zero", head + "spec:\n  clusters:\n  - a\n  - name: b\n    num: 0\n", nil, []want{
			{"spec.clusters[1].num", 8, 10, "must be between 1 and 99, got 0; pin a slot in that range, or leave it out for the lowest free one"},
		}},
		{"duplicate num", head + "spec:\n  clusters:\n  - {name: a, num: 4}\n  - {name: b, num: 4}\n", nil, []want{
			{"spec.clusters[1].num", 7, 20, "num 4 is also pinned by spec.clusters[0] (a); each cluster needs its own slot: pin another or leave num unset"}}},
		{"conflicting nums", head + "spec:\n  clusters:\n  - {name: a, num: 1}\n  - {name: b, num: 11}\n", nil, []want{
			{"spec.clusters[1].num", 7, 20, "num 11 conflicts with num 1 of a: service subnet 10.11.0.0/16 of slot 11 equals pod subnet 10.11.0.0/16 of slot 1; pin another slot or leave num unset"}}},
		{"num against the bridge", head + "spec:\n  clusters:\n  - {name: a, num: 5}\n", &ValidateContext{KnownMirrors: testCtx.KnownMirrors, KnownPlugins: testCtx.KnownPlugins, Bridge: netip.MustParsePrefix("10.5.0.0/16")}, []want{
			{"spec.clusters[0].num", 6, 20, "num 5 cannot be used on bridge 10.5.0.0/16: service subnet 10.5.0.0/16 of slot 5 equals the bridge 10.5.0.0/16; pin another slot"}}},
		{"bad bridge", head + "spec:\n  clusters:\n  - {name: a, num: 5}\n", &ValidateContext{Bridge: netip.MustParsePrefix("10.5.0.0/24")}, []want{
			{"(document)", 1, 1, "cannot check pinned nums: bridge CIDR 10.5.0.0/24 is a /24; expected an IPv4 /16"}}},
		{"node version", head + "spec:\n  defaults: {nodeVersion: 1.30}\n  clusters: [{name: a, nodeVersion: v1.3}]\n", nil, []want{
			{"spec.defaults.nodeVersion", 5, 27, `"1.30" must look like v1.37.0 (a kindest/node tag)`},
			{"spec.clusters[0].nodeVersion", 6, 37, `"v1.3" must look like v1.37.0`},
		}},
		{"workers", head + "spec:\n  defaults: {workers: 11}\n  clusters: [{name: a, workers: -1}]\n", nil, []want{
			{"spec.defaults.workers", 5, 23, "must be between 0 and 10, got 11 (worker nodes besides the control plane)"},
			{"spec.clusters[0].workers", 6, 33, "got -1"},
		}},
		{"region and zone", head + "spec:\n  clusters: [{name: a, region: us east, zone: \"-z\"}]\n", nil, []want{
			{"spec.clusters[0].region", 5, 32, `"us east" cannot be a node label value`},
			{"spec.clusters[0].zone", 5, 47, `"-z" cannot be a node label value`},
		}},
		{"mirrors", head + "spec:\n  clusters: [{name: a, registries: [dockerio, ghcr-io, ghcr-io]}]\n", nil, []want{
			{"spec.clusters[0].registries[0]", 5, 37, `unknown mirror "dockerio"; did you mean "docker-io"?; known mirrors in marina's config (registries.mirrors): docker-io, ghcr-io, quay-io`},
			{"spec.clusters[0].registries[2]", 5, 56, `mirror "ghcr-io" is listed twice; keep one`},
		}},
		{"no mirrors known", head + "spec:\n  clusters: [{name: a, registries: [x]}]\n", &ValidateContext{}, []want{
			{"spec.clusters[0].registries[0]", 5, 37, `unknown mirror "x"; there are no mirrors in marina's config`}}},
		{"plugins", head + "spec:\n  defaults:\n    plugins: {metalb: {enabled: true}}\n  clusters: [a]\n", nil, []want{
			{"spec.defaults.plugins.metalb", 6, 15, `unknown plugin "metalb"; did you mean "metallb"?; known plugins (see marina plugin list): coredns, externaldns`}}},
		{"labels", head + "spec:\n  clusters:\n  - name: a\n    labels:\n      -bad: x\n      marina.dev/fleet: other\n      topology.kubernetes.io/region: r\n      topology.kubernetes.io/zone: z\n      node-role.kubernetes.io/edge: \"\"\n      ok: \"bad value\"\n      example.com/fine: \"\"\n      k8s.io/x: y\n", nil, []want{
			{"spec.clusters[0].labels.-bad", 8, 7, `label key "-bad" is not valid`},
			{"spec.clusters[0].labels.k8s.io/x", 15, 7, "in a namespace reserved for Kubernetes (the kubelet refuses it on nodes); use your own prefix"},
			{"spec.clusters[0].labels.marina.dev/fleet", 9, 7, "is reserved: marina sets marina.dev/ labels itself (the fleet label comes from metadata.name)"},
			{"spec.clusters[0].labels.node-role.kubernetes.io/edge", 12, 7, "reserved for Kubernetes"},
			{"spec.clusters[0].labels.ok", 13, 7, `label value "bad value" is not valid`},
			{"spec.clusters[0].labels.topology.kubernetes.io/region", 10, 7, "is set from region:; write region: instead"},
			{"spec.clusters[0].labels.topology.kubernetes.io/zone", 11, 7, "is set from zone:; write zone: instead"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx
			if tt.ctx != nil {
				ctx = *tt.ctx
			}
			checkProblems(t, Validate(parseOrFatal(t, tt.yaml), ctx), tt.want)
		})
	}
}

// TestValidateCycleFile is the "done when": the cycle of a manifest
// is named, with the line of the dependency that closes it.
func TestValidateCycleFile(t *testing.T) {
	data, err := os.ReadFile("testdata/manifests/cycle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = Validate(parseOrFatal(t, string(data)), testCtx)
	checkProblems(t, err, []want{{"spec.clusters[1].dependsOn[0]", 10, 17, "dependency cycle a -> c -> b -> a; remove one of these dependencies"}})
	if !strings.Contains(err.Error(), "fleet.yaml:10:17: spec.clusters[1].dependsOn[0]: dependency cycle a -> c -> b -> a") {
		t.Errorf("error text:\n%v", err)
	}
}

// TestValidateAllAtOnce: one call reports problems of every kind together.
func TestValidateAllAtOnce(t *testing.T) {
	f := parseOrFatal(t, head+`spec:
  maxParallel: -2
  strategy: Sometimes
  clusters:
  - {name: a, num: 1, dependsOn: [b], registries: [nope]}
  - {name: b, num: 11, dependsOn: [a], plugins: {nope: {}}}
  - {name: B}
`)
	var fe *Error
	if err := Validate(f, testCtx); !errors.As(err, &fe) {
		t.Fatalf("got %v", err)
	}
	paths := map[string]bool{}
	for _, p := range fe.Problems {
		paths[p.Path] = true
	}
	for _, p := range []string{"spec.maxParallel", "spec.strategy", "spec.clusters[0].registries[0]", "spec.clusters[1].plugins.nope", "spec.clusters[2].name", "spec.clusters[1].dependsOn[0]", "spec.clusters[1].num"} {
		if !paths[p] {
			t.Errorf("no problem at %s in:\n%v", p, fe)
		}
	}
}

// TestValidateBuiltInCode: a fleet built in code (no positions) is checked
// the same way; problems have no line.
func TestValidateBuiltInCode(t *testing.T) {
	f := &Fleet{APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: "x"}, Spec: Spec{Clusters: []Entry{{Name: "a", DependsOn: []string{"a"}}}}}
	var fe *Error
	if err := Validate(f, testCtx); !errors.As(err, &fe) || len(fe.Problems) != 1 || fe.Problems[0].Line != 0 {
		t.Fatalf("got %v", err)
	}
	if err := Validate(nil, testCtx); err == nil {
		t.Error("Validate(nil) passed")
	}
}
