package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

// fakeStream records what RunHook sends. It is deliberately not safe for
// concurrent use: the race detector then proves the server serialises sends.
type fakeStream struct {
	grpc.ServerStream
	ctx    context.Context
	events []*pb.HookEvent
}

func (s *fakeStream) Context() context.Context { return s.ctx }
func (s *fakeStream) Send(e *pb.HookEvent) error {
	s.events = append(s.events, e)
	return nil
}

func (s *fakeStream) progress() []string {
	var out []string
	for _, e := range s.events {
		if p := e.GetProgress(); p != nil {
			out = append(out, p.GetMessage())
		}
	}
	return out
}

// scripted is a plugin whose hooks run the function under test.
type scripted struct {
	info Info
	fn   func(ctx context.Context, req *Request) (*Result, error)
}

func (p *scripted) Info() Info { return p.info }
func (p *scripted) PostCluster(ctx context.Context, req *Request) (*Result, error) {
	return p.fn(ctx, req)
}
func (p *scripted) PostUp(ctx context.Context, req *Request) (*Result, error) { return p.fn(ctx, req) }

func newScripted(t *testing.T, fn func(ctx context.Context, req *Request) (*Result, error)) *Server {
	t.Helper()
	srv, err := NewServer(&scripted{info: Info{Name: "scripted", Version: "0.1.0", Config: testDefaults()}, fn: fn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func runHook(srv *Server, ctx context.Context, req *pb.HookRequest) (*fakeStream, error) {
	st := &fakeStream{ctx: ctx}
	return st, srv.RunHook(req, st)
}

func TestRunHookProgressThenResult(t *testing.T) {
	var got *Request
	var cfg testConfig
	srv := newScripted(t, func(ctx context.Context, req *Request) (*Result, error) {
		got = req
		if err := req.Config(&cfg); err != nil {
			return nil, err
		}
		req.Progress("step %d", 1)
		req.Progress("step %d", 2)
		return &Result{Outputs: map[string]string{"done": "yes"}}, nil
	})
	req := &pb.HookRequest{
		Hook: pb.Hook_HOOK_POST_CLUSTER, Env: envToPB(fullEnv()), Cluster: clusterToPB(fullCluster()),
		ConfigJson: []byte(`{"replicas":5}`), RunId: "run-42",
		DependencyOutputs: map[string]*pb.Outputs{"localdns": {Values: map[string]string{"etcd": "172.30.255.52:2379"}}},
	}
	st, err := runHook(srv, context.Background(), req)
	if err != nil {
		t.Fatalf("RunHook: %v", err)
	}
	if len(st.events) != 3 {
		t.Fatalf("events = %v, want 2 progress + 1 result", st.events)
	}
	if want := []string{"step 1", "step 2"}; strings.Join(st.progress(), "|") != strings.Join(want, "|") {
		t.Errorf("progress = %q, want %q", st.progress(), want)
	}
	if res := st.events[2].GetResult(); res == nil || res.GetOutputs()["done"] != "yes" {
		t.Errorf("last event = %v, want the result", st.events[2])
	}
	// What the hook saw.
	if got.Hook != PostCluster || got.RunID != "run-42" || got.Cluster == nil || got.Cluster.Name != "dev" || got.Env.DNSZone != "demo.internal" {
		t.Errorf("request = hook %s run %q cluster %+v zone %q", got.Hook, got.RunID, got.Cluster, got.Env.DNSZone)
	}
	if v, _ := got.Dep("localdns", "etcd"); v != "172.30.255.52:2379" {
		t.Errorf("dep output = %q", v)
	}
	if cfg.Replicas != 5 || cfg.Image != "acme:1.0" {
		t.Errorf("config = %+v, want user replicas over the defaults", cfg)
	}
}

func TestRunHookNilResult(t *testing.T) {
	srv := newScripted(t, func(context.Context, *Request) (*Result, error) { return nil, nil })
	st, err := runHook(srv, context.Background(), &pb.HookRequest{Hook: pb.Hook_HOOK_POST_UP})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.events) != 1 || st.events[0].GetResult() == nil {
		t.Errorf("events = %v, want one empty result", st.events)
	}
}

func TestRunHookConcurrentProgress(t *testing.T) {
	var late func(string, ...any)
	srv := newScripted(t, func(ctx context.Context, req *Request) (*Result, error) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req.Progress("worker %d", i)
			}()
		}
		wg.Wait()
		late = req.Progress
		return &Result{}, nil
	})
	st, err := runHook(srv, context.Background(), &pb.HookRequest{Hook: pb.Hook_HOOK_POST_UP})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.progress()) != 8 {
		t.Errorf("progress = %q, want 8 messages", st.progress())
	}
	late("after the hook returned")
	if n := len(st.events); n != 9 {
		t.Errorf("%d events after a late Progress, want 9: progress after the result must be dropped", n)
	}
}

