package plugintest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
	"github.com/bcollard/marina/sdk/plugintest/internal/exampleplugin"
)

func TestDescribe(t *testing.T) {
	h := plugintest.New(t, exampleplugin.Plugin{})
	d := h.Describe()
	if d.Name != "example" || d.Version != "0.3.1" || d.Protocol != "1.0" {
		t.Errorf("identity = %s %s protocol %s", d.Name, d.Version, d.Protocol)
	}
	if want := []sdk.Hook{sdk.PreCluster, sdk.PostCluster}; !reflect.DeepEqual(d.Hooks, want) {
		t.Errorf("hooks = %v, want %v", d.Hooks, want)
	}
	if d.Timeout(sdk.PostCluster) != 2*time.Minute || d.Timeout(sdk.PreCluster) != sdk.DefaultTimeout {
		t.Errorf("timeouts = %v", d.Timeouts)
	}
	var defaults map[string]any
	if err := json.Unmarshal(d.ConfigDefaults, &defaults); err != nil {
		t.Fatal(err)
	}
	if defaults["replicas"] != float64(1) || defaults["wait"] != "30s" {
		t.Errorf("defaults = %s", d.ConfigDefaults)
	}
	var schema struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(d.ConfigSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if p := schema.Properties["pools"]; p.Type != "array" || !strings.Contains(p.Description, "Address pools") {
		t.Errorf("schema pools = %+v", p)
	}
	if h.PID() != 0 || h.Stderr() != "" {
		t.Errorf("an in-process harness has PID %d and stderr %q", h.PID(), h.Stderr())
	}
}

func TestNewRejectsInvalidPlugin(t *testing.T) {
	r := runRecorded(t, func(tb testing.TB) {
		plugintest.New(tb, badPlugin{})
		t.Errorf("New returned for an invalid plugin")
	})
	if !r.failed || !strings.Contains(r.messages(), `Version "v1"`) {
		t.Errorf("New(invalid) failed=%v messages=%q, want a fatal error naming the bad Version", r.failed, r.messages())
	}
}

type badPlugin struct{ exampleplugin.Plugin }

func (badPlugin) Info() sdk.Info { return sdk.Info{Name: "bad", Version: "v1"} }

func TestRunPreCluster(t *testing.T) {
	h := plugintest.New(t, exampleplugin.Plugin{})
	tests := []struct {
		name        string
		opts        []plugintest.Option
		wantLabel   string
		wantContent string
		wantCluster string
	}{
		{name: "defaults", wantLabel: "1", wantContent: "cluster=dev\nslot=1\n", wantCluster: "dev"},
		{name: "config and cluster", opts: []plugintest.Option{
			plugintest.WithConfig(`{"replicas": 3}`),
			plugintest.WithCluster(func(c *sdk.Cluster) { c.Name, c.Slot = "prod", 7 }),
		}, wantLabel: "3", wantContent: "cluster=prod\nslot=7\n", wantCluster: "prod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.Run(sdk.PreCluster, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Kind == nil {
				t.Fatalf("no kind contribution: %+v", res)
			}
			if got := res.Kind.NodeLabels["example.marina.dev/replicas"]; got != tt.wantLabel {
				t.Errorf("replicas label = %q, want %q", got, tt.wantLabel)
			}
			if len(res.Kind.NodeFiles) != 1 || string(res.Kind.NodeFiles[0].Content) != tt.wantContent {
				t.Errorf("node files = %+v, want content %q", res.Kind.NodeFiles, tt.wantContent)
			}
			if want := []string{"preparing " + tt.wantCluster}; !reflect.DeepEqual(h.Progress(), want) {
				t.Errorf("progress = %q, want %q", h.Progress(), want)
			}
		})
	}
}

