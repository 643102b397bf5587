package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/peercred"
)

// Spec says how to launch one plugin. The plugin store produces it.
type Spec struct {
	// Name is the plugin's name; the plugin must describe itself with it.
	// Empty (only when describing an unknown binary, e.g. at install) skips the check.
	Name string
	// Path is the executable.
	Path string
	// Args are its arguments; built-ins re-execute the marina binary with
	// e.g. ["plugin-server", "metallb"].
	Args []string
	// SHA256 is the hex digest the file must have; checked before every
	// launch when set.
	SHA256 string
	// Version is the version the plugin must report, when known.
	Version string
}

// Options configures how plugins run.
type Options struct {
	// Logger is marina's logger. Plugin stderr records are re-logged on it
	// at their own level with plugin=<name>; go-plugin's own messages go to
	// it at Debug. Nil means slog.Default().
	Logger *slog.Logger
	// LogFile, if set, receives every plugin's stderr, each line cleaned of
	// terminal control sequences, prefixed "[name] " and capped per hook
	// (package doc, "Plugin output is untrusted"; the per-run log
	// file). Writes are serialised.
	LogFile io.Writer
	// StartTimeout bounds the launch and handshake (default 30s).
	StartTimeout time.Duration
	// KillGrace is how long a plugin gets to exit after being asked to stop
	// (and again after SIGTERM) before its process group is killed
	// (default 5s).
	KillGrace time.Duration
	// HostVersion is marina's version, told to plugins in Describe.
	HostVersion string
	// StateRoot, if set, holds one directory per plugin (<StateRoot>/<name>,
	// created 0700 on first use) that the Dispatcher passes to the plugin's
	// hooks as Env.StateDir.
	StateRoot string
	// RunDir holds the plugins' unix socket directories, under
	// <RunDir>/plugins/<pid>-<start> of this process; a later marina
	// removes those of a marina that no longer runs. "" means
	// DefaultRunDir (~/.marina/run); when it is unusable or its socket
	// paths would be too long, $TMPDIR/marina-<uid>/run (or /tmp/...) is used.
	RunDir string
}

// Defaults for Options.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultKillGrace    = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	return o
}

// Instance is one running plugin process.
type Instance struct {
	spec   Spec
	opts   Options
	logs   *pluginLog
	client *goplugin.Client
	conn   *grpc.ClientConn
	host   *sdk.HostClient
	stdio  []*lineWriter // go-plugin's SyncStdout, SyncStderr

	mu      sync.Mutex
	runner  *procRunner
	cancel  bool // Start was cancelled before the runner existed
	version string
	desc    *sdk.Description
	failed  *Error // set once: every later call returns it

	// releaseLifetime gives back what Start took for the plugin's
	// lifetime (its socket base dir, marina's subreaper status).
	releaseLifetime func()

	stopOnce sync.Once
	stopping atomic.Bool // terminate has begun
	stopErr  error
	stopped  chan struct{}
}

var sha256RE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