func TestRunHookErrors(t *testing.T) {
	tests := []struct {
		name     string
		hook     pb.Hook
		fn       func(ctx context.Context, req *Request) (*Result, error)
		ctx      func() (context.Context, context.CancelFunc)
		wantCode codes.Code
		want     []string
	}{
		{name: "not implemented", hook: pb.Hook_HOOK_PRE_DOWN, wantCode: codes.Unimplemented,
			want: []string{"plugin scripted does not implement PreDown"}},
		{name: "unknown hook", hook: pb.Hook(99), wantCode: codes.InvalidArgument, want: []string{"unknown hook"}},
		{name: "plain error", hook: pb.Hook_HOOK_POST_CLUSTER, wantCode: codes.Unknown, want: []string{"metallb is not ready"},
			fn: func(context.Context, *Request) (*Result, error) { return nil, errors.New("metallb is not ready") }},
		{name: "status error kept", hook: pb.Hook_HOOK_POST_CLUSTER, wantCode: codes.FailedPrecondition, want: []string{"needs localdns"},
			fn: func(context.Context, *Request) (*Result, error) {
				return nil, status.Error(codes.FailedPrecondition, "needs localdns")
			}},
		{name: "config error", hook: pb.Hook_HOOK_POST_CLUSTER, wantCode: codes.Unknown, want: []string{"replicas: must be at most 10"},
			fn: func(_ context.Context, req *Request) (*Result, error) {
				var c testConfig
				return nil, req.Config(&c)
			}},
		{name: "panic", hook: pb.Hook_HOOK_POST_CLUSTER, wantCode: codes.Internal,
			want: []string{"plugin scripted panicked in PostCluster", "kaboom 42", "goroutine", "sdk.TestRunHookErrors"},
			fn:   func(context.Context, *Request) (*Result, error) { panic(fmt.Sprintf("kaboom %d", 42)) }},
		{name: "nil dereference", hook: pb.Hook_HOOK_POST_UP, wantCode: codes.Internal,
			want: []string{"panicked in PostUp", "nil pointer dereference"},
			fn: func(_ context.Context, req *Request) (*Result, error) {
				return nil, errors.New(req.Cluster.Name) // PostUp has no cluster
			}},
		{name: "cancelled", hook: pb.Hook_HOOK_POST_CLUSTER, wantCode: codes.Canceled, want: []string{"gave up waiting", "context canceled"},
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, func() {}
			},
			fn: func(ctx context.Context, _ *Request) (*Result, error) {
				<-ctx.Done()
				return nil, fmt.Errorf("gave up waiting: %w", ctx.Err())
			}},
		{name: "deadline", hook: pb.Hook_HOOK_POST_CLUSTER, wantCode: codes.DeadlineExceeded, want: []string{"rollout", "deadline exceeded"},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 10*time.Millisecond)
			},
			fn: func(ctx context.Context, _ *Request) (*Result, error) {
				select {
				case <-ctx.Done():
					return nil, errors.New("rollout still in progress")
				case <-time.After(10 * time.Second):
					return nil, errors.New("the hook did not see its deadline")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			srv := newScripted(t, func(ctx context.Context, req *Request) (*Result, error) {
				called = true
				return tt.fn(ctx, req)
			})
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			req := &pb.HookRequest{Hook: tt.hook, ConfigJson: []byte(`{"replicas":11}`)}
			st, err := runHook(srv, ctx, req)
			if status.Code(err) != tt.wantCode {
				t.Fatalf("RunHook error = %v (code %v), want code %v", err, status.Code(err), tt.wantCode)
			}
			for _, w := range tt.want {
				if !strings.Contains(status.Convert(err).Message(), w) {
					t.Errorf("error %q does not contain %q", status.Convert(err).Message(), w)
				}
			}
			if tt.fn == nil && called {
				t.Errorf("a hook ran although the plugin does not implement it")
			}
			for _, e := range st.events {
				if e.GetResult() != nil {
					t.Errorf("a failed hook sent a result: %v", e)
				}
			}
		})
	}
}

