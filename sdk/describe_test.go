package sdk

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// infoPlugin serves a fixed Info and implements PreCluster, PostCluster and
// PreDestroy (declared here out of lifecycle order on purpose).
type infoPlugin struct{ info Info }

func (p infoPlugin) Info() Info { return p.info }
func (infoPlugin) PreDestroy(context.Context, *Request) (*Result, error) {
	return &Result{Outputs: map[string]string{"hook": "PreDestroy"}}, nil
}
func (infoPlugin) PostCluster(context.Context, *Request) (*Result, error) {
	return &Result{Outputs: map[string]string{"hook": "PostCluster"}}, nil
}
func (infoPlugin) PreCluster(context.Context, *Request) (*Result, error) {
	return &Result{Outputs: map[string]string{"hook": "PreCluster"}}, nil
}

// noHookPlugin implements no hook at all.
type noHookPlugin struct{}

func (noHookPlugin) Info() Info { return Info{Name: "idle", Version: "1.0.0"} }

// everyHookPlugin implements all six hooks; each returns its own name.
type everyHookPlugin struct{}

func (everyHookPlugin) Info() Info { return Info{Name: "every", Version: "1.0.0"} }
func (everyHookPlugin) PostUp(context.Context, *Request) (*Result, error) {
	return named(PostUp), nil
}
func (everyHookPlugin) PreCluster(context.Context, *Request) (*Result, error) {
	return named(PreCluster), nil
}
func (everyHookPlugin) PostCluster(context.Context, *Request) (*Result, error) {
	return named(PostCluster), nil
}
func (everyHookPlugin) PreClusterDelete(context.Context, *Request) (*Result, error) {
	return named(PreClusterDelete), nil
}
func (everyHookPlugin) PreDown(context.Context, *Request) (*Result, error) {
	return named(PreDown), nil
}
func (everyHookPlugin) PreDestroy(context.Context, *Request) (*Result, error) {
	return named(PreDestroy), nil
}

func named(h Hook) *Result { return &Result{Outputs: map[string]string{"hook": string(h)}} }

func validInfo() Info {
	return Info{
		Name:         "acme-dns",
		Version:      "1.2.3-rc.1+build.5",
		Description:  "Acme DNS for clusters",
		Maintainer:   "acme <dns@acme.example>",
		Dependencies: []Dependency{{Name: "localdns", Version: "^1.0"}, {Name: "metallb", Optional: true}},
		Capabilities: []string{CapDocker, CapKubeconfig},
		Outputs:      []string{"endpoint"},
		Timeouts:     map[Hook]time.Duration{PostCluster: 90 * time.Second},
		Config:       &testConfig{Replicas: 2},
	}
}

func TestDescribeValid(t *testing.T) {
	d, err := Describe(infoPlugin{validInfo()})
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	in := validInfo()
	if d.Name != in.Name || d.Version != in.Version || d.Description != in.Description || d.Maintainer != in.Maintainer {
		t.Errorf("identity = %q %q %q %q, want the Info's", d.Name, d.Version, d.Description, d.Maintainer)
	}
	if want := "1.0"; d.Protocol != want {
		t.Errorf("Protocol = %q, want %q", d.Protocol, want)
	}
	if !reflect.DeepEqual(d.Dependencies, in.Dependencies) || !reflect.DeepEqual(d.Capabilities, in.Capabilities) || !reflect.DeepEqual(d.Outputs, in.Outputs) {
		t.Errorf("deps/caps/outputs = %v %v %v, want the Info's", d.Dependencies, d.Capabilities, d.Outputs)
	}
	// Lifecycle order, not the alphabetical order of the methods.
	if want := []Hook{PreCluster, PostCluster, PreDestroy}; !reflect.DeepEqual(d.Hooks, want) {
		t.Errorf("Hooks = %v, want %v", d.Hooks, want)
	}
	if got := d.Timeout(PostCluster); got != 90*time.Second {
		t.Errorf("Timeout(PostCluster) = %v, want the declared 1m30s", got)
	}
	if got := d.Timeout(PreCluster); got != DefaultTimeout {
		t.Errorf("Timeout(PreCluster) = %v, want DefaultTimeout %v", got, DefaultTimeout)
	}
	if !d.Has(PreDestroy) || d.Has(PostUp) {
		t.Errorf("Has(PreDestroy)=%v Has(PostUp)=%v, want true false", d.Has(PreDestroy), d.Has(PostUp))
	}
	if len(d.ConfigSchema) == 0 || !json.Valid(d.ConfigSchema) {
		t.Errorf("ConfigSchema = %q, want a JSON Schema", d.ConfigSchema)
	}
	var defaults map[string]any
	if err := json.Unmarshal(d.ConfigDefaults, &defaults); err != nil {
		t.Fatalf("ConfigDefaults %q: %v", d.ConfigDefaults, err)
	}
	if defaults["replicas"] != float64(2) {
		t.Errorf("ConfigDefaults replicas = %v, want 2", defaults["replicas"])
	}
}

