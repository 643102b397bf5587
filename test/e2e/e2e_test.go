package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/plugins/coredns/corefile"
	"github.com/bcollard/marina/plugins/externaldns"
	"github.com/bcollard/marina/plugins/metallb"
	"github.com/bcollard/marina/sdk/dockertest"
)

// Bounds of what the tests wait for after marina returned.
const (
	vipTimeout  = 90 * time.Second
	nameTimeout = 90 * time.Second
)

// TestEndToEnd is the end-to-end checks, in order, on one lab (bringing a
// lab up takes a while; each step builds on the previous one), run beside a
// user's lab with marina's defaults, which must be left exactly as it was.
func TestEndToEnd(t *testing.T) {
	besideUserLab(t) // first: its check runs after the test lab is gone
	l := startLab(t)
	const dev, staging = "e2e-dev", "e2e-staging"

	t.Run("1 up then cluster create dev: hooks run for real and the kubeconfig works", func(t *testing.T) {
		l.createCluster(t, dev)
		checkCreated(t, l, dev, l.slots[0])
	})
	if t.Failed() {
		return
	}

	var devVIP netip.Addr
	t.Run("2 a LoadBalancer Service gets a VIP from the slot's pool and its name resolves via the lab's DNS server", func(t *testing.T) {
		devVIP = exposeAndResolve(t, l, dev, l.slots[0], "web", "default")
	})
	if t.Failed() {
		return
	}

	t.Run("3 staging gets the next slot, a disjoint pool and its own names; deleting dev removes only dev's names", func(t *testing.T) {
		l.createCluster(t, staging)
		checkCreated(t, l, staging, l.slots[1])
		stagingVIP := exposeAndResolve(t, l, staging, l.slots[1], "web", "default")
		if stagingVIP == devVIP {
			t.Fatalf("staging's Service got dev's address %s", devVIP)
		}
		p1, p2 := pools(t, l.slots[0]), pools(t, l.slots[1])
		for _, a := range p1 {
			for _, b := range p2 {
				if a.Overlaps(b) {
					t.Fatalf("slot %d's pool %s overlaps slot %d's %s", l.slots[0], a, l.slots[1], b)
				}
			}
		}

		l.run(t, deleteTimeout, "cluster", "delete", dev, "--progress", "plain")
		waitName(t, "web.default."+dev+"."+zone, nil)
		if got := resolve(t, "web.default."+staging+"."+zone); !slices.Equal(got, []netip.Addr{stagingVIP}) {
			t.Fatalf("after deleting dev, staging's name answers %v; want [%s]", got, stagingVIP)
		}
		if keys := etcdKeys(t); strings.Contains(keys, "/"+dev+"/") {
			t.Errorf("dev's records are still in the zone's etcd:\n%s", keys)
		}
		checkGone(t, l, dev, l.slots[0])
		if _, ok := l.clusters(t)[staging]; !ok {
			t.Fatal("deleting dev took staging with it")
		}
	})
	if t.Failed() {
		return
	}

	t.Run("4 SIGINT during cluster create leaves no API server, slot, context or record", func(t *testing.T) {
		const name = "e2e-cancelled"
		ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
		defer cancel()
		var out bytes.Buffer
		cmd := l.command(ctx, "cluster", "create", name, "--progress", "plain")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Interrupt once the API server runs and marina exported its
		// kubeconfig: the cluster is half made, hooks are running.
		kubeconfig := l.kubeconfigPath(name)
		dockertest.WaitFor(t, createTimeout, 100*time.Millisecond, "marina writing "+kubeconfig, func() error {
			if cmd.ProcessState != nil {
				return nil
			}
			_, err := os.Stat(kubeconfig)
			return err
		})
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		t.Logf("marina cluster create %s after SIGINT: %v\n%s", name, err, out.String())
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("exit code %d after SIGINT; want 130", code)
		}
		checkGone(t, l, name, l.slots[0]) // dev's slot was free again
		if keys := etcdKeys(t); strings.Contains(keys, name) {
			t.Errorf("records of %s are in the zone's etcd:\n%s", name, keys)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("5 four cluster create processes at once: distinct slots, every context in ~/.kube/config", func(t *testing.T) {
		testParallelProcesses(t, l)
	})
	if t.Failed() {
		return
	}

	t.Run("6 a create whose PostCluster hook fails leaves no cluster, slot, context or file", func(t *testing.T) {
		// Nobody serves MetalLB's webhook for this cluster (no kubelet
		// stand-in), so MetalLB's PostCluster cannot create the pool and
		// fails at its deadline, as on a cluster whose MetalLB never
		// starts.
		const name = "e2e-broken"
		before := l.clusters(t)
		r := l.exec(createTimeout, "cluster", "create", name, "--progress", "plain", "--set", "plugins.metallb.timeout=20s")
		if r.code != 1 {
			t.Fatalf("want exit 1 for a failed PostCluster; %s", r)
		}
		for _, want := range []string{"Plugins: PostCluster", "metallb"} {
			if !strings.Contains(r.stderr+r.out, want) {
				t.Errorf("the error does not name %q:\n%s", want, r)
			}
		}
		slotOf := 0
		for _, n := range l.slots {
			taken := false
			for _, ci := range before {
				taken = taken || ci.Slot == n
			}
			if !taken {
				slotOf = n
				break
			}
		}
		checkGone(t, l, name, slotOf)
		if keys := etcdKeys(t); strings.Contains(keys, "/"+name+"/") {
			t.Errorf("records of %s are in the zone's etcd:\n%s", name, keys)
		}
	})
}

// parallelCreates are created at once by separate marina processes.
var parallelCreates = []string{"e2e-par1", "e2e-par2", "e2e-par3", "e2e-par4"}

// testParallelProcesses: four `marina cluster create` processes at once get
// four distinct slots that overlap nothing, and ~/.kube/config ends with
// every context, readable by kubectl. MetalLB and ExternalDNS are left out
// of these clusters (--no-plugin): what is under test is the slot allocation
// and the kubeconfig merge across processes, and eight more controller
// containers would only slow a 2-core machine.
func testParallelProcesses(t testing.TB, l *lab) {
	before := l.clusters(t)
	type outcome struct {
		name string
		r    result
	}
	done := make(chan outcome, len(parallelCreates))
	for _, name := range parallelCreates {
		go func() {
			done <- outcome{name, l.exec(createTimeout, "cluster", "create", name, "--progress", "plain", "--no-plugin", "metallb", "--no-plugin", "externaldns")}
		}()
	}
	for range parallelCreates {
		o := <-done
		if o.r.err != nil {
			t.Errorf("%s", o.r)
		}
	}
	if t.Failed() {
		return
	}
	after := l.clusters(t)
	seen := map[int]string{}
	for name, ci := range before {
		seen[ci.Slot] = name
	}
	var all []slot.Resources
	for _, name := range parallelCreates {
		ci, ok := after[name]
		if !ok || !ci.Complete {
			t.Fatalf("marina cluster list: %s is %+v (present: %v); want a complete cluster", name, ci, ok)
		}
		if other, dup := seen[ci.Slot]; dup {
			t.Fatalf("%s and %s share slot %d", name, other, ci.Slot)
		}
		seen[ci.Slot] = name
		r, err := slot.Derive(ci.Slot, bridge)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range all {
			if why, bad := slot.Conflict(r, o); bad {
				t.Fatalf("slots %d and %d conflict: %s", r.Slot, o.Slot, why)
			}
		}
		all = append(all, r)
	}
	contexts := strings.Fields(l.kubectlOut(t, "config", "get-contexts", "-o", "name"))
	for _, name := range parallelCreates {
		if !slices.Contains(contexts, name) {
			t.Errorf("~/.kube/config has contexts %v; %s is missing", contexts, name)
			continue
		}
		if out := l.kubectlOut(t, "--context", name, "get", "nodes", "-o", "name"); !strings.Contains(out, name+"-control-plane") {
			t.Errorf("kubectl --context %s get nodes: %q", name, out)
		}
	}
	l.run(t, deleteTimeout, append([]string{"cluster", "delete", "--progress", "plain"}, parallelCreates...)...)
	for _, name := range parallelCreates {
		checkGone(t, l, name, after[name].Slot)
	}
}

// checkCreated checks what marina made of cluster name in slot n.
func checkCreated(t testing.TB, l *lab, name string, n int) {
	t.Helper()
	ci, ok := l.clusters(t)[name]
	if !ok {
		t.Fatalf("marina cluster list has no %s", name)
	}
	if ci.Slot != n || ci.APIPort != slot.APIPortBase+n || !ci.Complete || ci.Problem != "" || ci.Ready != ci.Nodes || ci.Nodes == 0 {
		t.Fatalf("marina cluster list says %+v; want slot %d, API port %d, complete, all nodes ready", ci, n, slot.APIPortBase+n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := l.clientset(t, name)

	// MetalLB: the slot's pool, exactly.
	dyn := dynamicFor(t, l, name)
	pool, err := dyn.Resource(schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}).
		Namespace(metallb.Namespace).Get(ctx, metallb.PoolName(n), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("MetalLB pool of %s: %v", name, err)
	}
	addrs, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
	var want []string
	for _, r := range pools(t, n) {
		want = append(want, r.String())
	}
	if !slices.Equal(addrs, want) {
		t.Errorf("IPAddressPool %s has addresses %v; want the slot's %v", metallb.PoolName(n), addrs, want)
	}

	// CoreDNS: the Corefile forwards the zone to the lab's DNS server.
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := corefile.Parse([]byte(cm.Data["Corefile"]))
	if err != nil {
		t.Fatalf("the Corefile marina wrote does not parse: %v\n%s", err, cm.Data["Corefile"])
	}
	var forwarded bool
	for _, b := range cf.Blocks {
		if b.ManagedZone != zone {
			continue
		}
		for _, d := range b.Directives {
			if d.Name == "forward" && slices.Contains(d.Args, dnsServer.Addr().String()) {
				forwarded = true
			}
		}
	}
	if !forwarded {
		t.Errorf("the Corefile has no marina block forwarding %s to %s:\n%s", zone, dnsServer.Addr(), cm.Data["Corefile"])
	}
	var kindBlock bool
	for _, b := range cf.Blocks {
		kindBlock = kindBlock || slices.Contains(b.Keys, ".:53")
	}
	if !kindBlock {
		t.Errorf("the Corefile lost kind's own server block .:53:\n%s", cm.Data["Corefile"])
	}

	// ExternalDNS: owned by this cluster, filtered to the zone.
	d, err := cs.AppsV1().Deployments(externaldns.Namespace).Get(ctx, externaldns.AppName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, a := range []string{"--txt-owner-id=" + name, "--domain-filter=" + zone, "--provider=coredns"} {
		if !slices.Contains(args, a) {
			t.Errorf("ExternalDNS's args %v lack %s", args, a)
		}
	}

	// The kubeconfig works with kubectl, alone and merged into ~/.kube/config.
	nodes := l.kubectlOut(t, "--kubeconfig", l.kubeconfigPath(name), "get", "nodes", "-o", "name")
	if !strings.Contains(nodes, "node/"+name+"-control-plane") {
		t.Errorf("kubectl get nodes with %s: %q", l.kubeconfigPath(name), nodes)
	}
	ctxs := l.kubectlOut(t, "config", "get-contexts", "-o", "name")
	if !slices.Contains(strings.Fields(ctxs), name) {
		t.Errorf("~/.kube/config has contexts %q; want %s", ctxs, name)
	}
	ns := l.kubectlOut(t, "--context", name, "get", "namespace", "kube-system", "-o", "name")
	if strings.TrimSpace(ns) != "namespace/kube-system" {
		t.Errorf("kubectl --context %s get namespace kube-system: %q", name, ns)
	}
}

// exposeAndResolve creates a LoadBalancer Service in cluster name (slot n)
// and waits for its VIP (from the slot's pool) and for its name to answer
// the VIP at the lab's DNS server.
func exposeAndResolve(t testing.TB, l *lab, name string, n int, svc, ns string) netip.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := l.clientset(t, name)
	_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": svc},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	vip := waitVIP(t, cs, svc, ns)
	inPool := false
	for _, r := range pools(t, n) {
		inPool = inPool || r.Contains(vip)
	}
	if !inPool {
		t.Fatalf("Service %s/%s of %s got %s, outside slot %d's pool %v", ns, svc, name, vip, n, pools(t, n))
	}
	fqdn := svc + "." + ns + "." + name + "." + zone
	waitName(t, fqdn, []netip.Addr{vip})
	t.Logf("%s -> %s (from the Service's creation: %s)", fqdn, vip, time.Since(created).Round(time.Millisecond))
	return vip
}

// waitVIP waits for the Service's load-balancer address.
func waitVIP(t testing.TB, cs kubernetes.Interface, svc, ns string) netip.Addr {
	t.Helper()
	var vip netip.Addr
	dockertest.WaitFor(t, vipTimeout, 100*time.Millisecond, "a VIP for Service "+ns+"/"+svc+" (MetalLB's controller)", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := cs.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				vip = a
				return nil
			}
		}
		return errors.New("no ingress address yet")
	})
	return vip
}

