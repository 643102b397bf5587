package plugintest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/bcollard/marina/sdk"
)

// Limits of the out-of-process harness.
const (
	buildTimeout = 5 * time.Minute
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
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin, err := build(t.TempDir(), pkg)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return bin
}

func build(dir, pkg string) (string, error) {
	bin := filepath.Join(dir, "plugin")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// Start runs binary as a plugin child process exactly as marina does
// (go-plugin with sdk.Handshake, sdk.HostPluginSets, gRPC only, AutoMTLS),
// and asks it to Describe itself. The plugin's log lines go to t.Log and are
// kept for Stderr. On t's cleanup the process is stopped (gracefully, then
// killed) and t fails if it is still alive afterwards.
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
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.HostPluginSets(),
		Cmd:              exec.Command(binary),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     startTimeout,
		Stderr:           stderr,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "plugintest",
			Level:  hclog.Debug,
			Output: logw,
		}),
	})
	pid := 0
	stop := func() {
		client.Kill()
		if pid != 0 {
			if err := waitGone(pid, exitTimeout); err != nil {
				t.Errorf("plugintest: %v", err)
			}
		}
	}
	rpc, err := client.Client()
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("starting plugin %s: %v%s", binary, err, tail(stderr.String()))
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
	h := &Harness{t: t, client: hc, pid: pid, stderr: stderr}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if h.desc, err = hc.Describe(ctx, HostVersion); err != nil {
		return nil, fmt.Errorf("plugin %s: Describe: %v%s", binary, err, tail(stderr.String()))
	}
	return h, nil
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
