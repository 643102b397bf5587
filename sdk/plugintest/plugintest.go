// Package plugintest runs a marina plugin against a fake host, so plugin
// authors (and marina's built-in plugins) can test hooks without a VM, a
// cluster or marina itself.
//
// New runs a plugin value in-process, through the SDK's real gRPC server and
// host client over a private Unix socket: the same protocol and conversions
// as production. Build and Start run the plugin's
// main package as a real child process through go-plugin (handshake,
// peer credentials or AutoMTLS, gRPC), exactly as marina does:
//
//	func TestPostCluster(t *testing.T) {
//		h := plugintest.New(t, acme.Plugin{})
//		res, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"replicas": 2}`))
//		if err != nil {
//			t.Fatal(err)
//		}
//		if res.Outputs["endpoint"] == "" { ... }
//		h.RequireIdempotent(t, sdk.PostCluster)
//	}
//
//	func TestBinary(t *testing.T) {
//		h := plugintest.Start(t, plugintest.Build(t, "."))
//		if d := h.Describe(); !d.Has(sdk.PostCluster) { ... }
//	}
//
// Like marina, Run validates the config before it runs a hook, gives the
// hook its declared deadline, withholds what the plugin's undeclared
// capabilities would unlock (an empty Env.DockerHost without sdk.CapDocker,
// no kubeconfig without sdk.CapKubeconfig; see sdk.HookCall.Granted) and
// fails a hook whose result asks for an undeclared host change. Hooks get DefaultEnv and, for cluster hooks,
// DefaultCluster; options change them. The harness talks to nothing real by
// default: the Docker endpoint is NoDockerHost (a socket that does not
// exist; $DOCKER_HOST is not used: give the hook sdk/dockerfake's engine or a
// real one with WithEnv), and the kubeconfig points at a stand-in on
// 127.0.0.1 that answers every request with an error saying how to give
// the hook a real API server — never at a live lab's API port.
package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bcollard/marina/sdk"
)

// Harness is a plugin under test behind a fake host. Its methods report
// harness failures (the plugin cannot be reached, Describe fails) on the
// testing.TB given to New or Start; hook failures are returned by Run.
type Harness struct {
	t      testing.TB
	client *sdk.HostClient
	desc   *sdk.Description

	// Out of process only.
	pid    int
	stderr *tailBuffer

	dirOnce  sync.Once
	stateDir string
	kubeDir  string

	noAPIOnce sync.Once
	noAPI     *httptest.Server

	runs     atomic.Int64
	mu       sync.Mutex
	progress []string
}

// New runs p in-process through the SDK's gRPC server and host client,
// connected over a private Unix socket. The plugin's logs (Request.Logger)
// go to t.Log. It fails t if p's Info is invalid.
func New(t testing.TB, p sdk.Plugin) *Harness {
	t.Helper()
	logw := newTestLog(t, "plugin: ")
	srv, err := sdk.NewServer(p, slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	conn, err := serveInProcess(t, srv)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	h := &Harness{t: t, client: sdk.NewHostClient(conn)}
	h.desc = h.Describe()
	return h
}

// serveInProcess serves srv on a Unix socket in a private directory and
// returns a connection to it: the plugin's gRPC service, as sdk.Serve
// registers it, over a real socket. (go-plugin's TestPluginGRPCConn did
// this too, but logged "[DEBUG] stdio ..." lines to stderr in every test.)
// The server and the connection end with the test; the test log closes
// after them (registered earlier), so no late line reaches t.
func serveInProcess(t testing.TB, srv *sdk.Server) (*grpc.ClientConn, error) {
	dir, err := os.MkdirTemp("", "plugintest-") // short: a socket path has ~104 bytes
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "plugin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("listening on %s: %w", sock, err)
	}
	gs := grpc.NewServer()
	if err := (&sdk.GRPCPlugin{Impl: srv}).GRPCServer(nil, gs); err != nil {
		_ = ln.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(ln)
	}()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		gs.Stop()
		<-served
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("connecting to %s: %w", sock, err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop() // ends running hooks' streams; their contexts are cancelled
		<-served
		_ = os.RemoveAll(dir)
	})
	return conn, nil
}