func TestRunPostCluster(t *testing.T) {
	h := plugintest.New(t, exampleplugin.Plugin{})
	var stateDir string
	captureState := plugintest.WithEnv(func(e *sdk.Env) { stateDir = e.StateDir })

	res, err := h.Run(sdk.PostCluster, captureState)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"pools": "dev-0,dev-1", "zone": "demo.internal"}; !reflect.DeepEqual(res.Outputs, want) {
		t.Errorf("outputs = %v, want %v (from the default cluster's MetalLB pools)", res.Outputs, want)
	}
	wantProgress := []string{"announcing pool dev-0 (172.30.1.1-172.30.1.7)", "announcing pool dev-1 (172.30.1.16-172.30.1.254)"}
	if !reflect.DeepEqual(h.Progress(), wantProgress) {
		t.Errorf("progress = %q, want %q", h.Progress(), wantProgress)
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "dev.pools"))
	if err != nil || string(b) != "dev-0\ndev-1\n" {
		t.Errorf("state file = %q, %v", b, err)
	}

	// Config pools and a dependency's output.
	res, err = h.Run(sdk.PostCluster,
		plugintest.WithConfig(`{"pools":[{"name":"web","addresses":"172.30.1.20-172.30.1.29"}]}`),
		plugintest.WithDeps(map[string]map[string]string{"localdns": {"zone": "lab.test"}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"pools": "web", "zone": "lab.test"}; !reflect.DeepEqual(res.Outputs, want) {
		t.Errorf("outputs = %v, want %v", res.Outputs, want)
	}
	if want := []string{"announcing pool web (172.30.1.20-172.30.1.29)"}; !reflect.DeepEqual(h.Progress(), want) {
		t.Errorf("progress of the last run = %q, want only %q", h.Progress(), want)
	}
}

func TestRequireIdempotent(t *testing.T) {
	h := plugintest.New(t, exampleplugin.Plugin{})
	res := h.RequireIdempotent(t, sdk.PostCluster, plugintest.WithConfig(`{"replicas":2}`))
	if res.Outputs["pools"] != "dev-0,dev-1" {
		t.Errorf("RequireIdempotent returned %+v", res)
	}
	h.RequireIdempotent(t, sdk.PreCluster)
}

// counter declares something new on every run: not idempotent.
type counter struct {
	mu sync.Mutex
	n  int
}

func (*counter) Info() sdk.Info { return sdk.Info{Name: "counter", Version: "1.0.0"} }
func (c *counter) PostUp(context.Context, *sdk.Request) (*sdk.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return &sdk.Result{Outputs: map[string]string{"n": strings.Repeat("x", c.n)}}, nil
}

func TestRequireIdempotentCatchesDrift(t *testing.T) {
	h := plugintest.New(t, &counter{})
	r := runRecorded(t, func(tb testing.TB) { h.RequireIdempotent(tb, sdk.PostUp) })
	if !r.failed || !strings.Contains(r.messages(), "PostUp is not idempotent") || !strings.Contains(r.messages(), `"n":"xx"`) {
		t.Errorf("failed=%v messages=%q, want a failure showing both results", r.failed, r.messages())
	}
	r = runRecorded(t, func(tb testing.TB) { h.RequireIdempotent(tb, sdk.PreDown) })
	if !r.failed || !strings.Contains(r.messages(), "PreDown failed on its first run") {
		t.Errorf("failed=%v messages=%q, want a failure for an unimplemented hook", r.failed, r.messages())
	}
}

func TestConfigErrors(t *testing.T) {
	h := plugintest.New(t, exampleplugin.Plugin{})
	tests := []struct {
		config string
		want   []sdk.Diagnostic
	}{
		{config: ``},
		{config: `{"replicas": 2, "wait": "1m"}`},
		{config: `{"pools":[{"name":"a","addresses":"x"},{"nmae":"b"}]}`, want: []sdk.Diagnostic{
			{Severity: sdk.SeverityError, Path: "pools[1].nmae", Summary: `unknown field "nmae"; did you mean "name"?`}}},
		{config: `{"replicas":"two","wait":5}`, want: []sdk.Diagnostic{
			{Severity: sdk.SeverityError, Path: "replicas", Summary: `must be a whole number, got the string "two"`},
			{Severity: sdk.SeverityError, Path: "wait", Summary: "must be a duration such as 30s or 5m, got 5"}}},
		{config: `{"replicas":9,"pools":[{"name":"a"},{"name":"a"}]}`, want: []sdk.Diagnostic{
			{Severity: sdk.SeverityError, Path: "replicas", Summary: "must be between 1 and 5, got 9"},
			{Severity: sdk.SeverityError, Path: "pools[1].name", Summary: `"a" is used twice`}}},
		{config: `{"wait":"20m"}`, want: []sdk.Diagnostic{
			{Severity: sdk.SeverityWarning, Path: "wait", Summary: "more than 10m makes failures slow to show"}}},
	}
	for _, tt := range tests {
		if got := h.ValidateConfig(tt.config); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ValidateConfig(%s) =\n %+v\nwant\n %+v", tt.config, got, tt.want)
		}
	}

	// Run validates first, like marina: the hook does not run.
	_, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"pools":[{"nmae":"b"}]}`))
	var ce *sdk.ConfigError
	if !errors.As(err, &ce) || len(ce.Diagnostics) != 1 || ce.Diagnostics[0].Path != "pools[0].nmae" {
		t.Fatalf("Run with a bad config = %v, want a *sdk.ConfigError at pools[0].nmae", err)
	}
	if len(h.Progress()) != 0 {
		t.Errorf("the hook ran despite the config error: progress %q", h.Progress())
	}
	// A warning does not stop the hook.
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"wait":"20m"}`)); err != nil {
		t.Errorf("a config warning failed the run: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	h := plugintest.New(t, exampleplugin.Plugin{})
	testRunErrors(t, h)
}

// testRunErrors checks how failures reach the host; shared by the
// in-process and out-of-process tests.
func testRunErrors(t *testing.T, h *plugintest.Harness) {
	t.Helper()
	tests := []struct {
		name     string
		hook     sdk.Hook
		opts     func(t *testing.T) []plugintest.Option
		is       error
		code     codes.Code
		contains []string
	}{
		{name: "error", hook: sdk.PostCluster, opts: config(`{"fail":"error"}`),
			code: codes.Unknown, contains: []string{"PostCluster: asked to fail"}},
		{name: "panic", hook: sdk.PreCluster, opts: config(`{"fail":"panic"}`),
			is: plugintest.ErrPanicked, code: codes.Internal, contains: []string{"panicked in PreCluster", "asked to panic", "exampleplugin.misbehave"}},
		{name: "deadline", hook: sdk.PostCluster, opts: func(*testing.T) []plugintest.Option {
			return []plugintest.Option{plugintest.WithConfig(`{"fail":"block"}`), plugintest.WithTimeout(300 * time.Millisecond)}
		},
			is: context.DeadlineExceeded, code: codes.DeadlineExceeded},
		{name: "cancel", hook: sdk.PostCluster, opts: func(t *testing.T) []plugintest.Option {
			return []plugintest.Option{plugintest.WithConfig(`{"fail":"block"}`), plugintest.WithContext(cancelledSoon(t))}
		},
			is: context.Canceled, code: codes.Canceled},
		{name: "not implemented", hook: sdk.PostUp, is: plugintest.ErrNotImplemented, code: codes.Unimplemented,
			contains: []string{"plugin example does not implement PostUp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []plugintest.Option
			if tt.opts != nil {
				opts = tt.opts(t)
			}
			start := time.Now()
			res, err := h.Run(tt.hook, opts...)
			if err == nil {
				t.Fatalf("Run = %+v, want an error", res)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("the failure took %v", time.Since(start))
			}
			var pe *plugintest.PluginError
			if !errors.As(err, &pe) || pe.Op != string(tt.hook) || pe.Code != tt.code || status.Code(err) != tt.code {
				t.Fatalf("Run error = %#v (%v), want a PluginError for %s with code %v", err, err, tt.hook, tt.code)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			for _, c := range tt.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not contain %q", err, c)
				}
			}
		})
	}
	// The plugin survives its failures.
	if _, err := h.Run(sdk.PreCluster); err != nil {
		t.Errorf("after the failures: %v", err)
	}
}

