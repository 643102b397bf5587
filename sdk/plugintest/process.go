package plugintest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/peercred"
)

// DefaultBuildTimeout bounds Build's `go build` unless BuildTimeout says
// otherwise.
const DefaultBuildTimeout = 5 * time.Minute

// Limits of the out-of-process harness.
const (
	startTimeout = 30 * time.Second
	// exitTimeout bounds the wait for the process to vanish after go-plugin's
	// Kill (which itself ends with SIGKILL after a 2s grace period).
	exitTimeout = 10 * time.Second
)

// Build compiles the plugin's main package pkg (a path such as "." or
// "./cmd/acme", or an import path, resolved from the test's working
// directory: the package under test) with `go build` into t.TempDir() and
// returns the binary's path. `go test` puts its own go command first in
// PATH, so the plugin is built by the toolchain running the test.
//
// The build is bounded by DefaultBuildTimeout (5 minutes) or BuildTimeout,
// and by the test's own deadline.
func Build(t testing.TB, pkg string, opts ...BuildOption) string {
	t.Helper()
	o := buildOptions{timeout: DefaultBuildTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if d, ok := deadlineOf(t); ok && d < o.timeout {
		o.timeout = d
	}
	bin, err := build(t.TempDir(), pkg, o.timeout)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return bin
}

// BuildOption changes one Build.
type BuildOption func(*buildOptions)

type buildOptions struct{ timeout time.Duration }

// BuildTimeout bounds the `go build` (DefaultBuildTimeout otherwise): a
// cold module cache on a slow machine may need more.
func BuildTimeout(d time.Duration) BuildOption {
	return func(o *buildOptions) { o.timeout = d }
}

// deadlineOf returns the time left before t's deadline, if it has one.
func deadlineOf(t testing.TB) (time.Duration, bool) {
	dt, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return 0, false
	}
	dl, ok := dt.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
}

func build(dir, pkg string, timeout time.Duration) (string, error) {
	bin := filepath.Join(dir, "plugin")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", fmt.Errorf("go build %s: stopped after %s, the build's time limit (DefaultBuildTimeout, or plugintest.BuildTimeout, or the test's -timeout when sooner); pass plugintest.BuildTimeout(d) to Build to allow more\n%s", pkg, timeout, out)
	}
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// Start runs binary as a plugin child process exactly as marina does
// (go-plugin with sdk.Handshake, sdk.HostPluginSets, gRPC only, peer
// credentials (AutoMTLS where unsupported),
// its own process group), and asks it to Describe itself. The plugin's log
// lines go to t.Log and are kept for Stderr. On t's cleanup the plugin is
// stopped (asked to shut down, which makes sdk.Serve kill every process the
// plugin started, then its process group is killed) and t fails if the
// plugin or a process of its group is still alive afterwards.
func Start(t testing.TB, binary string) *Harness {
	t.Helper()
	h, err := start(t, binary)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return h
}

func start(t testing.TB, binary string) (*Harness, error) {
	t.Helper()
	logw := newTestLog(t, "")
	stderr := &tailBuffer{max: 64 << 10}
	var proc *procRunner
	socketDir := ""
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.HostPluginSets(),
		// go-plugin prepares cmd's environment (cookie, certificate,
		// socket dir) only.
		RunnerFunc: func(_ hclog.Logger, cmd *exec.Cmd, dir string) (runner.Runner, error) {
			socketDir = dir
			c := exec.Command(binary)
			c.Env = cmd.Env
			proc = newProcRunner(c)
			return proc, nil
		},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		// As marina does: peer credentials, AutoMTLS where unsupported.
		AutoMTLS: !peercred.Supported(),
		GRPCDialOptions: peercred.DialOptions(func() int {
			if proc == nil || proc.pid() <= 0 {
				return -1 // no peer has it (0 would accept any)
			}
			return proc.pid()
		}),
		StartTimeout: startTimeout,
		Stderr:       stderr,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "plugintest",
			Level:  hclog.Debug,
			Output: logw,
		}),
	})
	stop := func() {
		client.Kill()
		// go-plugin's Kill leaves its socket dir when the plugin never
		// started (a missing binary).
		if socketDir != "" {
			_ = os.RemoveAll(socketDir)
		}
		if proc == nil || proc.pid() == 0 {
			return
		}
		// Whatever is left of the plugin's process group (children a
		// plugin that was killed could not stop) is killed too.
		killGroup(proc.pid())
		if err := waitGone(proc.pid(), exitTimeout); err != nil {
			t.Errorf("plugintest: %v", err)
		}
	}
	rpc, err := client.Client()
	if err != nil {
		stop() // also waits for the stderr lines to be copied
		return nil, startError(binary, err, proc, stderr.String())
	}
	t.Cleanup(stop)
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %v%s", binary, err, tail(stderr.String()))
	}
	hc, ok := raw.(*sdk.HostClient)
	if !ok {
		return nil, fmt.Errorf("plugin %s: dispensed %T, want *sdk.HostClient", binary, raw)
	}
	h := &Harness{t: t, client: hc, pid: proc.pid(), stderr: stderr}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if h.desc, err = hc.Describe(ctx, HostVersion); err != nil {
		return nil, fmt.Errorf("plugin %s: Describe: %v%s", binary, err, tail(stderr.String()))
	}
	return h, nil
}

