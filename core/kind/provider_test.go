package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/bcollard/marina/sdk/dockertest"
)

// testSubnet is this package's docker test network (see test/README.md:
// subnets of tests that may run at the same time must not overlap).
const testSubnet = "172.23.0.0/16"

func TestKindProviderEnv(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://user-docker:2376")
	t.Setenv("DOCKER_CONTEXT", "colima")
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "user-net")
	t.Setenv("KIND_EXPERIMENTAL_PROVIDER", "podman")
	t.Setenv("MARINA_TEST_KEEP", "yes")
	t.Setenv("https_proxy", "http://user-proxy:3128")
	t.Setenv("NO_PROXY", "only-the-users.example")

	tests := []struct {
		name      string
		p         KindProvider
		want      []string
		wantNoKey []string
	}{
		{"endpoint and network", KindProvider{DockerHost: "unix:///Users/me/.marina/docker.sock", Network: "marina"},
			[]string{"DOCKER_HOST=unix:///Users/me/.marina/docker.sock", "KIND_EXPERIMENTAL_DOCKER_NETWORK=marina", "MARINA_TEST_KEEP=yes"},
			[]string{"DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "KIND_EXPERIMENTAL_PROVIDER"}},
		{"the environment's docker, kind's network", KindProvider{Network: "kind"},
			[]string{"DOCKER_HOST=tcp://user-docker:2376", "DOCKER_CONTEXT=colima", "MARINA_TEST_KEEP=yes"},
			[]string{"KIND_EXPERIMENTAL_DOCKER_NETWORK", "KIND_EXPERIMENTAL_PROVIDER", "https_proxy", "NO_PROXY"}},
		// The lab's proxy (issue 25) replaces the user's raw variables: the
		// nodes get the lab's NO_PROXY, never one without the lab in it.
		{"the lab's proxy", KindProvider{ProxyEnv: []string{"HTTPS_PROXY=http://p:3128", "https_proxy=http://p:3128", "NO_PROXY=172.30.0.0/16,demo.internal", "no_proxy=172.30.0.0/16,demo.internal"}},
			[]string{"HTTPS_PROXY=http://p:3128", "https_proxy=http://p:3128", "NO_PROXY=172.30.0.0/16,demo.internal", "no_proxy=172.30.0.0/16,demo.internal"},
			[]string{"HTTP_PROXY", "http_proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.p.env()
			count := map[string]int{}
			for _, kv := range env {
				k, _, _ := strings.Cut(kv, "=")
				count[k]++
			}
			for _, w := range tt.want {
				k, _, _ := strings.Cut(w, "=")
				if !slices.Contains(env, w) || count[k] != 1 {
					t.Errorf("env has %d %s entries, want exactly %q", count[k], k, w)
				}
			}
			for _, k := range tt.wantNoKey {
				if count[k] != 0 {
					t.Errorf("env still sets %s", k)
				}
			}
		})
	}
}

func TestServeHelperBadRequests(t *testing.T) {
	tests := []struct {
		name, in string
		code     int
		stdout   string
		stderr   string
	}{
		{"not JSON", "hello", 2, "", "this mode is for marina's own use"},
		{"unknown field", `{"op":"list","shell":"rm -rf /"}`, 2, "", `unknown field "shell"`},
		{"unknown operation", `{"op":"explode"}`, 1, `unknown operation \"explode\"`, ""},
		{"create without config", `{"op":"create","name":"x"}`, 1, "no kind config", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := ServeHelper(strings.NewReader(tt.in), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Fatalf("ServeHelper = %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
			if tt.code == 1 {
				var resp helperResponse
				if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || resp.Error == "" {
					t.Fatalf("stdout %q is not an error response: %v", stdout.String(), err)
				}
			}
		})
	}
}

// --- tier 2: a real Docker engine (kind nodes cannot start here: privileged
// containers fail, see TESTING.md) ---

func dockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///var/run/docker.sock"
}

// testCluster returns a cluster name unique to this test run, and removes
// any node container kind leaves with that name when the test ends.
func testCluster(t *testing.T, what string) string {
	t.Helper()
	name := fmt.Sprintf("mk-%s-%d-%d", what, os.Getpid(), time.Now().UnixNano()%100000)
	t.Cleanup(func() {
		if ids := kindContainers(t, name); len(ids) > 0 {
			dockertest.Docker(t, append([]string{"rm", "-f", "-v"}, ids...)...)
		}
	})
	return name
}

// kindContainers lists the containers with kind's cluster label for name,
// straight from Docker.
func kindContainers(t *testing.T, name string) []string {
	t.Helper()
	return strings.Fields(dockertest.Docker(t, "ps", "-a", "-q", "--filter", "label="+ClusterLabel+"="+name))
}

// logLines collects a provider's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }

func (l *logLines) contains(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(s string) bool { return strings.Contains(s, sub) })
}