func TestServerValidateConfig(t *testing.T) {
	srv := newScripted(t, nil)
	tests := []struct {
		json string
		want []Diagnostic
	}{
		{json: ``},
		{json: `{"replicas":3}`},
		{json: `{"image":"acme:latest"}`, want: []Diagnostic{{Severity: SeverityWarning, Path: "image", Summary: "a :latest image is not reproducible"}}},
		{json: `{"pools":[{"nmae":"x"}],"wait":"never"}`, want: []Diagnostic{
			{Severity: SeverityError, Path: "pools[0].nmae", Summary: `unknown field "nmae"; did you mean "name"?`},
			{Severity: SeverityError, Path: "wait", Summary: `must be a duration such as 30s or 5m, got "never"`},
		}},
		{json: `{"replicas":12}`, want: []Diagnostic{{Severity: SeverityError, Path: "replicas", Summary: "must be at most 10, got 12"}}},
	}
	for _, tt := range tests {
		resp, err := srv.ValidateConfig(context.Background(), &pb.ValidateConfigRequest{ConfigJson: []byte(tt.json)})
		if err != nil {
			t.Fatalf("ValidateConfig(%s): %v", tt.json, err)
		}
		got := diagsFromPB(resp.GetDiagnostics())
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("ValidateConfig(%s) = %+v, want %+v", tt.json, got, tt.want)
		}
	}
}

// panicky's config panics in Validate; it takes no other config.
type panickyConfig struct{ N int }

func (panickyConfig) Validate() []Diagnostic { panic("validate exploded") }