var unrecognizedRE = regexp.MustCompile(`Unrecognized remote plugin message: ([^\n]*)`)

// startError says why the plugin did not complete the handshake: what it
// printed to stdout instead, or how it exited, with its last stderr lines.
func startError(binary string, err error, proc *procRunner, stderr string) error {
	if m := unrecognizedRE.FindStringSubmatch(err.Error()); m != nil && strings.TrimSpace(m[1]) != "" {
		return fmt.Errorf("starting plugin %s: it printed %q to stdout before the handshake; stdout is reserved for the plugin protocol, so a plugin must log to stderr and print nothing before sdk.Serve%s",
			binary, strings.TrimSpace(m[1]), tail(stderr))
	}
	if proc != nil && proc.waitExit(exitTimeout) && !proc.killedBySignal() {
		return fmt.Errorf("starting plugin %s: it exited before the handshake (%s); a marina plugin's main must call sdk.Serve%s",
			binary, proc.exitState(), tail(stderr))
	}
	return fmt.Errorf("starting plugin %s: %v%s", binary, err, tail(stderr))
}

// waitGone waits until process pid no longer exists.
func waitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !processAlive(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("plugin process %d is still running %v after it was stopped", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string) string {
	return (&Harness{stderr: &tailBuffer{buf: []byte(s)}}).stderrTail()
}

// procRunner is the go-plugin runner the harness uses, as marina does its
// own: the plugin gets its own process group (so that the group can be
// killed), stdin is /dev/null, and the process is reaped as soon as it
// exits, so its exit status is known even when the handshake failed.
type procRunner struct {
	cmd              *exec.Cmd
	stdoutR, stderrR *os.File
	done             chan struct{}

	mu      sync.Mutex
	started bool
	kill    bool // Kill was called
	waitErr error
}

var _ runner.Runner = (*procRunner)(nil)

func newProcRunner(cmd *exec.Cmd) *procRunner {
	return &procRunner{cmd: cmd, done: make(chan struct{})}
}

func (r *procRunner) Start(context.Context) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _ = outR.Close(), outW.Close()
		return err
	}
	r.cmd.Stdin = nil
	r.cmd.Stdout, r.cmd.Stderr = outW, errW
	r.cmd.SysProcAttr = sysProcAttr()
	err = r.cmd.Start()
	_, _ = outW.Close(), errW.Close()
	if err != nil {
		_, _ = outR.Close(), errR.Close()
		return err
	}
	r.stdoutR, r.stderrR = outR, errR
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	go func() {
		err := r.cmd.Wait()
		r.mu.Lock()
		r.waitErr = err
		r.mu.Unlock()
		close(r.done)
	}()
	return nil
}

// Wait waits for the process, then closes the pipes (go-plugin calls it
// once it has read both to EOF).
func (r *procRunner) Wait(context.Context) error {
	<-r.done
	_, _ = r.stdoutR.Close(), r.stderrR.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitErr
}

// Kill kills the plugin's process group.
func (r *procRunner) Kill(context.Context) error {
	r.mu.Lock()
	r.kill = true
	r.mu.Unlock()
	if pid := r.pid(); pid != 0 {
		killGroup(pid)
	}
	return nil
}

func (r *procRunner) Stdout() io.ReadCloser { return r.stdoutR }
func (r *procRunner) Stderr() io.ReadCloser { return r.stderrR }
func (r *procRunner) Name() string          { return r.cmd.Path }

func (r *procRunner) ID() string {
	if pid := r.pid(); pid != 0 {
		return strconv.Itoa(pid)
	}
	return ""
}

// Diagnose adds nothing: start leaves the diagnosis to the exit status
// and the plugin's stderr.
func (r *procRunner) Diagnose(context.Context) string { return "" }

func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// pid is the plugin's pid (and process group id), or 0 before it started.
func (r *procRunner) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return 0
	}
	return r.cmd.Process.Pid
}

// killedBySignal reports whether the harness (or go-plugin) killed the
// plugin, rather than the plugin exiting on its own.
func (r *procRunner) killedBySignal() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ee *exec.ExitError
	return r.kill && errors.As(r.waitErr, &ee) && ee.ExitCode() == -1
}

// waitExit waits up to d for the process to exit; false if it never started.
func (r *procRunner) waitExit(d time.Duration) bool {
	if r.pid() == 0 {
		return false
	}
	select {
	case <-r.done:
		return true
	case <-time.After(d):
		return false
	}
}

// exitState says how the process ended ("exit status 4", "signal: killed").
func (r *procRunner) exitState() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ee *exec.ExitError
	switch {
	case r.waitErr == nil:
		return "exit status 0"
	case errors.As(r.waitErr, &ee):
		return ee.ProcessState.String()
	}
	return r.waitErr.Error()
}
