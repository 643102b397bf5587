package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/test/standin"
)

// The test lab's facts. They are not marina's defaults on purpose: the tests
// run beside a user's lab (`make demo`, or a real one), which has the
// defaults — network "kind" on 172.30.0.0/16, containers marina-dns and
// marina-dns-etcd — and must leave it exactly as it was (besideUserLab checks it).
// Cluster names carry the prefix "e2e-" for the same reason: kind names a
// cluster's node containers after it, machine-wide.
const (
	bridgeCIDR      = "172.29.0.0/16"
	zone            = "demo.internal"
	network         = "marina-e2e"
	etcdContainer   = "marina-e2e-dns-etcd"
	serverContainer = "marina-e2e-dns"
)

var (
	dnsServer = netip.MustParseAddrPort("172.29.255.53:53")
	bridge    = netip.MustParsePrefix(bridgeCIDR)
)

// Bounds of the marina commands the tests run.
const (
	upTimeout     = 5 * time.Minute
	createTimeout = 6 * time.Minute
	deleteTimeout = 3 * time.Minute
)

// labConfig is the lab's config: marina's defaults on the host driver with
// the locally built service images (no container registry is reachable
// here, so none of the default mirrors either), on a network, subnet and
// container names of its own; kindNode, when not empty, is images.kindNode
// (the real-node tests' node image), and mirrors is registries.mirrors (a
// YAML flow list; "[]" for none).
func labConfig(kindNode, mirrors string) string {
	images := `images:
  registry: marina-test/registry:v3.1.2
  dnsEtcd: marina-test/etcd:v3.7.3
  dnsServer: marina-test/coredns:v1.15.0
`
	if kindNode != "" {
		images += "  kindNode: " + kindNode + "\n"
	}
	return `vm:
  driver: host
network:
  name: ` + network + `
  bridgeCIDR: ` + bridgeCIDR + `
` + images + `registries:
  mirrors: ` + mirrors + `
plugins:
  localdns:
    config:
      etcdContainer: ` + etcdContainer + `
      serverContainer: ` + serverContainer + `
`
}

// lab is one marina lab brought up by the marina binary for a test, in a
// home directory of its own.
type lab struct {
	home    string
	bin     string
	env     []string
	kubectl string
	// kubelet plays the kubelet for the stand-in's clusters; nil with
	// real nodes.
	kubelet *kubelet
	// extraCA is the trust.extraCAs certificate of a real-node lab (PEM).
	extraCA string
	// slots are the slots the lab's clusters get, in creation order (while
	// none is deleted): the lowest whose API host port 7000+N no other
	// container publishes. A user's lab with clusters beside the tests holds
	// its slots' ports on the same engine, and marina skips them.
	slots []int
}

// freeSlots are the slots 1..9 whose API host port no container publishes
// now, lowest first.
func freeSlots(t testing.TB) []int {
	t.Helper()
	busy := map[int]bool{}
	for _, m := range publishedPort.FindAllStringSubmatch(dockertest.Docker(t, "ps", "--format", "{{.Ports}}"), -1) {
		if p, err := strconv.Atoi(m[1]); err == nil {
			busy[p] = true
		}
	}
	var free []int
	for n := 1; n <= 9; n++ {
		if !busy[slot.APIPortBase+n] {
			free = append(free, n)
		}
	}
	if len(free) < 4 {
		t.Fatalf("only slots %v have a free API port; the tests need four", free)
	}
	return free
}

// publishedPort matches a host port in `docker ps`'s Ports column
// ("0.0.0.0:7001->6443/tcp").
var publishedPort = regexp.MustCompile(`:([0-9]+)->`)

// startLab builds marina and the kind stand-in, checks that the lab's
// addresses are free, runs `marina up` and registers `marina destroy --yes`
// (plus a by-label sweep of anything a failed destroy left) for the end of t.
func startLab(t testing.TB) *lab {
	t.Helper()
	paths := standin.Build(t)
	l := newLab(t, "", "[]", paths.Env())
	// Cleanups run last-in first-out: the kubelet's pods go before the
	// lab is destroyed (they hold addresses on its network).
	l.kubelet = newKubelet(t, network)
	l.run(t, upTimeout, "up", "--progress", "plain")
	return l
}