// waitName waits until fqdn answers want at the lab's DNS server (want nil:
// NXDOMAIN).
func waitName(t testing.TB, fqdn string, want []netip.Addr) {
	t.Helper()
	dockertest.WaitFor(t, nameTimeout, 100*time.Millisecond, fmt.Sprintf("%s to answer %v at %s", fqdn, want, dnsServer), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		got, err := dockertest.QueryA(ctx, dnsServer, fqdn)
		if want == nil {
			if dockertest.IsNXDomain(err) {
				return nil
			}
			return fmt.Errorf("answered %v, %v", got, err)
		}
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("answered %v", got)
		}
		return nil
	})
}

// resolve asks the lab's DNS server for fqdn once.
func resolve(t testing.TB, fqdn string) []netip.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := dockertest.QueryA(ctx, dnsServer, fqdn)
	if err != nil {
		t.Fatalf("%s at %s: %v", fqdn, dnsServer, err)
	}
	return got
}

// pools returns slot n's MetalLB pool on the lab's bridge.
func pools(t testing.TB, n int) []slot.Range {
	t.Helper()
	r, err := slot.Derive(n, bridge)
	if err != nil {
		t.Fatal(err)
	}
	return r.Pools
}

// etcdKeys lists the zone's keys in the lab's DNS etcd.
func etcdKeys(t testing.TB) string {
	t.Helper()
	return dockertest.Docker(t, "exec", etcdContainer, "etcdctl", "get", "--prefix", "/skydns", "--keys-only")
}