func config(json string) func(*testing.T) []plugintest.Option {
	return func(*testing.T) []plugintest.Option { return []plugintest.Option{plugintest.WithConfig(json)} }
}

func cancelledSoon(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(300*time.Millisecond, cancel)
	t.Cleanup(func() { timer.Stop(); cancel() })
	return ctx
}

// recorder captures what a hook receives.
type recorder struct {
	mu       sync.Mutex
	reqs     []*sdk.Request
	deadline []time.Duration
	files    []string // kubeconfig file content at hook time
}

func (*recorder) Info() sdk.Info {
	return sdk.Info{Name: "recorder", Version: "1.0.0", Capabilities: []string{sdk.CapDocker, sdk.CapKubeconfig}, Timeouts: map[sdk.Hook]time.Duration{sdk.PostCluster: 3 * time.Minute}}
}
func (r *recorder) record(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	dl, _ := ctx.Deadline()
	r.deadline = append(r.deadline, time.Until(dl))
	file := ""
	if req.Cluster != nil {
		b, _ := os.ReadFile(req.Cluster.KubeconfigPath)
		file = string(b)
	}
	r.files = append(r.files, file)
	return &sdk.Result{}, nil
}
func (r *recorder) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return r.record(ctx, req)
}
func (r *recorder) PreCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return r.record(ctx, req)
}
func (r *recorder) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return r.record(ctx, req)
}

