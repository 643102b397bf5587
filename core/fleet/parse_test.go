package fleet

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// want is one expected problem: its path, where it is written, and a piece
// of the message that says what to do.
type want struct {
	path      string
	line, col int
	msg       string
}

// checkProblems asserts that err is an *Error holding exactly the wanted
// problems, in order.
func checkProblems(t *testing.T, err error, wants []want) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("got error %v (%T), want *fleet.Error", err, err)
	}
	if len(fe.Problems) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v", len(fe.Problems), len(wants), err)
	}
	for i, w := range wants {
		p := fe.Problems[i]
		if p.Path != w.path || !strings.Contains(p.Message, w.msg) {
			t.Errorf("problem %d = %s: %s, want %s: …%s…", i, p.Path, p.Message, w.path, w.msg)
		}
		if w.line != 0 && (p.Line != w.line || p.Column != w.col) {
			t.Errorf("problem %d (%s) at %d:%d, want %d:%d", i, p.Path, p.Line, p.Column, w.line, w.col)
		}
		if p.Line == 0 {
			t.Errorf("problem %d (%s) has no line", i, p.Path)
		}
	}
}

const head = "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\n"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []want
	}{
		{"empty", "", []want{{"(document)", 1, 1, "the manifest is empty; start it with apiVersion: marina.dev/v1alpha1"}}},
		{"only a comment", "# nothing\n", []want{{"(document)", 1, 1, "is empty"}}},
		{"syntax error names the line", head + "spec:\n  clusters: [a\n", []want{{"(document)", 0, 0, "not valid YAML"}}},
		{"not a mapping", "- a\n- b\n", []want{{"(document)", 1, 1, "must be a mapping (key: value), got a list"}}},
		{"missing apiVersion and kind", "metadata: {name: f}\nspec: {clusters: [a]}\n", []want{
			{"apiVersion", 1, 1, "apiVersion is required; add apiVersion: marina.dev/v1alpha1"},
			{"kind", 1, 1, "kind is required; add kind: Fleet"},
		}},
		{"klimax apiVersion", "apiVersion: klimax.dev/v1alpha1\nkind: fleet\n", []want{
			{"apiVersion", 1, 13, `set apiVersion: marina.dev/v1alpha1 (this looks like a klimax manifest`},
			{"kind", 2, 7, `did you mean "Fleet"?`},
		}},
		{"typo in a spec key", head + "spec:\n  maxParalel: 2\n", []want{{"spec.maxParalel", 5, 3, `unknown key "maxParalel"; did you mean "maxParallel"?`}}},
		{"case of a key", head + "spec:\n  clusters:\n  - name: a\n    dependson: [b]\n", []want{{"spec.clusters[0].dependson", 7, 5, `did you mean "dependsOn"? (case matters)`}}},
		{"num has no default", head + "spec:\n  defaults:\n    num: 3\n", []want{{"spec.defaults.num", 6, 5, "set it on an entry of spec.clusters (slots cannot have a default)"}}},
		{"spec key inside an entry", head + "spec:\n  clusters:\n  - name: a\n    strategy: FailFast\n", []want{{"spec.clusters[0].strategy", 7, 5, "it belongs under spec"}}},
		{"option at spec level", head + "spec:\n  labels: {a: b}\n", []want{{"spec.labels", 5, 3, "set it under spec.defaults (every cluster) or on an entry"}}},
		{"unknown key lists valid ones", head + "spec:\n  frobnicate: 1\n", []want{{"spec.frobnicate", 5, 3, "valid keys here: defaults, maxParallel, strategy, clusters"}}},
		{"duplicate key", head + "spec:\n  strategy: FailFast\n  strategy: ContinueOnError\n", []want{{"spec.strategy", 6, 3, `duplicate key "strategy" (first set on line 5); keep one`}}},
		{"num is not a number", head + "spec:\n  clusters:\n  - {name: a, num: three}\n", []want{{"spec.clusters[0].num", 6, 20, `must be a whole number such as 3, got "three"`}}},
		{"num quoted", head + "spec:\n  clusters:\n  - {name: a, num: \"3\"}\n", []want{{"spec.clusters[0].num", 6, 20, "must be a whole number"}}},
		{"maxParallel is a list", head + "spec:\n  maxParallel: [1]\n", []want{{"spec.maxParallel", 5, 16, "must be a whole number such as 3, got a list"}}},
		{"name is a mapping", head + "spec:\n  clusters:\n  - name: {x: y}\n", []want{{"spec.clusters[0].name", 6, 11, "must be a string, got a mapping"}}},
		{"cluster item is a list", head + "spec:\n  clusters:\n  - [a, b]\n", []want{{"spec.clusters[0]", 6, 5, "must be a cluster name or a mapping with name:, got a list"}}},
		{"cluster item is empty", head + "spec:\n  clusters:\n  -\n  - b\n", []want{{"spec.clusters[0]", 0, 0, "got an empty item"}}},
		{"clusters is a mapping", head + "spec:\n  clusters: {a: 1}\n", []want{{"spec.clusters", 5, 13, "must be a list of cluster names or entries"}}},
		{"dependsOn is a string", head + "spec:\n  clusters:\n  - {name: a, dependsOn: b}\n", []want{{"spec.clusters[0].dependsOn", 6, 26, "must be a list of names such as [a, b]"}}},
		{"registries keyword", head + "spec:\n  clusters:\n  - {name: a, registries: al}\n", []want{{"spec.clusters[0].registries", 6, 27, `must be "all", "none" or a list of mirror names such as [docker-io, ghcr-io], got "al"; did you mean "all"?`}}},
		{"registries mapping", head + "spec:\n  defaults:\n    registries: {mirrors: [a]}\n", []want{{"spec.defaults.registries", 6, 17, `must be "all", "none" or a list of mirror names`}}},
		{"plugin as a bool", head + "spec:\n  defaults:\n    plugins:\n      metallb: true\n", []want{{"spec.defaults.plugins.metallb", 7, 16, "must be a mapping such as {enabled: true}"}}},
		{"plugin key typo", head + "spec:\n  defaults:\n    plugins:\n      metallb: {enable: true}\n", []want{{"spec.defaults.plugins.metallb.enable", 7, 17, `did you mean "enabled"?`}}},
		{"enabled is yes", head + "spec:\n  defaults:\n    plugins:\n      metallb: {enabled: yes}\n", []want{{"spec.defaults.plugins.metallb.enabled", 7, 26, `must be true or false, got "yes"`}}},
		{"plugin config is a list", head + "spec:\n  defaults:\n    plugins:\n      metallb: {config: [1]}\n", []want{{"spec.defaults.plugins.metallb.config", 7, 25, "must be a mapping of the plugin's settings"}}},
		{"plugin config not finite", head + "spec:\n  defaults:\n    plugins:\n      metallb: {config: {x: .nan}}\n", []want{{"spec.defaults.plugins.metallb.config.x", 7, 29, "not a finite number; plugin config must be JSON-compatible"}}},
		{"labels value is a list", head + "spec:\n  defaults:\n    labels: {a: [b]}\n", []want{{"spec.defaults.labels.a", 6, 17, "must be a string, got a list"}}},
		{"merge key", head + "x: &x {name: a}\nspec:\n  clusters:\n  - <<: *x\n", []want{
			{"x", 4, 1, `unknown key "x"`},
			{"spec.clusters[0]", 7, 5, "YAML merge keys (<<) are not supported"},
		}},
		{"two documents", head + "spec: {clusters: [a]}\n---\n" + head, []want{{"(document)", 5, 1, "found a second YAML document after '---'; a manifest holds one Fleet: put each fleet in its own file"}}},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nspec:\n  defaults:\n    plugins:\n      p: {config: {v: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]}}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.yaml), "fleet.yaml")
			if f != nil {
				t.Errorf("Parse returned a fleet with an error")
			}
			if tt.want == nil { // only require a bounded, located error
				var fe *Error
				if !errors.As(err, &fe) || len(fe.Problems) == 0 {
					t.Fatalf("got %v, want problems", err)
				}
				for _, p := range fe.Problems {
					if p.Line == 0 {
						t.Errorf("problem %s has no line", p)
					}
				}
				return
			}
			checkProblems(t, err, tt.want)
		})
	}
}