// Describe asks the plugin who it is (the Describe RPC).
func (h *Harness) Describe() *sdk.Description {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := h.client.Describe(ctx, HostVersion)
	if err != nil {
		h.t.Fatalf("plugintest: Describe: %v%s", err, h.stderrTail())
	}
	return d
}

// ValidateConfig asks the plugin to check configJSON (the ValidateConfig RPC)
// and returns its diagnostics: errors with the field paths they concern, and
// warnings. An empty string is "no config".
func (h *Harness) ValidateConfig(configJSON string) []sdk.Diagnostic {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds, err := h.client.ValidateConfig(ctx, configBytes(configJSON))
	if err != nil {
		h.t.Fatalf("plugintest: ValidateConfig: %v%s", toPluginError("ValidateConfig", err), h.stderrTail())
	}
	return ds
}

// Option changes one Run.
type Option func(*runOptions)

type runOptions struct {
	config  []byte
	env     []func(*sdk.Env)
	cluster []func(*sdk.Cluster)
	deps    map[string]map[string]string
	timeout time.Duration
	ctx     context.Context
}

// WithConfig sets the plugin's config (JSON, as marina passes it after
// reading the user's YAML). Without it the plugin gets no config: its defaults.
func WithConfig(configJSON string) Option {
	return func(o *runOptions) { o.config = configBytes(configJSON) }
}

// WithEnv edits the environment after DefaultEnv is filled in.
func WithEnv(edit func(*sdk.Env)) Option {
	return func(o *runOptions) { o.env = append(o.env, edit) }
}

// WithCluster edits the cluster after DefaultCluster is filled in. It only
// applies to cluster hooks (PreCluster, PostCluster, PreClusterDelete).
func WithCluster(edit func(*sdk.Cluster)) Option {
	return func(o *runOptions) { o.cluster = append(o.cluster, edit) }
}

// WithKubeconfig gives cluster hooks a real cluster: Cluster.Kubeconfig is
// kubeconfig (also written to Cluster.KubeconfigPath, as marina does), for
// example that of a kube-apiserver the test started with sdk/kubetest:
//
//	c := kubetest.Start(t)
//	res, err := h.Run(sdk.PostCluster, plugintest.WithKubeconfig(c.Kubeconfig))
func WithKubeconfig(kubeconfig []byte) Option {
	return WithCluster(func(c *sdk.Cluster) { c.Kubeconfig = kubeconfig })
}

// WithDeps sets the outputs of the plugins this plugin depends on, by plugin
// name, as the host passes them from their earlier hooks.
func WithDeps(deps map[string]map[string]string) Option {
	return func(o *runOptions) { o.deps = deps }
}

// WithTimeout sets the hook's deadline. By default it is the plugin's own
// (Description.Timeout), cut short to end before the test's deadline.
func WithTimeout(d time.Duration) Option {
	return func(o *runOptions) { o.timeout = d }
}

// WithContext runs the hook under ctx: cancelling it is marina's Ctrl-C.
func WithContext(ctx context.Context) Option {
	return func(o *runOptions) { o.ctx = ctx }
}