// startRealLab is startLab with real kind nodes: marina's own kind helper
// (kind's library) makes the clusters from the tests' node image
// (test/node), with the docker shim first on its PATH, and one registry
// mirror, of the tests' own upstream registry (realnode_test.go).
func startRealLab(t testing.TB) *lab {
	t.Helper()
	n := requireRealNodes(t)
	l := newLab(t, n.image, realMirrors, n.env())
	// A company CA (issue 25): it must reach the mirrors and every node.
	ca, err := labca.Create(filepath.Join(l.home, "corp-ca"), labca.Scope{Lab: "corp", Zone: "corp.example", Bridge: netip.MustParsePrefix("10.0.0.0/8")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l.extraCA = string(ca.CertPEM)
	f, err := os.OpenFile(filepath.Join(l.home, ".marina", "config.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "trust:\n  extraCAs: [%q]\n", ca.CertPath())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	l.run(t, upTimeout, "up", "--progress", "plain")
	return l
}

// newLab makes a lab's home, config (labConfig) and environment (with
// extraEnv), and registers its destroy for the end of t.
func newLab(t testing.TB, kindNode, mirrors string, extraEnv []string) *lab {
	t.Helper()
	dockertest.Require(t)
	kubetest.RequireAssets(t)
	preflight(t)
	home := t.TempDir()
	l := &lab{home: home, bin: buildMarina(t), kubectl: kubetest.KubectlPath(t)}
	cfg := filepath.Join(home, ".marina", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(labConfig(kindNode, mirrors)), 0o644); err != nil {
		t.Fatal(err)
	}
	l.env = append(labEnv(home, cfg), extraEnv...)
	l.slots = freeSlots(t)
	if l.slots[0] != 1 {
		t.Logf("slots below %d have their API port taken (a user's clusters): the lab's clusters get slots %v", l.slots[0], l.slots)
	}
	t.Cleanup(func() { l.destroy(t) })
	return l
}

// labEnv is the environment of marina commands of a lab in home with config
// cfg: this process's, without HOME, KUBECONFIG and MARINA_* (nothing of the
// user's reaches the lab).
func labEnv(home, cfg string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "KUBECONFIG" || strings.HasPrefix(k, "MARINA_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "MARINA_CONFIG="+cfg)
}

// preflight fails when something else already holds the lab's addresses or
// names: a marina lab of this machine's user, most likely.
func preflight(t testing.TB) {
	t.Helper()
	for _, name := range []string{serverContainer, etcdContainer} {
		if out := dockertest.Docker(t, "ps", "-aq", "--filter", "name=^"+name+"$"); out != "" {
			t.Fatalf("a container named %s exists (left by an end-to-end run that was killed?): remove it (docker rm -f -v %s) and run again", name, name)
		}
	}
	out := dockertest.Docker(t, "network", "ls", "--format", "{{.Name}}")
	for _, n := range strings.Fields(out) {
		subnets := dockertest.Docker(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", n)
		for _, s := range strings.Fields(subnets) {
			p, err := netip.ParsePrefix(s)
			if err == nil && p.Overlaps(bridge) {
				t.Fatalf("docker network %s uses %s, which overlaps the test lab's bridge %s: the end-to-end tests need that subnet; remove that network (left by an end-to-end run that was killed?) and run again", n, s, bridgeCIDR)
			}
		}
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildMarina builds marina from this checkout once per test process.
func buildMarina(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "marina-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "marina")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", builtBin, "../../cmd/marina")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/marina: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// command returns an unstarted marina command of the lab.
func (l *lab) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, l.bin, args...)
	cmd.Env = l.env
	cmd.Dir = l.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A marina that outlives its bound is interrupted first, as a user
	// would, then killed.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	return cmd
}

// result is what a marina command did.
type result struct {
	args   []string
	out    string // standard output
	stderr string
	code   int
	err    error
	elapse time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("marina %s (exit %d after %s): %v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.elapse.Round(time.Millisecond), r.err, r.out, r.stderr)
}

// exec runs marina with args, bounded by timeout, and returns what it did.
func (l *lab) exec(timeout time.Duration, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := l.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{args: args, out: stdout.String(), stderr: stderr.String(), err: err, elapse: time.Since(start)}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		r.code = -1
	}
	return r
}

// run runs marina and fails the test unless it exits 0; it returns the
// output.
func (l *lab) run(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	r := l.exec(timeout, args...)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	return r.out
}

// destroy runs `marina destroy --yes` and then removes, by id, whatever a
// failed destroy left of the lab: stand-in nodes, the DNS containers, the
// network.
func (l *lab) destroy(t testing.TB) {
	r := l.exec(deleteTimeout+upTimeout, "destroy", "--yes")
	if r.err != nil {
		t.Errorf("%s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var leftovers []string
	// Only what is on the lab's network: other packages' tests run stand-in
	// clusters of their own at the same time.
	for _, filter := range []string{"label=" + kind.ClusterLabel, "name=^" + serverContainer + "$", "name=^" + etcdContainer + "$"} {
		out, _ := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", filter, "--filter", "network="+network).Output()
		leftovers = append(leftovers, strings.Fields(string(out))...)
	}
	if len(leftovers) > 0 {
		t.Errorf("marina destroy left containers %v; removing them", leftovers)
		exec.CommandContext(ctx, "docker", append([]string{"rm", "-f", "-v"}, leftovers...)...).Run()
	}
	if out, _ := exec.CommandContext(ctx, "docker", "network", "ls", "-q", "--filter", "name=^"+network+"$").Output(); len(bytes.TrimSpace(out)) > 0 {
		exec.CommandContext(ctx, "docker", "network", "rm", network).Run()
	}
}

// kubeconfigPath is the file marina exports cluster name's kubeconfig to.
func (l *lab) kubeconfigPath(name string) string { return slot.KubeconfigPath(l.home, name) }

// clientset connects to cluster name through marina's kubeconfig for it.
func (l *lab) clientset(t testing.TB, name string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfigPath(name))
	if err != nil {
		t.Fatalf("marina's kubeconfig of %s: %v", name, err)
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// kubectlOut runs kubectl with the lab's HOME (so ~/.kube/config is the
// one marina merged into) and returns its output, failing the test on error.
func (l *lab) kubectlOut(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubetest.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.kubectl, args...)
	cmd.Env = l.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// clusterInfo is what `marina cluster list -o json` says of one cluster.
type clusterInfo struct {
	Name     string `json:"name"`
	Slot     int    `json:"slot"`
	APIPort  int    `json:"apiPort"`
	Nodes    int    `json:"nodes"`
	Ready    int    `json:"ready"`
	Complete bool   `json:"complete"`
	Problem  string `json:"problem"`
}

// clusters lists the lab's clusters with marina.
func (l *lab) clusters(t testing.TB) map[string]clusterInfo {
	t.Helper()
	out := l.run(t, time.Minute, "cluster", "list", "-o", "json")
	var list []clusterInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("marina cluster list -o json: %v\n%s", err, out)
	}
	m := map[string]clusterInfo{}
	for _, c := range list {
		m[c.Name] = c
	}
	return m
}

// createCluster runs `marina cluster create name args...` and, on a
// stand-in lab, while it runs, plays the kubelet for MetalLB's controller
// and ExternalDNS as soon as marina has applied their Deployments
// (marina's PostCluster hooks wait for both). It fails the test unless marina exits 0, and returns what
// marina did.
func (l *lab) createCluster(t testing.TB, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		done <- l.exec(createTimeout, append([]string{"cluster", "create", name, "--progress", "plain"}, args...)...)
	}()
	if l.kubelet == nil { // real nodes: their kubelets run the pods
		r := <-done
		if r.err != nil {
			t.Fatalf("%s", r)
		}
		t.Logf("marina cluster create %s: %s", name, r.elapse.Round(time.Millisecond))
		return r
	}
	podErrs := l.kubelet.serve(ctx, t, name, l.kubeconfigPath(name))
	r := <-done
	cancel()
	if r.err != nil {
		t.Fatalf("%s\nkubelet stand-in: %v", r, <-podErrs)
	}
	if err := <-podErrs; err != nil {
		t.Fatalf("cluster %s was created, but playing the kubelet for its controllers failed: %v", name, err)
	}
	t.Logf("marina cluster create %s: %s", name, r.elapse.Round(time.Millisecond))
	return r
}
