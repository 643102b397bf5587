package e2e

// BenchmarkRealNodes (issue 23): marina on real kind nodes, in one lab and
// one run, each figure against its baseline of the same run. Reported,
// never asserted.
//
//   - cluster create with every built-in (slot, hooks, MetalLB, CoreDNS,
//     ExternalDNS, kubeconfig) against `kind create cluster --wait 5m`
//     (kind's own CLI, built from the pinned module) with the same node
//     image on the same network: the ratio, median of realCreateRounds
//     each, alternating. Goal: at most 1.3x.
//   - Service -> first 200 by name from this machine (resolved at the lab's
//     DNS server): p50 and p95 of realServices Services. Goal: p95 <= 2 s.
//   - idle memory and CPU of a cluster's node containers (everything a
//     cluster runs runs in them), with 1 cluster (against a bare kind
//     cluster of the same image, idle beside it) and per cluster with 3.
//     Goals: <= 600 MiB and <= 3 % of a core.
//   - recovery after a node restart: from the node's start until the
//     Service answers by VIP and by name again (its stop is reported
//     apart). Goal: <= 60 s.
//
// Run: go test -run '^$' -bench RealNodes -benchtime 1x ./test/e2e (~10 min).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/moby/moby/client"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/test/bench"
)

const (
	realCreateRounds = 2
	realServices     = 10
	realIdleSettle   = 30 * time.Second
	realIdleWindow   = 20 * time.Second
)

var (
	kindOnce sync.Once
	kindCLI  string
	kindErr  error
)

// buildKind builds kind's CLI from the module marina pins, once per process.
func buildKind(t testing.TB) string {
	t.Helper()
	kindOnce.Do(func() {
		dir, err := os.MkdirTemp("", "marina-e2e-kind-")
		if err != nil {
			kindErr = err
			return
		}
		kindCLI = filepath.Join(dir, "kind")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", kindCLI, "sigs.k8s.io/kind").CombinedOutput(); err != nil {
			kindErr = fmt.Errorf("go build sigs.k8s.io/kind: %v\n%s", err, out)
		}
	})
	if kindErr != nil {
		t.Fatal(kindErr)
	}
	return kindCLI
}