func TestServerValidateConfigEdgeCases(t *testing.T) {
	noConfig, err := NewServer(&scripted{info: Info{Name: "bare", Version: "1.0.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"", "null", "{}", " {} "} {
		resp, err := noConfig.ValidateConfig(context.Background(), &pb.ValidateConfigRequest{ConfigJson: []byte(in)})
		if err != nil || len(resp.GetDiagnostics()) != 0 {
			t.Errorf("no-config plugin, config %q: %v %v, want no diagnostics", in, resp.GetDiagnostics(), err)
		}
	}
	resp, err := noConfig.ValidateConfig(context.Background(), &pb.ValidateConfigRequest{ConfigJson: []byte(`{"x":1}`)})
	if err != nil || len(resp.GetDiagnostics()) != 1 || !strings.Contains(resp.GetDiagnostics()[0].GetSummary(), "plugin bare takes no config") {
		t.Errorf("no-config plugin given config: %v %v", resp.GetDiagnostics(), err)
	}

	panicky, err := NewServer(&scripted{info: Info{Name: "panicky", Version: "1.0.0", Config: &panickyConfig{}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = panicky.ValidateConfig(context.Background(), &pb.ValidateConfigRequest{})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "validate exploded") || !strings.Contains(err.Error(), "panicked in ValidateConfig") {
		t.Errorf("panicking Validate: %v, want an Internal error with the panic", err)
	}
}

func TestServerDescribe(t *testing.T) {
	p := infoPlugin{validInfo()}
	srv, err := NewServer(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := srv.Describe(context.Background(), &pb.DescribeRequest{HostVersion: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Describe(p)
	if !proto.Equal(got, descriptionToPB(want)) {
		t.Errorf("Describe RPC = %v, want %v", got, descriptionToPB(want))
	}
}

// TestOverGRPC runs the server and HostClient through go-plugin's gRPC
// plumbing: the production path minus the child process.
func TestOverGRPC(t *testing.T) {
	entered := make(chan struct{})
	sawCancel := make(chan error, 1)
	srv := newScripted(t, func(ctx context.Context, req *Request) (*Result, error) {
		if req.Hook == PostUp { // blocks until the host cancels
			close(entered)
			select {
			case <-ctx.Done():
				sawCancel <- ctx.Err()
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				sawCancel <- nil
				return nil, errors.New("never cancelled")
			}
		}
		req.Progress("working on %s", req.Cluster.Name)
		return &Result{Outputs: map[string]string{"run": req.RunID}}, nil
	})
	// client.Close also stops the server (through go-plugin's controller
	// service); stopping it again here would race with that.
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{PluginName: &GRPCPlugin{Impl: srv}})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	host := raw.(*HostClient)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	d, err := host.Describe(ctx, "0.1.0")
	if err != nil || d.Name != "scripted" || len(d.Hooks) != 2 {
		t.Fatalf("Describe = %+v, %v", d, err)
	}
	diags, err := host.ValidateConfig(ctx, []byte(`{"nmae":1}`))
	if err != nil || len(diags) != 1 || diags[0].Path != "nmae" {
		t.Errorf("ValidateConfig = %+v, %v", diags, err)
	}
	var progress []string
	res, err := host.RunHook(ctx, HookCall{Hook: PostCluster, Cluster: fullCluster(), RunID: "r1"}, func(s string) { progress = append(progress, s) })
	if err != nil || res.Outputs["run"] != "r1" {
		t.Fatalf("RunHook = %+v, %v", res, err)
	}
	if len(progress) != 1 || progress[0] != "working on dev" {
		t.Errorf("progress = %q", progress)
	}
	if _, err := host.RunHook(ctx, HookCall{Hook: "Bogus"}, nil); err == nil || !strings.Contains(err.Error(), `unknown hook "Bogus"`) {
		t.Errorf("RunHook(Bogus) = %v", err)
	}
	if _, err := host.RunHook(ctx, HookCall{Hook: PreDestroy}, nil); status.Code(err) != codes.Unimplemented {
		t.Errorf("RunHook(PreDestroy) = %v, want Unimplemented", err)
	}

	// Cancelling the host's context reaches the hook's ctx.
	hctx, hcancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := host.RunHook(hctx, HookCall{Hook: PostUp}, nil)
		errc <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the hook never started")
	}
	hcancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Errorf("cancelled RunHook = %v, want Canceled", err)
	}
	select {
	case err := <-sawCancel:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the hook's ctx ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hook never saw the cancellation")
	}
}

func TestHostClientNoResult(t *testing.T) {
	// A server that ends the stream without a result.
	conn, server := goplugin.TestGRPCConn(t, func(s *grpc.Server) { pb.RegisterPluginServer(s, &silentServer{}) })
	t.Cleanup(func() { _ = conn.Close(); server.Stop() })
	_, err := NewHostClient(conn).RunHook(context.Background(), HookCall{Hook: PostUp}, nil)
	if err == nil || !strings.Contains(err.Error(), "without a result") {
		t.Errorf("RunHook = %v, want a missing-result error", err)
	}
}

type silentServer struct{ pb.UnimplementedPluginServer }

func (silentServer) RunHook(*pb.HookRequest, grpc.ServerStreamingServer[pb.HookEvent]) error {
	return nil
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo)
	log.Debug("hidden")
	log.Info("installing", "cluster", "dev")
	log.Warn("slow")
	log.Error("failed")
	log.WithGroup("g").Info("grouped", "level", "inner")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4 (debug filtered):\n%s", len(lines), buf.String())
	}
	wantLevels := []string{"info", "warn", "error", "info"}
	wantMsgs := []string{"installing", "slow", "failed", "grouped"}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		if m["@level"] != wantLevels[i] || m["@message"] != wantMsgs[i] {
			t.Errorf("line %d: @level %v @message %v, want %s %s", i, m["@level"], m["@message"], wantLevels[i], wantMsgs[i])
		}
		ts, _ := m["@timestamp"].(string)
		// The layout go-plugin's host parses plugin log lines with.
		if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err != nil {
			t.Errorf("line %d: @timestamp %q: %v", i, ts, err)
		}
		for _, k := range []string{"level", "msg", "time"} {
			if _, ok := m[k]; ok {
				t.Errorf("line %d has slog's own key %q: %s", i, k, line)
			}
		}
	}
	var first, last map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &first)
	_ = json.Unmarshal([]byte(lines[3]), &last)
	if first["cluster"] != "dev" {
		t.Errorf("attributes lost: %s", lines[0])
	}
	if g, _ := last["g"].(map[string]any); g["level"] != "inner" {
		t.Errorf("a grouped attribute was renamed: %s", lines[3])
	}
}