// TestParseReportsAllAtOnce: every problem of a file with several comes
// back in one error, with file:line:col in its text.
func TestParseReportsAllAtOnce(t *testing.T) {
	data, err := os.ReadFile("testdata/manifests/typos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data, "typos.yaml")
	checkProblems(t, err, []want{
		{"spec.maxParalel", 6, 3, `did you mean "maxParallel"?`},
		{"spec.defaults.num", 8, 5, "slots cannot have a default"},
		{"spec.clusters[0].dependson", 11, 5, `did you mean "dependsOn"?`},
		{"spec.clusters[0].registries", 12, 17, `did you mean "none"?`},
		{"spec.clusters[1].workers", 14, 14, `must be a whole number such as 3, got "two"`},
		{"spec.clusters[1].plugins.metallb", 16, 16, "{enabled: true}"},
	})
	for _, s := range []string{"invalid fleet manifest typos.yaml: 6 problems", "\n  typos.yaml:6:3: spec.maxParalel: unknown key", "\n  typos.yaml:14:14: spec.clusters[1].workers:"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error text lacks %q:\n%v", s, err)
		}
	}
	if code := err.(*Error).ExitCode(); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
}

func TestParseFull(t *testing.T) {
	data, err := os.ReadFile("testdata/manifests/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, "full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yes, no, two := true, false, 2
	wantSpec := Spec{
		MaxParallel: 2,
		Strategy:    ContinueOnError,
		Defaults: Options{
			NodeVersion: "v1.37.0",
			Registries:  &Registries{Mode: RegistriesSubset, Names: []string{"docker-io", "ghcr-io"}},
			Plugins:     map[string]PluginSetting{"metallb": {Enabled: &yes}},
			Labels:      map[string]string{"team": "platform"},
		},
		Clusters: []Entry{
			{Name: "hub"},
			{Name: "east", Num: 3, DependsOn: []string{"hub"}, Options: Options{
				NodeVersion: "v1.36.1", Workers: &two, Region: "us-east1", Zone: "us-east1-c",
				Registries: &Registries{Mode: RegistriesAll},
				Plugins: map[string]PluginSetting{
					"externaldns": {Enabled: &no},
					"metallb":     {Config: map[string]any{"pool": "small", "replicas": 2, "extra": []any{"a", "b"}}},
				},
				Labels: map[string]string{"tier": "edge", "team": "edge-team"},
			}, numSet: true},
			{Name: "west", DependsOn: []string{"hub"}, Options: Options{Registries: &Registries{Mode: RegistriesNone}}},
			{Name: "edge", DependsOn: []string{"east", "west"}},
		},
	}
	if f.APIVersion != APIVersion || f.Kind != Kind || f.Metadata.Name != "demo" || f.Source != "full.yaml" {
		t.Errorf("header = %q %q %q %q", f.APIVersion, f.Kind, f.Metadata.Name, f.Source)
	}
	if !reflect.DeepEqual(f.Spec, wantSpec) {
		t.Errorf("spec =\n%#v\nwant\n%#v", f.Spec, wantSpec)
	}
}

// TestClustersMergeDefaults pins the merge rules of spec.defaults.
func TestClustersMergeDefaults(t *testing.T) {
	data, err := os.ReadFile("testdata/manifests/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, "full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cs := f.Clusters()
	yes, no := true, false
	want := []Cluster{
		{Name: "hub", NodeVersion: "v1.37.0", Registries: Registries{Mode: RegistriesSubset, Names: []string{"docker-io", "ghcr-io"}},
			Plugins: map[string]PluginSetting{"metallb": {Enabled: &yes}}, Labels: map[string]string{"team": "platform"}},
		{Name: "east", Num: 3, DependsOn: []string{"hub"}, NodeVersion: "v1.36.1", Workers: 2, Region: "us-east1", Zone: "us-east1-c",
			Registries: Registries{Mode: RegistriesAll},
			Plugins: map[string]PluginSetting{
				"externaldns": {Enabled: &no},
				// enabled from the defaults, config from the entry
				"metallb": {Enabled: &yes, Config: map[string]any{"pool": "small", "replicas": 2, "extra": []any{"a", "b"}}},
			},
			Labels: map[string]string{"team": "edge-team", "tier": "edge"}},
		{Name: "west", DependsOn: []string{"hub"}, NodeVersion: "v1.37.0", Registries: Registries{Mode: RegistriesNone},
			Plugins: map[string]PluginSetting{"metallb": {Enabled: &yes}}, Labels: map[string]string{"team": "platform"}},
		{Name: "edge", DependsOn: []string{"east", "west"}, NodeVersion: "v1.37.0", Registries: Registries{Mode: RegistriesSubset, Names: []string{"docker-io", "ghcr-io"}},
			Plugins: map[string]PluginSetting{"metallb": {Enabled: &yes}}, Labels: map[string]string{"team": "platform"}},
	}
	for i := range want {
		if !reflect.DeepEqual(cs[i], want[i]) {
			t.Errorf("cluster %d =\n%#v\nwant\n%#v", i, cs[i], want[i])
		}
	}
	// The merged maps are copies: changing one cluster leaves the others alone.
	cs[0].Labels["team"] = "changed"
	if f.Clusters()[2].Labels["team"] != "platform" {
		t.Error("merged labels share the defaults' map")
	}
}

func TestRegistriesString(t *testing.T) {
	for _, tt := range []struct {
		r    Registries
		want string
	}{
		{Registries{}, "all"},
		{Registries{Mode: RegistriesAll}, "all"},
		{Registries{Mode: RegistriesNone}, "none"},
		{Registries{Mode: RegistriesSubset}, "none"},
		{Registries{Mode: RegistriesSubset, Names: []string{"a", "b"}}, "a+b"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}