func BenchmarkRealNodes(b *testing.B) {
	l := startRealLab(b)
	startUpstream(b) // else the lab's mirror restarts all along, in the idle figures
	n := requireRealNodes(b)
	kindBin := buildKind(b)
	cli, err := client.New(client.WithHost(dockertest.Host()))
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()

	for b.Loop() {
		// cluster create, marina and bare kind, alternating. The last bare
		// cluster stays for the idle figures' baseline.
		const bare = "e2e-bare"
		var marinaTimes, kindTimes, kindSteps []time.Duration
		var deleteBare func()
		for i := range realCreateRounds {
			kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
			env := append(append(os.Environ(), n.env()...), "KIND_EXPERIMENTAL_DOCKER_NETWORK="+network)
			ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
			cmd := exec.CommandContext(ctx, kindBin, "create", "cluster", "--name", bare, "--image", n.image, "--kubeconfig", kubeconfig, "--wait", "5m")
			cmd.Env = env
			start := time.Now()
			out, err := cmd.CombinedOutput()
			kindTimes = append(kindTimes, time.Since(start))
			cancel()
			deleteBare = func() {
				del := exec.Command(kindBin, "delete", "cluster", "--name", bare, "--kubeconfig", kubeconfig)
				del.Env = env
				if dout, derr := del.CombinedOutput(); derr != nil {
					b.Errorf("kind delete cluster --name %s: %v\n%s", bare, derr, dout)
				}
			}
			if err != nil {
				deleteBare()
				b.Fatalf("kind create cluster (bare, round %d): %v\n%s", i+1, err, out)
			}
			// Let its pods start before deleting it: a node removed while
			// runc sets up a pod's cgroups can leave a cgroup v1 freezer
			// FROZEN, and Docker then cannot kill the node (seen here).
			settled(b, kubeconfig)
			if i < realCreateRounds-1 {
				deleteBare()
			}
			name := fmt.Sprintf("e2e-create%d", i)
			r := l.createCluster(quietTB{b}, name)
			marinaTimes = append(marinaTimes, r.elapse)
			kindStep, _ := stepTimes(b, r.out)
			kindSteps = append(kindSteps, kindStep)
			l.run(b, deleteTimeout, "cluster", "delete", name, "--progress", "plain")
		}
		m, k := median(marinaTimes), median(kindTimes)
		bench.Figure(b, "cluster create, every built-in, vs kind create cluster (same image)",
			fmt.Sprintf("%.2fx (%s, of which kind %s)", m.Seconds()/k.Seconds(), m.Round(100*time.Millisecond), median(kindSteps).Round(100*time.Millisecond)), "<= 1.3x",
			"kind "+k.Round(100*time.Millisecond).String(), m.Seconds() <= 1.3*k.Seconds())

		// Service -> 200 by name.
		const main = "e2e-bench"
		l.createCluster(quietTB{b}, main)
		cs := l.clientset(b, main)
		deployEcho(b, cs, "default", "echo")
		var byName []time.Duration
		for i := range realServices {
			byName = append(byName, serviceToAnswer(b, cs, main, fmt.Sprintf("echo%d", i)))
		}
		slices.Sort(byName)
		p95 := byName[(len(byName)*95+99)/100-1]
		bench.Figure(b, fmt.Sprintf("Service -> first 200 by name (p50, p95 of %d)", realServices),
			fmt.Sprintf("p50 %s, p95 %s", median(byName).Round(time.Millisecond), p95.Round(time.Millisecond)), "p95 <= 2s", "-", p95 <= 2*time.Second)

		// Idle cost per cluster: 1 cluster (beside the bare kind one, the
		// baseline), then 3.
		time.Sleep(realIdleSettle)
		costs := nodeIdleCosts(b, cli)
		one, base := costs[main], costs[bare]
		bench.Figure(b, "idle memory of a cluster (1 cluster, its node container)", fmt.Sprintf("%.0f MiB", one.mem), "<= 600 MiB",
			fmt.Sprintf("bare kind %.0f MiB", base.mem), one.mem <= 600)
		bench.Figure(b, "idle CPU of a cluster (1 cluster, its node container)", fmt.Sprintf("%.1f %% of a core", one.cpu), "<= 3 %",
			fmt.Sprintf("bare kind %.1f %%", base.cpu), one.cpu <= 3)
		deleteBare()
		for i := 1; i < 3; i++ {
			l.createCluster(quietTB{b}, fmt.Sprintf("e2e-idle%d", i))
		}
		time.Sleep(realIdleSettle)
		var mem, cpu float64
		costs = nodeIdleCosts(b, cli)
		for _, c := range costs {
			mem, cpu = mem+c.mem, cpu+c.cpu
		}
		mem, cpu = mem/float64(len(costs)), cpu/float64(len(costs))
		bench.Figure(b, fmt.Sprintf("idle memory per cluster (%d clusters)", len(costs)), fmt.Sprintf("%.0f MiB", mem), "<= 600 MiB", "-", mem <= 600)
		bench.Figure(b, fmt.Sprintf("idle CPU per cluster (%d clusters)", len(costs)), fmt.Sprintf("%.1f %% of a core", cpu), "<= 3 %", "-", cpu <= 3)

		// Recovery after a node restart, from the node's start (its stop,
		// systemd shutting the node down, is reported apart).
		vip := waitVIP(b, cs, "echo0", "default")
		fqdn := "echo0.default." + main + "." + zone
		nodes := strings.Fields(dockertest.Docker(b, "ps", "-q", "--filter", "label="+kind.ClusterLabel+"="+main))
		stopping := time.Now()
		dockertest.Docker(b, append([]string{"stop", "--time", "30"}, nodes...)...)
		stopped := time.Since(stopping)
		started := time.Now()
		dockertest.Docker(b, append([]string{"start"}, nodes...)...)
		waitHTTP(b, netip.AddrPortFrom(vip, 80), "")
		waitHTTP(b, netip.AddrPortFrom(resolve(b, fqdn)[0], 80), fqdn)
		rec := time.Since(started)
		bench.Figure(b, "recovery after a node restart (from its start to VIP and name answering)", rec.Round(100*time.Millisecond).String(), "<= 60s",
			"stop "+stopped.Round(100*time.Millisecond).String(), rec <= time.Minute)

		for _, name := range l.clusterNames(b) {
			l.run(b, deleteTimeout, "cluster", "delete", name, "--progress", "plain")
		}
	}
}