// Start launches the plugin described by spec, completes the go-plugin
// handshake (gRPC, AutoMTLS, protocol negotiation), and checks the plugin's
// Describe against spec and this marina's protocol. On any failure the
// plugin's process group is gone when Start returns, and the error is an
// *Error.
func Start(ctx context.Context, spec Spec, opts Options) (*Instance, error) {
	opts = opts.withDefaults()
	i := &Instance{spec: spec, opts: opts, version: spec.Version, stopped: make(chan struct{})}
	i.logs = newPluginLog(spec.Name, opts.Logger, opts.LogFile)

	if spec.SHA256 != "" {
		if err := verifyDigest(spec); err != nil {
			return nil, i.newError("start", KindChecksum, err.Error(), err)
		}
	}

	// Until the plugin is stopped, marina adopts the orphans of its tree,
	// and its socket dir is under marina's run dir (see terminate).
	base, releaseBase, err := acquireSocketBase(opts.RunDir)
	if err != nil {
		opts.Logger.Debug("plugin socket directory", "plugin", spec.Name, "dir", base, "skipped", err.Error())
	}
	var sockets *goplugin.UnixSocketConfig
	if base != "" {
		sockets = &goplugin.UnixSocketConfig{TempDir: base}
	}
	releaseReaper := holdSubreaper()
	i.releaseLifetime = func() {
		releaseBase()
		releaseReaper()
	}

	stderr := &lineWriter{emit: i.logs.stderrLine}
	i.stdio = []*lineWriter{{emit: i.logs.stdoutLine}, {emit: i.logs.stderrLine}}
	i.client = goplugin.NewClient(&goplugin.ClientConfig{
		UnixSocketConfig: sockets,
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.HostPluginSets(),
		RunnerFunc:       i.newRunner,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		// Peer credentials (sdk/peercred) where the kernel reports a Unix
		// socket's peer: the plugin accepts only this marina, marina only
		// the process it started; AutoMTLS elsewhere. docs/design.md,
		// "Plugin transport".
		AutoMTLS:        !peercred.Supported(),
		GRPCDialOptions: peercred.DialOptions(i.pluginPID),
		Managed:         false,
		StartTimeout:    opts.StartTimeout,
		Stderr:          stderr,
		SyncStdout:      i.stdio[0],
		SyncStderr:      i.stdio[1],
		Logger:          &hclogAdapter{logger: opts.Logger.With("plugin", spec.Name), relayAs: filepath.Base(spec.Path)},
	})

	if err := i.handshake(ctx); err != nil {
		return nil, i.startFailed(err)
	}
	rpc, err := i.client.Client()
	if err != nil {
		return nil, i.startFailed(i.newError("start", KindStart, "cannot connect: "+err.Error(), err))
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		return nil, i.startFailed(i.newError("start", KindStart, "cannot connect: "+err.Error(), err))
	}
	host, ok := raw.(*sdk.HostClient)
	if !ok {
		return nil, i.startFailed(i.newError("start", KindStart, fmt.Sprintf("go-plugin dispensed %T, not the marina protocol client", raw), nil))
	}
	i.host = host
	if gc, ok := rpc.(*goplugin.GRPCClient); ok {
		i.conn = gc.Conn
	}

	dctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	d, err := i.host.Describe(dctx, opts.HostVersion)
	if err != nil {
		return nil, i.startFailed(i.callError(ctx, dctx, "Describe", opts.StartTimeout, err))
	}
	if err := i.checkDescription(d); err != nil {
		return nil, i.startFailed(err)
	}
	i.mu.Lock()
	i.desc, i.version = d, d.Version
	i.mu.Unlock()
	return i, nil
}

// newRunner is go-plugin's RunnerFunc: cmd carries the environment
// go-plugin prepared (magic cookie, mTLS certificate, socket directory).
func (i *Instance) newRunner(_ hclog.Logger, cmd *exec.Cmd, socketDir string) (runner.Runner, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cancel {
		return nil, context.Canceled
	}
	i.runner = newProcRunner(i.spec.Path, i.spec.Args, pluginEnv(cmd.Env), socketDir)
	return i.runner, nil
}

// withheldEnv are the variables a plugin process does not inherit from
// marina's environment: the user's Docker and Kubernetes endpoints and
// credentials. A plugin reaches the lab only through what its declared
// capabilities unlock in a hook's request (sdk.HookCall.Granted).
var withheldEnv = []string{"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_TLS", "KUBECONFIG"}

// pluginEnv is env without withheldEnv.
func pluginEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(withheldEnv, k) {
			out = append(out, kv)
		}
	}
	return out
}

// pluginPID is the pid of the plugin's process: the only peer marina's
// connection accepts. Before the process started it is -1, which no peer
// has (0 would mean any process of the user).
func (i *Instance) pluginPID() int {
	r := i.getRunner()
	if r == nil {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid <= 0 {
		return -1
	}
	return r.pid
}

func (i *Instance) getRunner() *procRunner {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.runner
}

// handshake starts the process and waits for the handshake, honouring ctx.
func (i *Instance) handshake(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		_, err := i.client.Start()
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			return i.classifyStart(err)
		}
		return nil
	case <-ctx.Done():
		i.mu.Lock()
		i.cancel = true
		r := i.runner
		i.mu.Unlock()
		if r != nil {
			_ = r.Kill(ctx) // SIGKILL the group, or keep it from starting
		}
		// go-plugin's Start returns once the killed process is reaped.
		<-errc
		return i.newError("start", KindCancelled, "was cancelled while starting", ctx.Err())
	}
}