// checkGone checks that nothing of cluster name (which had slot n) is left:
// node containers (and so its API server), its slot reservation, its
// kubeconfig file and its entries in ~/.kube/config.
func checkGone(t testing.TB, l *lab, name string, n int) {
	t.Helper()
	if out := dockertest.Docker(t, "ps", "-aq", "--filter", "label="+kind.ClusterLabel+"="+name); out != "" {
		t.Errorf("containers of %s are left: %s", name, out)
	}
	if _, ok := l.clusters(t)[name]; ok {
		t.Errorf("marina cluster list still has %s", name)
	}
	if _, err := os.Stat(l.kubeconfigPath(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left (%v)", l.kubeconfigPath(name), err)
	}
	cfg, err := clientcmd.LoadFromFile(filepath.Join(l.home, ".kube", "config"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Contexts[name]; ok {
		t.Errorf("~/.kube/config still has context %s", name)
	}
	if _, ok := cfg.Clusters[name]; ok {
		t.Errorf("~/.kube/config still has cluster %s", name)
	}
	slots, _ := filepath.Glob(filepath.Join(l.home, ".marina", "state", "slots", "*"))
	for _, s := range slots {
		b, _ := os.ReadFile(s)
		if strings.Contains(filepath.Base(s), name) || bytes.Contains(b, []byte(`"`+name+`"`)) {
			t.Errorf("slot reservation %s of %s is left: %s", s, name, b)
		}
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(slot.APIPortBase+n)), time.Second); err == nil {
		conn.Close()
		t.Errorf("something still listens on %s's API port %d", name, slot.APIPortBase+n)
	}
}

// dynamicFor is a dynamic client for cluster name.
func dynamicFor(t testing.TB, l *lab, name string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfigPath(name))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