func renderTest(t *testing.T, name, image string, workers int) *v1alpha4.Cluster {
	t.Helper()
	c, err := Render(RenderInput{Name: name, Slot: mustSlot(t, 99), NodeImage: image, Workers: workers,
		Labels: map[string]string{"marina.dev/test": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKindProviderEndpoint(t *testing.T) {
	dockertest.Require(t)
	ctx := context.Background()
	name := testCluster(t, "ep")

	good := &KindProvider{DockerHost: dockerHost()}
	clusters, err := good.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if slices.Contains(clusters, name) {
		t.Fatalf("List = %v holds %s before it was created", clusters, name)
	}
	nodes, err := good.Nodes(ctx, name)
	if err != nil || len(nodes) != 0 {
		t.Fatalf("Nodes(%s) = %v, %v; want none", name, nodes, err)
	}

	// The endpoint reaches kind's docker CLI calls: a socket that does not
	// exist makes them fail, naming it.
	sock := filepath.Join(t.TempDir(), "no-docker.sock")
	bad := &KindProvider{DockerHost: "unix://" + sock}
	if _, err := bad.List(ctx); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("List with DockerHost %s = %v, want an error naming the socket", sock, err)
	}
	if err := bad.Create(ctx, renderTest(t, name, "unused:v0", 0), CreateOptions{}); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Create with DockerHost %s = %v, want an error naming the socket", sock, err)
	}
}

// TestKindProviderCreateFails creates a cluster whose nodes cannot start
// (here: privileged containers are refused) and checks what is left.
func TestKindProviderCreateFails(t *testing.T) {
	image := dockertest.Image(t, "registry") // present locally: kind pulls nothing
	net := dockertest.Network(t, testSubnet)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, retain := range []bool{false, true} {
		t.Run(fmt.Sprintf("retain=%v", retain), func(t *testing.T) {
			name := testCluster(t, "fail")
			var log logLines
			p := &KindProvider{DockerHost: dockerHost(), Network: net.Name, Log: log.add}
			err := p.Create(ctx, renderTest(t, name, image, 1), CreateOptions{Retain: retain, Wait: 10 * time.Second})
			if err == nil {
				t.Fatal("Create succeeded with a node image that is no kind node")
			}
			t.Logf("Create error (expected): %v", err)
			if !strings.Contains(err.Error(), "create cluster "+name) {
				t.Errorf("error %q does not name the cluster", err)
			}
			if !log.contains("Preparing nodes") {
				t.Errorf("kind's progress lines were not forwarded: %q", log.lines)
			}

			left := kindContainers(t, name)
			if !retain {
				if len(left) != 0 {
					t.Fatalf("without retain, node containers are left: %v", left)
				}
				return
			}
			if len(left) != 2 {
				t.Fatalf("with retain, %d node containers are left, want 2 (control plane + worker): %v", len(left), left)
			}
			// The retained nodes are on the network marina asked for.
			nets := dockertest.Docker(t, "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", left[0])
			if strings.TrimSpace(nets) != net.Name {
				t.Errorf("node %s is on networks %q, want %s", left[0], nets, net.Name)
			}
			nodes, err := p.Nodes(ctx, name)
			if want := []string{name + "-control-plane", name + "-worker"}; err != nil || !slices.Equal(nodes, want) {
				t.Errorf("Nodes = %v, %v; want %v", nodes, err, want)
			}
			clusters, err := p.List(ctx)
			if err != nil || !slices.Contains(clusters, name) {
				t.Errorf("List = %v, %v; want it to hold %s", clusters, err, name)
			}
			// A second Create refuses the name and leaves the nodes alone.
			err = p.Create(ctx, renderTest(t, name, image, 1), CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Errorf("second Create = %v, want an already-exists error", err)
			}
			if again := kindContainers(t, name); !slices.Equal(again, left) {
				t.Errorf("second Create changed the nodes: %v -> %v", left, again)
			}
			if err := p.Delete(ctx, name); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if left := kindContainers(t, name); len(left) != 0 {
				t.Fatalf("Delete left node containers: %v", left)
			}
			if err := p.Delete(ctx, name); err != nil {
				t.Fatalf("Delete of a deleted cluster: %v", err)
			}
		})
	}
}

// TestKindProviderCancel cancels a Create while kind retries pulling an
// image from a closed loopback port: Create returns promptly, no helper or
// docker CLI it started survives, and no node container is left.
func TestKindProviderCancel(t *testing.T) {
	dockertest.Require(t)
	name := testCluster(t, "cancel")
	var (
		mu   sync.Mutex
		pids []int
		ops  []string
	)
	// The create's helper is the event to cancel on: the Nodes check
	// before it runs a helper too, and a cancellation that lands there
	// (a sleep under load) would test nothing.
	creating := make(chan struct{})
	p := &KindProvider{DockerHost: dockerHost(), started: func(op string, pid int) {
		mu.Lock()
		defer mu.Unlock()
		pids, ops = append(pids, pid), append(ops, op)
		if op == opCreate {
			close(creating)
		}
	}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := renderTest(t, name, "127.0.0.1:1/marina-kind-test/missing:v0", 0)
	done := make(chan error, 1)
	go func() { done <- p.Create(ctx, cfg, CreateOptions{}) }()
	select {
	case <-creating: // kind is pulling (it retries for about 10 s)
	case err := <-done:
		t.Fatalf("Create returned before its helper started: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the create's kind helper did not start within 2 min")
	}
	cancel()
	start := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Create did not return within 30 s of the cancellation")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Create took %v to return after the cancellation", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create error = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(ops, opCreate); i < 0 || !slices.Contains(ops[i+1:], opDelete) {
		t.Fatalf("helpers started: %v (pids %v); want the create's and then the rollback's delete", ops, pids)
	}
	for _, pid := range pids {
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d of a kind helper still has processes (kill -0: %v)", pid, err)
		}
	}
	if left := kindContainers(t, name); len(left) != 0 {
		t.Errorf("node containers left: %v", left)
	}
}

// TestKindProviderNoHelper runs programs that are no kind helper: the error
// says what is wrong instead of hanging or decoding garbage.
func TestKindProviderNoHelper(t *testing.T) {
	tests := []struct {
		exe  string
		want string
	}{
		{"/bin/true", "does its main hand \"kind-helper\" to kind.ServeHelper"},
		{filepath.Join(t.TempDir(), "missing"), "start the kind helper"},
	}
	for _, tt := range tests {
		p := &KindProvider{Executable: tt.exe}
		if _, err := p.List(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("List with Executable %s = %v, want an error containing %q", tt.exe, err, tt.want)
		}
	}
}