// Run runs hook as marina would: the config is validated first (its errors
// are returned as a *sdk.ConfigError and the hook does not run), then the
// hook runs under its deadline with DefaultEnv, DefaultCluster for cluster
// hooks, and the options applied. Progress messages are kept for Progress.
//
// A hook's failure is returned as a *PluginError: errors.Is works with
// context.Canceled, context.DeadlineExceeded, ErrNotImplemented and
// ErrPanicked.
func (h *Harness) Run(hook sdk.Hook, opts ...Option) (*sdk.Result, error) {
	h.t.Helper()
	o := runOptions{ctx: context.Background()}
	for _, opt := range opts {
		opt(&o)
	}
	call := sdk.HookCall{
		Hook:       hook,
		Env:        DefaultEnv(h.dirs()),
		ConfigJSON: o.config,
		Deps:       o.deps,
		RunID:      fmt.Sprintf("plugintest-%d", h.runs.Add(1)),
	}
	for _, edit := range o.env {
		edit(&call.Env)
	}
	if hook.IsClusterHook() {
		c := DefaultCluster()
		for _, edit := range o.cluster {
			edit(c)
		}
		ownPath := c.KubeconfigPath == ""
		if ownPath {
			c.KubeconfigPath = filepath.Join(h.kubeDir, c.Name+".kubeconfig")
		}
		if hook != sdk.PreCluster {
			if c.Kubeconfig == nil {
				c.Kubeconfig = fakeKubeconfig(c, h.noAPIServer())
			}
			// As marina does, the kubeconfig is also on disk at KubeconfigPath.
			if ownPath && len(c.Kubeconfig) > 0 {
				if err := os.WriteFile(c.KubeconfigPath, c.Kubeconfig, 0o600); err != nil {
					h.t.Fatalf("plugintest: writing the kubeconfig: %v", err)
				}
			}
		}
		call.Cluster = c
	}

	// As marina does, the hook sees only what the capabilities the plugin
	// declares unlock.
	desc := h.Describe()
	call = call.Granted(desc)

	ctx, cancel := context.WithTimeout(o.ctx, h.timeout(hook, o.timeout))
	defer cancel()

	ds, err := h.client.ValidateConfig(ctx, o.config)
	if err != nil {
		return nil, toPluginError("ValidateConfig", err)
	}
	var errs []sdk.Diagnostic
	for _, d := range ds {
		if d.Severity != sdk.SeverityWarning {
			errs = append(errs, d)
		}
	}
	if len(errs) > 0 {
		h.setProgress(nil)
		return nil, &sdk.ConfigError{Diagnostics: errs}
	}

	var progress []string
	res, err := h.client.RunHook(ctx, call, func(msg string) { progress = append(progress, msg) })
	h.setProgress(progress)
	if err != nil {
		return nil, toPluginError(string(hook), err)
	}
	if bad := res.UndeclaredChanges(desc); len(bad) > 0 {
		return res, &PluginError{Op: string(hook), Code: codes.PermissionDenied, Message: "marina would fail this hook and apply none of its host changes: " + strings.Join(bad, "; ")}
	}
	return res, nil
}

// noAPIMessage is what the harness's stand-in API server answers to every
// request: client-go shows a Status's message as the error.
const noAPIMessage = "plugintest: no Kubernetes API server behind this cluster's kubeconfig; " +
	"give the hook one with plugintest.WithKubeconfig (e.g. from sdk/kubetest: kubetest.Start(t).Kubeconfig)"

// noAPIServer returns the URL of the server the default kubeconfig points
// at: a TLS listener on 127.0.0.1 that answers every request with 503 and
// noAPIMessage, so a hook that reaches for the cluster fails at once with
// a message that says what to do, instead of reaching a live lab's API
// port or waiting for a timeout. It is closed with the test.
func (h *Harness) noAPIServer() string {
	h.noAPIOnce.Do(func() {
		body, _ := json.Marshal(map[string]any{
			"kind": "Status", "apiVersion": "v1", "status": "Failure",
			"message": noAPIMessage, "reason": "ServiceUnavailable", "code": http.StatusServiceUnavailable,
		})
		h.noAPI = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(body)
		}))
		h.t.Cleanup(h.noAPI.Close)
	})
	return h.noAPI.URL
}

// Progress returns the progress messages of the last Run, in order.
func (h *Harness) Progress() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.progress...)
}

func (h *Harness) setProgress(p []string) {
	h.mu.Lock()
	h.progress = p
	h.mu.Unlock()
}