func TestDescribeWithoutConfig(t *testing.T) {
	in := validInfo()
	in.Config = nil
	d, err := Describe(infoPlugin{in})
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if d.ConfigSchema != nil || d.ConfigDefaults != nil {
		t.Errorf("schema/defaults = %q %q, want none for a plugin without config", d.ConfigSchema, d.ConfigDefaults)
	}
}

func TestDescribeRejectsInvalidInfo(t *testing.T) {
	tests := []struct {
		name   string
		plugin Plugin
		edit   func(*Info)
		want   []string // substrings of the error
	}{
		{name: "empty name", edit: func(i *Info) { i.Name = "" }, want: []string{`Name ""`, "lower-case"}},
		{name: "upper-case name", edit: func(i *Info) { i.Name = "Acme" }, want: []string{`Name "Acme"`}},
		{name: "name with underscore", edit: func(i *Info) { i.Name = "acme_dns" }, want: []string{`Name "acme_dns"`}},
		{name: "name starting with a digit", edit: func(i *Info) { i.Name = "1acme" }, want: []string{`Name "1acme"`}},
		{name: "leading v", edit: func(i *Info) { i.Version = "v1.2.3" }, want: []string{`Version "v1.2.3"`, "no leading v"}},
		{name: "two-part version", edit: func(i *Info) { i.Version = "1.2" }, want: []string{`Version "1.2"`}},
		{name: "v and two parts", edit: func(i *Info) { i.Version = "v1.2" }, want: []string{`Version "v1.2"`}},
		{name: "empty version", edit: func(i *Info) { i.Version = "" }, want: []string{`Version ""`}},
		{name: "no hooks", plugin: noHookPlugin{}, want: []string{"implements no hook"}},
		{name: "bad dependency name", edit: func(i *Info) { i.Dependencies = []Dependency{{Name: "Local DNS"}} }, want: []string{`dependency "Local DNS"`}},
		{name: "self dependency", edit: func(i *Info) { i.Dependencies = []Dependency{{Name: i.Name}} }, want: []string{`dependency "acme-dns"`}},
		{name: "bad dependency constraint", edit: func(i *Info) { i.Dependencies = []Dependency{{Name: "localdns", Version: "one-ish"}} }, want: []string{`dependency localdns: version "one-ish" is not a semver constraint`}},
		{name: "timeout for a hook not implemented", edit: func(i *Info) { i.Timeouts = map[Hook]time.Duration{PreDown: time.Second} }, want: []string{"Timeouts names hook PreDown", "does not implement"}},
		{name: "every problem at once", edit: func(i *Info) {
			i.Version = "1"
			i.Dependencies = []Dependency{{Name: "X"}}
			i.Timeouts = map[Hook]time.Duration{PostUp: time.Second}
		}, want: []string{`Version "1"`, `dependency "X"`, "Timeouts names hook PostUp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.plugin
			if p == nil {
				in := validInfo()
				tt.edit(&in)
				p = infoPlugin{in}
			}
			d, err := Describe(p)
			if err == nil {
				t.Fatalf("Describe = %+v, want an error", d)
			}
			if !strings.Contains(err.Error(), "invalid Info") {
				t.Errorf("error %q does not say the Info is invalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, err := NewServer(p, nil); err == nil {
				t.Errorf("NewServer accepted an invalid Info")
			}
		})
	}
}

func TestHooksDiscovery(t *testing.T) {
	tests := []struct {
		plugin Plugin
		want   []Hook
	}{
		{everyHookPlugin{}, AllHooks},
		{infoPlugin{validInfo()}, []Hook{PreCluster, PostCluster, PreDestroy}},
		{noHookPlugin{}, nil},
	}
	for _, tt := range tests {
		hooks := Hooks(tt.plugin)
		if len(hooks) != len(tt.want) {
			t.Errorf("%T: Hooks found %d, want %v", tt.plugin, len(hooks), tt.want)
		}
		for _, h := range tt.want {
			fn, ok := hooks[h]
			if !ok {
				t.Errorf("%T: hook %s not found", tt.plugin, h)
				continue
			}
			// Each function must be the method of the same name.
			res, err := fn(context.Background(), nil)
			if err != nil || res.Outputs["hook"] != string(h) {
				t.Errorf("%T: Hooks()[%s] ran %v (err %v)", tt.plugin, h, res.Outputs["hook"], err)
			}
		}
	}
	d, err := Describe(everyHookPlugin{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Hooks, AllHooks) {
		t.Errorf("Describe().Hooks = %v, want AllHooks %v", d.Hooks, AllHooks)
	}
}

func TestIsClusterHook(t *testing.T) {
	want := map[Hook]bool{PostUp: false, PreCluster: true, PostCluster: true, PreClusterDelete: true, PreDown: false, PreDestroy: false}
	for _, h := range AllHooks {
		if h.IsClusterHook() != want[h] {
			t.Errorf("%s.IsClusterHook() = %v, want %v", h, h.IsClusterHook(), want[h])
		}
	}
}

func TestRequestHelpers(t *testing.T) {
	var got []string
	r := NewRequest(PostCluster, Env{}, &Cluster{Name: "dev"}, map[string]map[string]string{"localdns": {"etcd": "172.30.255.52:2379"}},
		[]byte(`{"replicas":3}`), &testConfig{Replicas: 2, Image: "acme:1"}, func(s string) { got = append(got, s) }, nil)
	r.Progress("plain")
	r.Progress("installing %s in %s", "acme", r.Cluster.Name)
	if want := []string{"plain", "installing acme in dev"}; !reflect.DeepEqual(got, want) {
		t.Errorf("progress = %q, want %q", got, want)
	}
	if v, ok := r.Dep("localdns", "etcd"); !ok || v != "172.30.255.52:2379" {
		t.Errorf("Dep(localdns, etcd) = %q %v", v, ok)
	}
	if _, ok := r.Dep("localdns", "nope"); ok {
		t.Errorf("Dep of a missing key reported ok")
	}
	if _, ok := r.Dep("nope", "etcd"); ok {
		t.Errorf("Dep of a missing plugin reported ok")
	}
	var cfg testConfig
	if err := r.Config(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Replicas != 3 || cfg.Image != "acme:1" {
		t.Errorf("Config = %+v, want replicas 3 from the user and image from the defaults", cfg)
	}
	if string(r.ConfigJSON()) != `{"replicas":3}` {
		t.Errorf("ConfigJSON = %q", r.ConfigJSON())
	}
	if r.Logger() == nil {
		t.Errorf("Logger is nil; want a discarding logger")
	}
	r.Logger().Info("must not panic")
	NewRequest(PostUp, Env{}, nil, nil, nil, nil, nil, nil).Progress("no sink: %s", "ignored")
}
