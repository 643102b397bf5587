// Package dockertest runs tier-2 tests against a real Docker engine: it checks that
// the engine answers, finds the locally built test images (test/images/build.sh),
// and creates networks and containers that are removed by id when the test ends.
//
// It drives the `docker` CLI with argv (no shell, no Docker client module), so
// marina's go.mod does not grow by the Docker client's dependencies.
//
// Every object it creates carries the labels marina.test=1 and marina.test.pid=<pid
// of the test process>; objects left behind by a test process that died (killed by
// a timeout, say) are removed by the next Require. See test/README.md.
package dockertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SkipEnv is the environment variable that turns a missing Docker engine into a
// skip instead of a failure, for developers without Docker. CI never sets it, and
// it is ignored whenever CI is set.
const SkipEnv = "MARINA_SKIP_DOCKER"

// Labels put on every container, network and image this package creates.
const (
	LabelTest = "marina.test"
	LabelPID  = "marina.test.pid"
	LabelName = "marina.test.name"
)

// CommandTimeout bounds every docker CLI call that does not say otherwise.
const CommandTimeout = 2 * time.Minute

// images maps a test image name to the tag test/images/build.sh gives it. The
// versions are those of test/images/go.mod (TestImageTagsMatchGoMod checks it).
var images = map[string]string{
	"registry": "marina-test/registry:v3.1.2",
	"etcd":     "marina-test/etcd:v3.7.3",
	"coredns":  "marina-test/coredns:v1.15.0",
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Host is the Docker endpoint the tests use (DOCKER_HOST, or the engine's
// default socket), for a plugin under test: plugintest's default
// environment points at no engine, so a tier-2 test says which one.
func Host() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///var/run/docker.sock"
}

// Require fails the test when no Docker engine answers, with the command that
// fixes it. When MARINA_SKIP_DOCKER=1 is set (and CI is not) it skips instead.
// The engine is probed once per test process; that first probe also removes
// objects left behind by test processes that no longer exist.
func Require(t testing.TB) {
	t.Helper()
	probeOnce.Do(func() {
		probeErr = probe()
		if probeErr == nil {
			reapStale()
		}
	})
	if probeErr == nil {
		return
	}
	if os.Getenv(SkipEnv) == "1" && os.Getenv("CI") == "" {
		t.Skipf("docker engine not available (%v); skipping because %s=1", probeErr, SkipEnv)
	}
	t.Fatalf("docker engine not available: %v\n"+
		"fix: make test-setup as root (test/ci/docker.sh installs docker.io and starts dockerd, "+
		"test/images/build.sh builds the test images); make test does it first.\n"+
		"Without docker, set %s=1 to skip tier-2 tests (ignored when CI is set).",
		probeErr, SkipEnv)
}

func probe() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("the docker CLI is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := docker(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return fmt.Errorf("docker version: %w", err)
	}
	if v == "" {
		return errors.New("docker version printed no server version")
	}
	return nil
}

// Image returns the tag of the locally built test image name ("registry", "etcd"
// or "coredns"), failing the test with the build command when it is absent.
func Image(t testing.TB, name string) string {
	t.Helper()
	Require(t)
	tag, ok := images[name]
	if !ok {
		t.Fatalf("dockertest.Image: unknown test image %q (known: registry, etcd, coredns)", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	if _, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", tag); err != nil {
		t.Fatalf("test image %s is missing: run make test-setup (or test/images/build.sh %s) (%v)", tag, name, err)
	}
	return tag
}

// Net is a bridge network created for one test by Network.
type Net struct {
	// ID is the full network id; pass it to `docker run --network`.
	ID string
	// Name is the unique name the network was created with.
	Name string
	// Subnet is the network's IPv4 subnet.
	Subnet netip.Prefix
	// Bridge is the host interface of the network (br-<id prefix>); traffic to
	// Subnet goes through it and never leaves the machine.
	Bridge string
}

// Network creates a uniquely named bridge network with subnet (e.g.
// "172.31.0.0/16") and removes it by id when the test ends. Tests that run at the
// same time, in any package, need subnets that do not overlap.
func Network(t testing.TB, subnet string) *Net {
	t.Helper()
	Require(t)
	prefix, err := netip.ParsePrefix(subnet)
	if err != nil || !prefix.Addr().Is4() || prefix.Masked() != prefix {
		t.Fatalf("dockertest.Network: subnet %q is not an IPv4 network like 172.31.0.0/16", subnet)
	}
	name := "marina-test-" + strconv.Itoa(os.Getpid()) + "-" + randHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	args := append([]string{"network", "create", "--driver", "bridge", "--subnet", subnet}, LabelArgs(t)...)
	id, err := docker(ctx, append(args, name)...)
	if err != nil {
		t.Fatalf("docker network create %s (%s): %v\n"+
			"fix: another network uses this subnet; list them with "+
			"`docker network ls --filter label=%s` and choose another subnet", name, subnet, err, LabelTest)
	}
	t.Cleanup(func() { remove(t, "network", "rm", id) })

	n := &Net{ID: id, Name: name, Subnet: prefix, Bridge: "br-" + id[:min(12, len(id))]}
	if err := onBridge(n.Bridge, prefix); err != nil {
		t.Fatalf("network %s: %v", name, err)
	}
	return n
}

// onBridge checks that the host interface bridge exists and holds an address in
// prefix, so that traffic to prefix stays on this machine.
func onBridge(bridge string, prefix netip.Prefix) error {
	iface, err := net.InterfaceByName(bridge)
	if err != nil {
		return fmt.Errorf("bridge interface %s not found: %w", bridge, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", bridge, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && prefix.Contains(ip.Unmap()) {
				return nil
			}
		}
	}
	return fmt.Errorf("bridge interface %s has no address in %s", bridge, prefix)
}