// RequireIdempotent runs hook twice with the same options and fails t unless
// both runs succeed and declare the same Result: the contract that hooks
// converge when marina re-runs them. The state directory is kept between
// the runs, as it is between marina runs. It returns the second Result.
func (h *Harness) RequireIdempotent(t testing.TB, hook sdk.Hook, opts ...Option) *sdk.Result {
	t.Helper()
	first, err := h.Run(hook, opts...)
	if err != nil {
		t.Fatalf("plugintest: %s failed on its first run: %v", hook, err)
	}
	second, err := h.Run(hook, opts...)
	if err != nil {
		t.Fatalf("plugintest: %s failed when run a second time (a re-run must converge): %v", hook, err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("plugintest: %s is not idempotent: the second run declared something else\nfirst:  %s\nsecond: %s", hook, asJSON(first), asJSON(second))
	}
	return second
}

// PID returns the plugin's process id (Start), or 0 for an in-process plugin (New).
func (h *Harness) PID() int { return h.pid }

// Stderr returns what the plugin process wrote to stderr so far (its log
// lines; the last 64 KiB), or "" for an in-process plugin.
func (h *Harness) Stderr() string {
	if h.stderr == nil {
		return ""
	}
	return h.stderr.String()
}

func (h *Harness) stderrTail() string {
	s := strings.TrimSpace(h.Stderr())
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "\nplugin stderr (last lines):\n" + strings.Join(lines, "\n")
}

// dirs creates the plugin's state directory and the kubeconfig directory
// once per harness, so state persists across Runs as it does across marina runs.
func (h *Harness) dirs() string {
	h.dirOnce.Do(func() {
		h.stateDir = h.t.TempDir()
		h.kubeDir = h.t.TempDir()
	})
	return h.stateDir
}

// timeout is the explicit one, else the plugin's declared deadline, ending
// a second before the test's own deadline if that is sooner.
func (h *Harness) timeout(hook sdk.Hook, explicit time.Duration) time.Duration {
	d := explicit
	if d <= 0 {
		d = h.desc.Timeout(hook)
	}
	if dl, ok := h.t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := dl.Deadline(); ok {
			if left := time.Until(end) - time.Second; left < d {
				d = max(left, time.Millisecond)
			}
		}
	}
	return d
}

// Sentinels a *PluginError matches with errors.Is.
var (
	// ErrNotImplemented: the plugin does not implement the hook.
	ErrNotImplemented = errors.New("the plugin does not implement this hook")
	// ErrPanicked: the plugin panicked; the message carries the panic value and stack.
	ErrPanicked = errors.New("the plugin panicked")
	// ErrUndeclaredCapability: the hook asked for a host change whose
	// capability the plugin does not declare (marina fails such a hook).
	ErrUndeclaredCapability = errors.New("the hook needs a capability the plugin does not declare")
)

// PluginError is a failure the host received from the plugin.
type PluginError struct {
	// Op is the hook ("PostCluster") or RPC ("ValidateConfig") that failed.
	Op string
	// Code is the gRPC status code: Unknown for an error the hook returned,
	// Canceled or DeadlineExceeded when its context ended, Unimplemented,
	// Internal for a panic, Unavailable when the plugin process is gone.
	Code codes.Code
	// Message is the plugin's error message.
	Message string
}

// Error reads "PostCluster: <the plugin's message>", with the code unless
// the hook simply returned an error.
func (e *PluginError) Error() string {
	if e.Code == codes.Unknown {
		return e.Op + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s (%s)", e.Op, e.Message, e.Code)
}

// Unwrap maps the status code to context.Canceled, context.DeadlineExceeded,
// ErrNotImplemented or ErrPanicked.
func (e *PluginError) Unwrap() error {
	switch {
	case e.Code == codes.Canceled:
		return context.Canceled
	case e.Code == codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case e.Code == codes.Unimplemented:
		return ErrNotImplemented
	case e.Code == codes.Internal && strings.Contains(e.Message, " panicked in "):
		return ErrPanicked
	case e.Code == codes.PermissionDenied:
		return ErrUndeclaredCapability
	}
	return nil
}

// GRPCStatus lets status.Code and status.Convert see the original status.
func (e *PluginError) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

func toPluginError(op string, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return &PluginError{Op: op, Code: st.Code(), Message: st.Message()}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func configBytes(s string) []byte {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []byte(s)
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// testLog forwards writes to t.Log until the test's cleanup runs; plugin
// goroutines may outlive the test, and logging after it ends panics.
type testLog struct {
	mu     sync.Mutex
	t      testing.TB
	prefix string
	closed bool
}

func newTestLog(t testing.TB, prefix string) *testLog {
	w := &testLog{t: t, prefix: prefix}
	t.Cleanup(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return w
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