func (r *recorder) last() (*sdk.Request, time.Duration, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.reqs) - 1
	return r.reqs[n], r.deadline[n], r.files[n]
}

func TestFakeHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://docker.example:2376")
	rec := &recorder{}
	h := plugintest.New(t, rec)

	if _, err := h.Run(sdk.PostUp, plugintest.WithCluster(func(c *sdk.Cluster) { c.Name = "ignored" })); err != nil {
		t.Fatal(err)
	}
	req, deadline, _ := rec.last()
	env := req.Env
	want := plugintest.DefaultEnv(env.StateDir)
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env = %+v, want %+v", env, want)
	}
	if env.BridgeCIDR != "172.30.0.0/16" || env.DNSZone != "demo.internal" || env.DNSEtcdIP != "172.30.255.52" || env.DNSServerIP != "172.30.255.53" ||
		env.DockerHost != plugintest.NoDockerHost || env.HostOS != runtime.GOOS || env.Gateway != "172.30.0.1" {
		t.Errorf("env = %+v", env)
	}
	if fi, err := os.Stat(env.StateDir); err != nil || !fi.IsDir() {
		t.Errorf("state dir %q: %v", env.StateDir, err)
	}
	if req.Cluster != nil {
		t.Errorf("PostUp got a cluster: %+v", req.Cluster)
	}
	// $DOCKER_HOST may be the author's running lab: never used.
	if d := plugintest.DefaultEnv("x").DockerHost; d != plugintest.NoDockerHost {
		t.Errorf("DefaultEnv's DockerHost = %q with DOCKER_HOST set, want NoDockerHost", d)
	}
	if deadline > sdk.DefaultTimeout || deadline < sdk.DefaultTimeout-time.Minute {
		if dl, ok := t.Deadline(); !ok || time.Until(dl) > sdk.DefaultTimeout {
			t.Errorf("PostUp deadline in %v, want the default %v", deadline, sdk.DefaultTimeout)
		}
	}
	firstRun, stateDir := req.RunID, env.StateDir

	// PreCluster: the slot-1 cluster, no kubeconfig yet.
	if _, err := h.Run(sdk.PreCluster); err != nil {
		t.Fatal(err)
	}
	req, _, file := rec.last()
	c := req.Cluster
	if c == nil || c.Name != "dev" || c.Slot != 1 || c.APIPort != 7001 || c.ServiceSubnet != "10.1.0.0/16" || c.PodSubnet != "10.11.0.0/16" {
		t.Fatalf("cluster = %+v", c)
	}
	wantPools := []sdk.AddressRange{{First: "172.30.1.1", Last: "172.30.1.7"}, {First: "172.30.1.16", Last: "172.30.1.254"}}
	if !reflect.DeepEqual(c.MetalLBPools, wantPools) {
		t.Errorf("pools = %v, want %v", c.MetalLBPools, wantPools)
	}
	if len(c.Kubeconfig) != 0 || file != "" || c.KubeconfigPath == "" {
		t.Errorf("PreCluster kubeconfig = %q at %q (file %q), want a path but no kubeconfig yet", c.Kubeconfig, c.KubeconfigPath, file)
	}
	if req.RunID == firstRun || req.Env.StateDir != stateDir {
		t.Errorf("run ids %q %q (want distinct), state dirs %q %q (want the same)", firstRun, req.RunID, stateDir, req.Env.StateDir)
	}

	// PostCluster: kubeconfig in the request and on disk, edits applied, the plugin's deadline.
	if _, err := h.Run(sdk.PostCluster,
		plugintest.WithCluster(func(c *sdk.Cluster) { c.Name, c.APIPort = "edge", 7005 }),
		plugintest.WithEnv(func(e *sdk.Env) { e.DNSZone = "lab.test" })); err != nil {
		t.Fatal(err)
	}
	req, deadline, file = rec.last()
	if req.Cluster.Name != "edge" || req.Env.DNSZone != "lab.test" {
		t.Errorf("edits not applied: cluster %q zone %q", req.Cluster.Name, req.Env.DNSZone)
	}
	kc := string(req.Cluster.Kubeconfig)
	// The kubeconfig points at the harness's stand-in, never at the
	// cluster's API port on this machine (a live lab's).
	if strings.Contains(kc, ":7005") || !strings.Contains(kc, "server: https://127.0.0.1:") || !strings.Contains(kc, "current-context: kind-edge") || file != kc {
		t.Errorf("kubeconfig = %q, file = %q; want one for edge pointing at the harness's stand-in, also on disk", kc, file)
	}
	if filepath.Base(req.Cluster.KubeconfigPath) != "edge.kubeconfig" {
		t.Errorf("kubeconfig path = %q", req.Cluster.KubeconfigPath)
	}
	if deadline > 3*time.Minute || deadline < 2*time.Minute {
		if dl, ok := t.Deadline(); !ok || time.Until(dl) > 3*time.Minute {
			t.Errorf("PostCluster deadline in %v, want the plugin's 3m", deadline)
		}
	}
}

func TestDefaultClusterIsFresh(t *testing.T) {
	a := plugintest.DefaultCluster()
	a.MetalLBPools[0].First = "changed"
	a.Labels["x"] = "y"
	if b := plugintest.DefaultCluster(); b.MetalLBPools[0].First != "172.30.1.1" || b.Labels["x"] != "" {
		t.Errorf("DefaultCluster shares state between calls: %+v", b)
	}
}

// tbRecorder is a testing.TB whose failures are recorded instead of failing
// the real test; Fatal ends the goroutine, as in the testing package.
type tbRecorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *tbRecorder) Helper() {}
func (r *tbRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *tbRecorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *tbRecorder) Fatal(args ...any) {
	r.Errorf("%s", fmt.Sprint(args...))
	runtime.Goexit()
}
func (r *tbRecorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *tbRecorder) FailNow()          { r.Fatalf("FailNow") }
func (r *tbRecorder) Fail()             { r.Errorf("Fail") }
func (r *tbRecorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *tbRecorder) messages() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// runRecorded runs fn with a recording TB on its own goroutine and waits.
func runRecorded(t *testing.T, fn func(tb testing.TB)) *tbRecorder {
	r := &tbRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the recorded function did not finish")
	}
	return r
}