// Run starts a detached container (`docker run -d <args...>`; args are flags,
// the image and its arguments) and returns its id. The container is removed by id,
// with its anonymous volumes, when the test ends; if the test failed, the tail of
// its log is logged first.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	full := append(append([]string{"run", "-d"}, LabelArgs(t)...), args...)
	id, err := docker(ctx, full...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(full, " "), err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			logs, _ := dockerCombined(ctx, "logs", "--tail", "60", id)
			t.Logf("last log lines of container %.12s (%s):\n%s", id, strings.Join(args, " "), logs)
		}
		remove(t, "container", "rm", "-f", "-v", id)
	})
	return id
}

// Exec runs `docker exec <id> <cmd...>` and returns its standard output, failing
// the test (with the command's output) when it exits non-zero.
func Exec(t testing.TB, id string, cmd ...string) string {
	t.Helper()
	return Docker(t, append([]string{"exec", id}, cmd...)...)
}

// Docker runs the docker CLI with args, bounded by CommandTimeout, and returns its
// trimmed standard output; a non-zero exit fails the test with the output.
func Docker(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	out, err := docker(ctx, args...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// HostPort returns the 127.0.0.1 address that container port (e.g. "5000/tcp")
// of container id is published on (`docker run -p 127.0.0.1::5000`).
func HostPort(t testing.TB, id, port string) netip.AddrPort {
	t.Helper()
	out := Docker(t, "port", id, port)
	for _, line := range strings.Split(out, "\n") {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(line))
		if err == nil && ap.Addr().IsLoopback() {
			return ap
		}
	}
	t.Fatalf("container %.12s publishes %s on no loopback address (docker port: %q); "+
		"publish it with -p 127.0.0.1::%s", id, port, out, strings.Split(port, "/")[0])
	return netip.AddrPort{}
}

// WaitFor calls check every interval until it returns nil, failing the test with
// the last error once timeout has passed. what names the awaited condition.
func WaitFor(t testing.TB, timeout, interval time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// Labels returns the labels this package puts on every object it creates for
// t; give them to objects a test creates through another client so that a
// crashed test's leftovers are reaped too.
func Labels(t testing.TB) map[string]string {
	return map[string]string{
		LabelTest: "1",
		LabelPID:  strconv.Itoa(os.Getpid()),
		LabelName: t.Name(),
	}
}

// Cleanup removes, when the test ends, the containers and volumes a test
// created through another client than this package (e.g. the plugin under
// test). Containers go first (with their anonymous volumes), then volumes.
// Names that do not exist are fine.
func Cleanup(t testing.TB, containers, volumes []string) {
	t.Helper()
	t.Cleanup(func() {
		for _, c := range containers {
			remove(t, "container", "rm", "-f", "-v", c)
		}
		for _, v := range volumes {
			remove(t, "volume", "rm", "-f", v)
		}
	})
}

// LabelArgs are Labels(t) as the docker CLI's --label flags: the labels of
// every object this package creates for t, for objects a test makes through
// the docker CLI itself (docker create, docker build, ...).
func LabelArgs(t testing.TB) []string {
	return []string{
		"--label", LabelTest + "=1",
		"--label", LabelPID + "=" + strconv.Itoa(os.Getpid()),
		"--label", LabelName + "=" + t.Name(),
	}
}

// remove runs a removal command at cleanup; an object already gone is fine.
func remove(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	if _, err := docker(ctx, args...); err != nil && !isNotFound(err) {
		t.Errorf("cleanup: docker %s: %v", strings.Join(args, " "), err)
	}
}

func isNotFound(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "no such") || strings.Contains(s, "not found")
}

// docker runs the CLI and returns trimmed stdout; the error carries stderr.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return "", fmt.Errorf("%w (%v): %s", ctx.Err(), err, msg)
		}
		return "", fmt.Errorf("%v: %s", err, msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// dockerCombined runs the CLI and returns stdout and stderr together.
func dockerCombined(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Registry starts the test image of the distribution registry
// (marina-test/registry) published on 127.0.0.1, waits until it answers
// GET /v2/, and returns its host:port. It is removed with the test.
func Registry(t testing.TB) string {
	t.Helper()
	img := Image(t, "registry")
	id := Run(t, "-p", "127.0.0.1::5000", img)
	hostport := HostPort(t, id, "5000/tcp").String()
	WaitRegistry(t, "registry "+hostport, hostport, 30*time.Second)
	return hostport
}

// WaitRegistry waits, up to timeout, until the registry at hostport (on
// 127.0.0.1) answers GET /v2/ with 200, and fails the test otherwise.
func WaitRegistry(t testing.TB, what, hostport string, timeout time.Duration) {
	t.Helper()
	if !strings.HasPrefix(hostport, "127.0.0.1:") {
		t.Fatalf("WaitRegistry: %s is not a loopback address", hostport)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil}}
	WaitFor(t, timeout, 200*time.Millisecond, what, func() error {
		resp, err := hc.Get("http://" + hostport + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		return nil
	})
}