// settled waits until every pod of the cluster behind kubeconfig is ready.
func settled(b *testing.B, kubeconfig string) {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dockertest.WaitFor(b, podsTimeout, time.Second, "every pod of the bare cluster ready", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
			if !ready {
				return fmt.Errorf("pod %s/%s not ready", p.Namespace, p.Name)
			}
		}
		return nil
	})
}

// serviceToAnswer creates a LoadBalancer Service svc for the echo
// Deployment and returns the time until its name answers this machine.
func serviceToAnswer(b *testing.B, cs kubernetes.Interface, cluster, svc string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	fqdn := svc + ".default." + cluster + "." + zone
	dockertest.WaitFor(b, httpTimeout, 50*time.Millisecond, "a 200 from http://"+fqdn+"/", func() error {
		qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
		defer qcancel()
		addrs, err := dockertest.QueryA(qctx, dnsServer, fqdn)
		if err != nil {
			return err
		}
		if len(addrs) == 0 {
			return fmt.Errorf("no address for %s", fqdn)
		}
		// A short dial: a VIP not yet announced (ARP) or programmed
		// (kube-proxy) would hold a longer one past the moment it works.
		_, err = httpGetWithin(netip.AddrPortFrom(addrs[0], 80), fqdn, 300*time.Millisecond)
		return err
	})
	return time.Since(start)
}

// clusterNames are the lab's clusters.
func (l *lab) clusterNames(t testing.TB) []string {
	var names []string
	for name := range l.clusters(t) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// nodeCost is a cluster's idle memory (MiB, without page cache) and CPU (%
// of one core).
type nodeCost struct{ mem, cpu float64 }

// nodeIdleCosts measures, per kind cluster on the lab's network, its node
// containers' memory and CPU over realIdleWindow.
func nodeIdleCosts(b *testing.B, cli *client.Client) map[string]nodeCost {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var nodes []labContainer
	for _, c := range labContainers(ctx, b, cli) {
		if c.Labels[kind.ClusterLabel] != "" {
			nodes = append(nodes, c)
		}
	}
	if len(nodes) == 0 {
		b.Fatal("no kind node on the lab's network")
	}
	read := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, c := range nodes {
			ns, err := cpuTime(ctx, cli, c.ID)
			if err != nil {
				b.Fatalf("container %s: %v", c.Name, err)
			}
			m[c.ID] = ns
		}
		return m
	}
	before, start := read(), time.Now()
	time.Sleep(realIdleWindow)
	after, elapsed := read(), time.Since(start)
	out := map[string]nodeCost{}
	for _, c := range nodes {
		m, err := memoryUsage(ctx, cli, c.ID)
		if err != nil {
			b.Fatalf("container %s: %v", c.Name, err)
		}
		cl := c.Labels[kind.ClusterLabel]
		cost := out[cl]
		cost.mem += float64(m) / (1 << 20)
		cost.cpu += float64(after[c.ID]-before[c.ID]) / float64(elapsed.Nanoseconds()) * 100
		out[cl] = cost
	}
	return out
}

// memoryUsage is a container's memory without its page cache, as `docker
// stats` shows it (cgroup v1: usage minus total_inactive_file; v2: minus
// inactive_file).
func memoryUsage(ctx context.Context, cli *client.Client, id string) (uint64, error) {
	res, err := cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var st struct {
		MemoryStats struct {
			Usage uint64            `json:"usage"`
			Stats map[string]uint64 `json:"stats"`
		} `json:"memory_stats"`
	}
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("stats of %s: %w", id, err)
	}
	cache := st.MemoryStats.Stats["total_inactive_file"]
	if v, ok := st.MemoryStats.Stats["inactive_file"]; ok && cache == 0 {
		cache = v
	}
	if cache > st.MemoryStats.Usage {
		return 0, nil
	}
	return st.MemoryStats.Usage - cache, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
