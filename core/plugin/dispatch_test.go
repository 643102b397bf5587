package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
)

// flatten returns the leaves of a tree of joined errors.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// touched returns the lines the test plugins appended to file.
func touched(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func has(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// nanos parses a start/end output.
func nanos(t *testing.T, res *sdk.Result, key string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(res.Outputs[key], 10, 64)
	if err != nil {
		t.Fatalf("output %s = %q", key, res.Outputs[key])
	}
	return n
}

// TestDispatchOrderOutputsLaziness runs three hooks over a dependency graph
// and checks the order, the outputs each plugin received, that outputs
// accumulate across hooks, and that a plugin starts only for a hook it
// implements.
func TestDispatchOrderOutputsLaziness(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	touch := filepath.Join(t.TempDir(), "touch")
	cfg := []byte(`{"mode":"ok","touch":"` + touch + `"}`)
	mk := func(name string, flags ...string) Plugin {
		return Plugin{Spec: tp(name, marker, append([]string{"-touch", touch}, flags...)...), Config: cfg}
	}
	d := NewDispatcher([]Plugin{
		mk("a"),
		mk("b", "-deps", "a"),
		mk("c", "-deps", "b"),
		mk("d", "-deps", "a?,zz?"),                // optional, one absent
		mk("e", "-hooks", "PostUp", "-deps", "a"), // no PostCluster
		mk("g", "-deps", "e"),                     // after a through e
	}, testOpts())
	defer d.Close()

	// Descriptions are not cached here, so Describe starts every plugin:
	// give e a cached one to keep it lazy.
	d.entries["e"].p.Description = &sdk.Description{Name: "e", Version: "1.0.0", Protocol: "1.0", Hooks: []sdk.Hook{sdk.PostUp}, Dependencies: []sdk.Dependency{{Name: "a"}}}

	var mu sync.Mutex
	var progress []string
	res, err := d.RunHook(context.Background(), sdk.PostCluster, sdk.HookCall{Cluster: &sdk.Cluster{Name: "dev"}}, func(p, m string) {
		mu.Lock() // called concurrently
		defer mu.Unlock()
		progress = append(progress, p+": "+m)
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(progress)
	if want := "a: working on PostCluster,b: working on PostCluster,c: working on PostCluster,d: working on PostCluster,g: working on PostCluster"; strings.Join(progress, ",") != want {
		t.Errorf("progress = %q", progress)
	}
	wantChain := map[string]string{"a": "a", "b": "a,b", "c": "a,b,c", "d": "a,d", "g": "g"}
	if len(res) != len(wantChain) {
		t.Errorf("results for %d plugins, want %v", len(res), wantChain)
	}
	for n, want := range wantChain {
		if r := res[n]; r == nil || r.Outputs["chain"] != want {
			t.Errorf("%s: chain = %v, want %q", n, r, want)
		}
	}
	for _, o := range [][2]string{{"a", "b"}, {"b", "c"}, {"a", "d"}, {"a", "g"}} {
		if nanos(t, res[o[1]], "start") < nanos(t, res[o[0]], "end") {
			t.Errorf("%s started before %s ended", o[1], o[0])
		}
	}
	lines := touched(t, touch)
	if has(lines, "e started") {
		t.Errorf("e was started for PostCluster, which it does not implement: %q", lines)
	}

	// PostUp: everyone runs, e after a, g after e.
	res, err = d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res["e"].Outputs["chain"]; got != "a,e" {
		t.Errorf("e: chain = %q", got)
	}
	if got := res["g"].Outputs["chain"]; got != "a,e,g" {
		t.Errorf("g: chain = %q", got)
	}
	// PreDown: e does not run, but g still sees what e published in PostUp.
	res, err = d.RunHook(context.Background(), sdk.PreDown, sdk.HookCall{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ran := res["e"]; ran {
		t.Error("e ran PreDown")
	}
	if got := res["g"].Outputs["chain"]; got != "a,e,g" {
		t.Errorf("g in PreDown: chain = %q, want the outputs e published in PostUp", got)
	}
	if got := d.Outputs()["e"]["chain"]; got != "a,e" {
		t.Errorf("Outputs()[e] = %q", got)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	assertNoProcesses(t, marker)
}

// TestDispatchExcept: excluded plugins do not run; the others do.
func TestDispatchExcept(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	d := NewDispatcher([]Plugin{{Spec: tp("a", marker)}, {Spec: tp("b", marker, "-deps", "a")}, {Spec: tp("c", marker)}}, testOpts())
	defer d.Close()
	res, err := d.RunHookExcept(context.Background(), sdk.PreCluster, sdk.HookCall{Cluster: &sdk.Cluster{Name: "dev"}}, []string{"a", "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res["b"] == nil || res["b"].Outputs["chain"] != "b" {
		t.Fatalf("results = %v, want only b (without a's outputs)", res)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	assertNoProcesses(t, marker)
}

// TestDispatchStateDir: with a StateRoot, each plugin gets its own 0700
// directory as Env.StateDir, whatever the caller's Env said.
func TestDispatchStateDir(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	root := filepath.Join(t.TempDir(), "state")
	opts := testOpts()
	opts.StateRoot = root
	d := NewDispatcher([]Plugin{{Spec: tp("a", marker)}, {Spec: tp("b", marker)}}, opts)
	defer d.Close()
	res, err := d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{Env: sdk.Env{StateDir: "/caller"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		want := filepath.Join(root, n)
		if got := res[n].Outputs["stateDir"]; got != want {
			t.Errorf("%s: StateDir = %q, want %q", n, got, want)
		}
		if fi, err := os.Stat(want); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: state directory %s: %v %v", n, want, fi, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	assertNoProcesses(t, marker)
}

// TestDispatchConcurrency: two independent 1s hooks take about 1s, not 2s.
// Not parallel with other tests, to keep the timing meaningful.
func TestDispatchConcurrency(t *testing.T) {
	marker := newMarker(t)
	cfg := []byte(`{"mode":"slow","sleep":"1s"}`)
	d := NewDispatcher([]Plugin{
		{Spec: tp("x", marker), Config: cfg},
		{Spec: tp("y", marker), Config: cfg},
	}, testOpts())
	defer d.Close()
	if _, err := d.Describe(context.Background()); err != nil { // start both
		t.Fatal(err)
	}
	start := time.Now()
	res, err := d.RunHook(context.Background(), sdk.PostCluster, sdk.HookCall{}, nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// Concurrency is shown by the overlap below (timestamps the hooks
	// recorded), not by wall time, which load on the machine stretches.
	if elapsed < time.Second {
		t.Errorf("two 1s hooks took %s", elapsed)
	}
	if nanos(t, res["x"], "start") > nanos(t, res["y"], "end") || nanos(t, res["y"], "start") > nanos(t, res["x"], "end") {
		t.Error("the hooks did not overlap")
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
	assertNoProcesses(t, marker)
}

// TestDispatchFailure: the first failure cancels the rest; only the real
// failure is reported; a dependent of the failed plugin never runs.
func TestDispatchFailure(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	touch := filepath.Join(t.TempDir(), "touch")
	d := NewDispatcher([]Plugin{
		{Spec: tp("p1", marker), Config: []byte(`{"mode":"panic"}`)},
		{Spec: tp("p2", marker), Config: []byte(`{"mode":"slow","sleep":"30s"}`)},
		{Spec: tp("p3", marker, "-deps", "p1"), Config: []byte(`{"mode":"ok","touch":"` + touch + `"}`)},
	}, testOpts())
	start := time.Now()
	res, err := d.RunHook(context.Background(), sdk.PostCluster, sdk.HookCall{}, nil)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("RunHook took %s", d)
	}
	errs := flatten(err)
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want only p1's", err)
	}
	pe := asError(t, errs[0])
	if pe.Plugin != "p1" || pe.Kind != KindPanic || !strings.HasPrefix(err.Error(), "plugin p1 1.0.0, hook PostCluster: panicked: boom "+marker) {
		t.Errorf("error = %v", err)
	}
	if len(res) != 0 {
		t.Errorf("results = %v", res)
	}
	if lines := touched(t, touch); len(lines) != 0 {
		t.Errorf("p3 ran after its dependency failed: %q", lines)
	}
	// The panicked plugin is never called again by this Dispatcher: a
	// second run reports its original error. p2, only cancelled, is
	// started afresh (and cancelled again); p3 again does not run.
	_, err2 := d.RunHook(context.Background(), sdk.PostCluster, sdk.HookCall{}, nil)
	if errs2 := flatten(err2); len(errs2) != 1 || errs2[0] != errs[0] {
		t.Errorf("second run: %v, want only p1's original error", err2)
	}
	if lines := touched(t, touch); len(lines) != 0 {
		t.Errorf("p3 ran after its dependency failed: %q", lines)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	assertNoProcesses(t, marker)
}

// TestDispatchCancel: the caller's cancellation is reported for every
// plugin that was running.
func TestDispatchCancel(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	cfg := []byte(`{"mode":"slow","sleep":"30s"}`)
	d := NewDispatcher([]Plugin{{Spec: tp("s1", marker), Config: cfg}, {Spec: tp("s2", marker), Config: cfg}}, testOpts())
	defer d.Close()
	if _, err := d.Describe(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := d.RunHook(ctx, sdk.PostCluster, sdk.HookCall{}, nil)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancelled RunHook took %s", d)
	}
	errs := flatten(err)
	if len(errs) != 2 {
		t.Fatalf("errors = %v, want both plugins cancelled", err)
	}
	for i, name := range []string{"s1", "s2"} {
		if pe := asError(t, errs[i]); pe.Plugin != name || pe.Kind != KindCancelled {
			t.Errorf("error %d = %v", i, errs[i])
		}
	}
	assertNoProcesses(t, marker)
}

func TestDispatchValidate(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	d := NewDispatcher([]Plugin{
		{Spec: tp("a", marker), Config: []byte(`{"replicas":-1}`)},
		{Spec: tp("b", marker), Config: []byte(`{"nme":1}`)},
		{Spec: tp("c", marker), Config: []byte(`{"mode":"ok"}`)},
	}, testOpts())
	defer d.Close()
	err := d.Validate(context.Background())
	errs := flatten(err)
	if len(errs) != 2 {
		t.Fatalf("errors = %v", err)
	}
	for i, want := range []struct{ plugin, path, msg string }{
		{"a", "replicas", "plugin a: config field replicas: must be 0 or more, got -1"},
		{"b", "nme", `plugin b: config field nme: unknown field "nme"`},
	} {
		var ce *ConfigError
		if !errors.As(errs[i], &ce) || ce.Plugin != want.plugin || len(ce.Diagnostics) != 1 || ce.Diagnostics[0].Path != want.path || !strings.HasPrefix(errs[i].Error(), want.msg) {
			t.Errorf("error %d = %v, want %q", i, errs[i], want.msg)
		}
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
	assertNoProcesses(t, marker)
}

// TestDependencyErrors: a missing dependency, a version mismatch or a cycle
// is reported before any plugin process starts (descriptions cached) or
// before any hook runs (descriptions read from the plugins).
func TestDependencyErrors(t *testing.T) {
	t.Parallel()
	desc := func(name, version string, deps ...sdk.Dependency) *sdk.Description {
		return &sdk.Description{Name: name, Version: version, Protocol: "1.0", Hooks: sdk.AllHooks, Dependencies: deps}
	}
	dep := func(name string) sdk.Dependency { return sdk.Dependency{Name: name} }
	tests := []struct {
		name  string
		descs []*sdk.Description
		want  []string
	}{
		{"missing", []*sdk.Description{desc("a", "1.0.0", dep("zz")), desc("b", "1.0.0", sdk.Dependency{Name: "yy", Optional: true})},
			[]string{"plugin a requires plugin zz, which is neither built in nor in the config: install it if it is not installed (`marina plugin install SOURCE`) and enable it with `marina plugin enable zz`, or disable a"}},
		{"cycle", []*sdk.Description{desc("a", "1.0.0", dep("b")), desc("b", "1.0.0", dep("a")), desc("c", "1.0.0", dep("a"))},
			[]string{"plugin dependency cycle: a -> b -> a"}},
		{"long cycle", []*sdk.Description{desc("c", "1.0.0", dep("a")), desc("a", "1.0.0", dep("b")), desc("b", "1.0.0", dep("c"))},
			[]string{"plugin dependency cycle: a -> b -> c -> a"}},
		{"version", []*sdk.Description{desc("a", "1.0.0", sdk.Dependency{Name: "b", Version: "^2.0"}), desc("b", "1.4.0")},
			[]string{"plugin a requires b ^2.0, but b 1.4.0 is selected"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, cached := range []bool{true, false} {
				marker := newMarker(t)
				touch := filepath.Join(t.TempDir(), "touch")
				var plugins []Plugin
				for _, d := range tc.descs {
					var deps []string
					for _, dp := range d.Dependencies {
						s := dp.Name
						if dp.Optional {
							s += "?"
						}
						deps = append(deps, s)
					}
					p := Plugin{Spec: tp(d.Name, marker, "-touch", touch, "-version", d.Version, "-deps", strings.Join(deps, ",")), Config: []byte(`{"touch":"` + touch + `"}`)}
					if cached {
						p.Description = d
					}
					if d.Name == "a" && tc.name == "version" {
						// The SDK's flags cannot express a constraint: cache it.
						p.Description = d
					}
					plugins = append(plugins, p)
				}
				disp := NewDispatcher(plugins, testOpts())
				for _, run := range []func() error{
					func() error { return disp.Validate(context.Background()) },
					func() error {
						_, err := disp.RunHook(context.Background(), sdk.PostCluster, sdk.HookCall{}, nil)
						return err
					},
				} {
					err := run()
					var de *DependencyError
					if !errors.As(err, &de) {
						t.Fatalf("cached=%v: error = %v, want a *DependencyError", cached, err)
					}
					for _, w := range tc.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("cached=%v: error %q lacks %q", cached, err, w)
						}
					}
				}
				lines := touched(t, touch)
				if cached && tc.name != "version" && len(lines) != 0 {
					t.Errorf("processes started although every description was cached: %q", lines)
				}
				for _, l := range lines {
					if !strings.HasSuffix(l, " started") {
						t.Errorf("cached=%v: a hook ran: %q", cached, l)
					}
				}
				if err := disp.Close(); err != nil {
					t.Error(err)
				}
				assertNoProcesses(t, marker)
			}
		})
	}
}

func TestDispatchDuplicateName(t *testing.T) {
	t.Parallel()
	d := NewDispatcher([]Plugin{{Spec: Spec{Name: "a"}}, {Spec: Spec{Name: "a"}}}, testOpts())
	if _, err := d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil); err == nil || !strings.Contains(err.Error(), "plugin a is configured twice") {
		t.Errorf("error = %v", err)
	}
	if err := d.Validate(context.Background()); err == nil {
		t.Error("Validate accepted a duplicate")
	}
}

// TestDispatchCapabilities: through real plugin processes, a plugin gets the
// Docker endpoint, the kubeconfig and the registries' credentials only for
// the capabilities it declares — its process inherits no DOCKER_HOST or
// KUBECONFIG from marina's either — and a hook that asks for a host change
// it did not declare fails, with nothing of its result applied.
func TestDispatchCapabilities(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///users/own/docker.sock")
	t.Setenv("KUBECONFIG", "/users/own/kubeconfig")
	marker := newMarker(t)
	report := []byte(`{"report":true}`)
	d := NewDispatcher([]Plugin{
		{Spec: tp("blind", marker), Config: report},
		{Spec: tp("seeing", marker, "-caps", "docker,kubeconfig,registry.credentials"), Config: report},
	}, testOpts())
	defer d.Close()
	call := sdk.HookCall{
		Env:     sdk.Env{DockerHost: "unix:///lab/docker.sock", Mirrors: []sdk.Mirror{{Name: "docker-io", Port: 5000, Username: "u", Password: "secret"}}},
		Cluster: &sdk.Cluster{Name: "dev", Kubeconfig: []byte("apiVersion: v1\n"), KubeconfigPath: "/lab/dev.kubeconfig"},
	}
	res, err := d.RunHook(context.Background(), sdk.PostCluster, call, nil)
	if err != nil {
		t.Fatal(err)
	}
	blind, seeing := res["blind"].Outputs, res["seeing"].Outputs
	for _, k := range []string{"dockerHost", "kubeconfig", "mirrorPassword", "envDocker", "envKube"} {
		if blind[k] != "" {
			t.Errorf("undeclared: the plugin saw %s = %q", k, blind[k])
		}
	}
	if seeing["dockerHost"] != "unix:///lab/docker.sock" || seeing["kubeconfig"] != "apiVersion: v1\n/lab/dev.kubeconfig" || seeing["mirrorPassword"] != "secret" {
		t.Errorf("declared: the plugin saw %v", seeing)
	}
	if seeing["envDocker"] != "" || seeing["envKube"] != "" {
		t.Errorf("declared: the process inherited DOCKER_HOST %q, KUBECONFIG %q; the lab reaches it through the request only", seeing["envDocker"], seeing["envKube"])
	}
	if call.Cluster.KubeconfigPath == "" || call.Env.Mirrors[0].Password == "" {
		t.Error("the caller's call was changed")
	}

	// A resolver change without host.resolver: the hook fails, its
	// outputs are not published and its host changes not returned.
	d2 := NewDispatcher([]Plugin{
		{Spec: tp("asker", marker), Config: []byte(`{"resolver":"demo.internal","outputs":{"chain":"x"}}`)},
		{Spec: tp("allowed", marker, "-caps", "host.resolver"), Config: []byte(`{"resolver":"demo.internal"}`)},
	}, testOpts())
	defer d2.Close()
	res, err = d2.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
	var pe *Error
	if !errors.As(err, &pe) || pe.Plugin != "asker" || pe.Kind != KindCapability || !strings.Contains(err.Error(), "host.resolver") {
		t.Fatalf("undeclared resolver change: err = %v, want a KindCapability error of asker naming host.resolver", err)
	}
	if r := res["asker"]; r != nil {
		t.Errorf("asker's result was kept: %+v", r)
	}
	if _, ok := d2.Outputs()["asker"]; ok {
		t.Errorf("asker's outputs were published: %v", d2.Outputs()["asker"])
	}
	// allowed may have been cancelled by asker's failure; run it alone.
	d3 := NewDispatcher([]Plugin{{Spec: tp("allowed", marker, "-caps", "host.resolver"), Config: []byte(`{"resolver":"demo.internal"}`)}}, testOpts())
	defer d3.Close()
	res, err = d3.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
	if err != nil || len(res["allowed"].HostChanges) != 1 {
		t.Errorf("declared resolver change: %v, %+v", err, res["allowed"])
	}

	// A capability this marina does not know refuses the plugin at start.
	d4 := NewDispatcher([]Plugin{{Spec: Spec{Name: "raw", Path: rawPluginBin, Args: []string{"-caps", "docker,gpu", "-marker", marker}}}}, testOpts())
	defer d4.Close()
	_, err = d4.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
	if !errors.As(err, &pe) || pe.Kind != KindCapability || !strings.Contains(err.Error(), "gpu") || !strings.Contains(err.Error(), "upgrade marina") {
		t.Fatalf("unknown capability: err = %v, want a KindCapability error naming gpu and the fix", err)
	}
	for _, d := range []*Dispatcher{d, d2, d3, d4} {
		_ = d.Close()
	}
	assertNoProcesses(t, marker)
}