var (
	unrecognizedRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Unrecognized remote plugin message: ([^\n]*)`) })
	apiVersionRE   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`incompatible API version with plugin\. Plugin version: (\d+)`)
	})
)

// classifyStart maps go-plugin's start errors to marina's messages.
func (i *Instance) classifyStart(err error) *Error {
	msg := err.Error()
	r := i.getRunner()
	exitNote := func() string {
		if r != nil && r.waitExit(i.opts.KillGrace) {
			return " (" + r.exitState() + ")"
		}
		return ""
	}
	switch {
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		text := ""
		if m := unrecognizedRE().FindStringSubmatch(msg); m != nil {
			text = strings.TrimSpace(m[1])
		}
		if text == "" {
			return i.newError("start", KindStart, "exited before the handshake"+exitNote()+"; is it a marina plugin (built with the marina SDK)?", err)
		}
		return i.newError("start", KindStdout, fmt.Sprintf("printed to stdout before the handshake: %q; stdout is reserved for the plugin protocol, so the plugin must log to stderr and print nothing before sdk.Serve", text), err)
	case apiVersionRE().MatchString(msg):
		v := apiVersionRE().FindStringSubmatch(msg)[1]
		return i.newError("start", KindProtocol, fmt.Sprintf("speaks protocol %s, this marina speaks protocol %d.%d: install a version of the plugin built for protocol %d, or a marina that speaks protocol %s", v, sdk.ProtocolMajor, sdk.ProtocolMinor, sdk.ProtocolMajor, v), err)
	case strings.Contains(msg, "incompatible core API version"):
		return i.newError("start", KindProtocol, "was built with an incompatible go-plugin core protocol: rebuild it with the marina SDK", err)
	case strings.Contains(msg, "plugin exited before we could connect"):
		return i.newError("start", KindStart, "exited before the handshake"+exitNote(), err)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return i.newError("start", KindStart, fmt.Sprintf("did not complete the handshake within %s (start timeout)", i.opts.StartTimeout), err)
	case strings.Contains(msg, "unsupported plugin protocol"):
		return i.newError("start", KindProtocol, "does not speak gRPC (net/rpc plugins are not supported): rebuild it with the marina SDK", err)
	}
	var pe *os.PathError
	if errors.As(err, &pe) || strings.Contains(msg, "exec") {
		return i.newError("start", KindStart, fmt.Sprintf("cannot run %s: %v; check that it is an executable marina plugin for this OS and CPU", i.spec.Path, err), err)
	}
	return i.newError("start", KindStart, "cannot start: "+msg, err)
}

// checkDescription checks the plugin's Describe against the spec and
// against the protocol this marina speaks.
func (i *Instance) checkDescription(d *sdk.Description) error {
	if i.spec.Name != "" && d.Name != i.spec.Name {
		return i.newError("Describe", KindIdentity, fmt.Sprintf("%s describes itself as plugin %q, not %q: the file is not the plugin it was installed as; reinstall with marina plugin install", i.spec.Path, d.Name, i.spec.Name), nil)
	}
	if i.spec.Version != "" && d.Version != i.spec.Version {
		return i.newError("Describe", KindIdentity, fmt.Sprintf("%s reports version %s, but version %s was expected: reinstall with marina plugin install", i.spec.Path, d.Version, i.spec.Version), nil)
	}
	i.mu.Lock()
	i.version = d.Version
	i.mu.Unlock()
	major, minor, ok := parseProtocol(d.Protocol)
	if !ok {
		return i.newError("Describe", KindProtocol, fmt.Sprintf("reports protocol %q, which is not MAJOR.MINOR", d.Protocol), nil)
	}
	if major != sdk.ProtocolMajor || minor > sdk.ProtocolMinor {
		return i.newError("Describe", KindProtocol, fmt.Sprintf("speaks protocol %s, this marina speaks protocol %d.%d: upgrade marina, or install a version of the plugin built for protocol %d.%d or older", d.Protocol, sdk.ProtocolMajor, sdk.ProtocolMinor, sdk.ProtocolMajor, sdk.ProtocolMinor), nil)
	}
	if bad := d.UnknownCapabilities(); len(bad) > 0 {
		return i.newError("Describe", KindCapability, UnknownCapabilitiesCause(bad), nil)
	}
	return nil
}

// UnknownCapabilitiesCause says why a plugin declaring the capabilities bad
// (unknown to this marina, or declared twice) is refused.
func UnknownCapabilitiesCause(bad []string) string {
	return fmt.Sprintf("declares capabilities %s that this marina does not know (or twice): upgrade marina, or use a version of the plugin built with an older SDK", strings.Join(bad, ", "))
}

func parseProtocol(s string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(a)
	minor, err2 = strconv.Atoi(b)
	return major, minor, err1 == nil && err2 == nil
}

// verifyDigest hashes the executable (streaming) and compares it with the
// recorded digest.
func verifyDigest(spec Spec) error {
	want := strings.ToLower(strings.TrimSpace(spec.SHA256))
	if !sha256RE().MatchString(want) {
		return fmt.Errorf("the recorded sha256 %q of %s is not 64 hex digits; reinstall with marina plugin install", spec.SHA256, spec.Path)
	}
	f, err := os.Open(spec.Path)
	if err != nil {
		return fmt.Errorf("cannot read %s to verify its sha256: %v; reinstall with marina plugin install", spec.Path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("cannot read %s to verify its sha256: %v; reinstall with marina plugin install", spec.Path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return fmt.Errorf("refusing to run %s: its sha256 is %s, but %s was recorded when it was installed (the file changed since); reinstall with marina plugin install", spec.Path, got, want)
	}
	return nil
}

// newError builds an *Error for this plugin with its last stderr lines.
func (i *Instance) newError(hook string, kind Kind, cause string, err error) *Error {
	i.mu.Lock()
	version := i.version
	i.mu.Unlock()
	name := i.spec.Name
	if name == "" {
		name = "at " + i.spec.Path // an unknown binary being described (install)
	}
	return &Error{Plugin: name, Version: version, Hook: hook, Kind: kind, Cause: cause, Err: err, Stderr: i.logs.lastLines()}
}

// startFailed stops whatever is left of a plugin that failed to start and
// returns err with the stderr lines that arrived meanwhile.
func (i *Instance) startFailed(err error) error {
	i.terminate(false)
	i.drainStderr()
	var pe *Error
	if errors.As(err, &pe) {
		pe.Stderr = i.logs.lastLines()
	}
	return err
}

// drainStderr waits (briefly) until the plugin's stderr reached EOF, so that
// the last lines it wrote before dying are in the error report.
func (i *Instance) drainStderr() {
	if r := i.getRunner(); r != nil && r.isStarted() {
		r.waitStderr(time.Second)
	}
}

// Name returns the plugin's name.
func (i *Instance) Name() string { return i.spec.Name }

// Pid returns the plugin's process id, which is also its process group id,
// or 0 if it never started.
func (i *Instance) Pid() int {
	if r := i.getRunner(); r != nil {
		return r.pgid()
	}
	return 0
}

// Describe returns the plugin's description, read once at Start. The
// result is shared: do not modify it.
func (i *Instance) Describe(context.Context) (*sdk.Description, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.desc == nil {
		return nil, &Error{Plugin: i.spec.Name, Hook: "Describe", Kind: KindStart, Cause: "was not started"}
	}
	return i.desc, nil
}

// ValidateConfig asks the plugin to check configJSON (its config section,
// as JSON); error diagnostics are problems, warnings are advice. The call
// is bounded by the start timeout.
func (i *Instance) ValidateConfig(ctx context.Context, configJSON []byte) ([]sdk.Diagnostic, error) {
	if err := i.usable("ValidateConfig"); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, i.opts.StartTimeout)
	defer cancel()
	diags, err := i.host.ValidateConfig(cctx, configJSON)
	if err != nil {
		return nil, i.callError(ctx, cctx, "ValidateConfig", i.opts.StartTimeout, err)
	}
	return diags, nil
}

// RunHook runs one hook with a deadline of timeout (0: the plugin's
// declared default for the hook). onProgress (may be nil) receives the
// plugin's progress messages.
//
// When ctx is cancelled or the deadline passes, the gRPC call is cancelled
// (the plugin's ctx ends) and the plugin is stopped: asked to shut down,
// given KillGrace, then its process group gets SIGTERM, KillGrace more, then
// SIGKILL. RunHook returns once the group is gone. A plugin that timed out,
// was cancelled, panicked or exited is marked failed: later calls return
// the same error without calling it. An error the hook itself returns
// (KindHook) leaves the plugin usable.
func (i *Instance) RunHook(ctx context.Context, call sdk.HookCall, timeout time.Duration, onProgress func(string)) (*sdk.Result, error) {
	hook := string(call.Hook)
	if err := i.usable(hook); err != nil {
		return nil, err
	}
	i.mu.Lock()
	desc := i.desc
	i.mu.Unlock()
	if !desc.Has(call.Hook) {
		return nil, i.newError(hook, KindHook, "does not implement this hook", nil)
	}
	if timeout <= 0 {
		timeout = desc.Timeout(call.Hook)
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := i.host.RunHook(hctx, call, onProgress)
	if err != nil {
		return nil, i.callError(ctx, hctx, hook, timeout, err)
	}
	return res, nil
}

// usable returns the error that marked the plugin failed, or a new one if
// its process has exited since the last call.
func (i *Instance) usable(op string) error {
	i.mu.Lock()
	failed, r := i.failed, i.runner
	i.mu.Unlock()
	if failed != nil {
		return failed
	}
	if i.host == nil {
		return i.newError(op, KindStart, "was not started", nil)
	}
	if r != nil && r.exited() {
		return i.fail(i.newError(op, KindExited, "had exited unexpectedly ("+r.exitState()+")", nil))
	}
	if i.stopping.Load() {
		return i.newError(op, KindStop, "was stopped", nil)
	}
	return nil
}

// failure returns the error that marked the plugin failed, or nil.
func (i *Instance) failure() *Error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.failed
}

// fail stops the plugin and marks it failed with e (the first failure
// wins); it returns the error every later call will get. e must not have
// been shared yet: its stderr lines are completed here.
func (i *Instance) fail(e *Error) *Error {
	i.terminate(false)
	i.drainStderr()
	e.Stderr = i.logs.lastLines()
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.failed == nil {
		i.failed = e
	}
	return i.failed
}

var panicRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)panicked in [A-Za-z]+: (.*)`) })

// callError classifies a failed RPC: timeout, cancellation, panic, crash,
// broken connection, or an error the plugin returned. ctx is the caller's
// context and cctx the call's (with its deadline).
func (i *Instance) callError(ctx, cctx context.Context, op string, timeout time.Duration, err error) error {
	st, _ := status.FromError(err)
	r := i.getRunner()
	// The deadline travels to the plugin with the call (grpc-timeout), so
	// the plugin's side may end the stream a moment before ours expires.
	if dl, ok := cctx.Deadline(); ok && cctx.Err() == nil && time.Until(dl) < 250*time.Millisecond &&
		(st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled || st.Code() == codes.Internal) {
		<-cctx.Done()
	}
	switch {
	case ctx.Err() != nil:
		return i.fail(i.newError(op, KindCancelled, "was cancelled", ctx.Err()))
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return i.fail(i.newError(op, KindTimeout, "timed out after "+timeout.String(), context.DeadlineExceeded))
	case i.failure() != nil:
		return i.failure() // a concurrent call failed first and stopped the plugin
	case i.stopping.Load():
		return i.newError(op, KindStop, "was stopped (Close) while the call was running", err)
	case st.Code() == codes.Internal && strings.Contains(st.Message(), " panicked in "):
		value, stack := st.Message(), ""
		if m := panicRE().FindStringSubmatch(st.Message()); m != nil {
			value = m[1]
		}
		if v, s, ok := strings.Cut(value, "\n"); ok {
			value, stack = v, s
		}
		if stack != "" {
			i.logs.writeFile("", "panic in "+op+": "+value+"\n"+stack)
		}
		e := i.newError(op, KindPanic, "panicked: "+value, err)
		e.Detail = stack
		return i.fail(e)
	case r != nil && (r.exited() || transportCode(st.Code()) && r.waitExit(time.Second)):
		return i.fail(i.newError(op, KindExited, "exited unexpectedly ("+r.exitState()+")", err))
	case st.Code() == codes.Unavailable:
		return i.fail(i.newError(op, KindConnection, "connection lost: "+st.Message(), err))
	case st.Code() == codes.Unimplemented:
		return i.newError(op, KindHook, "does not implement this call: "+st.Message(), err)
	}
	msg := err.Error()
	if st != nil {
		msg = st.Message()
	}
	return i.newError(op, KindHook, msg, err)
}

// transportCode reports whether a gRPC code may mean that the plugin
// process went away (as opposed to an error the plugin returned).
func transportCode(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.Canceled || c == codes.Internal
}

// Close stops the plugin: it asks the plugin to shut down, waits
// KillGrace, sends SIGTERM to its process group, waits KillGrace, sends
// SIGKILL, and reaps it; leftover processes of the group (children the
// plugin spawned) get the same treatment. It is idempotent and always
// waits for the process. The error says if the plugin had to be killed.
func (i *Instance) Close() error {
	return i.terminate(true)
}
