package lab

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/vm/hostvm"
	"github.com/bcollard/marina/sdk/kubetest"
)

// apiProvider is the cluster provider at the one boundary that cannot run
// here (kind nodes need privileged containers): each "cluster" is a real
// kube-apiserver from sdk/kubetest. Everything above it — slots, hooks in
// real plugin processes, kubeconfig export and merge, the completion
// marker, rollback — is marina's real code.
type apiProvider struct {
	t  *testing.T
	mu sync.Mutex
	// slots and servers of the clusters that exist.
	slots   map[string]int
	servers map[string]*kubetest.Cluster
	stops   map[string]func()
	// configs are the kind configs Create received.
	configs map[string]*v1alpha4.Cluster
}

func newAPIProvider(t *testing.T) *apiProvider {
	return &apiProvider{t: t, slots: map[string]int{}, servers: map[string]*kubetest.Cluster{}, stops: map[string]func(){}, configs: map[string]*v1alpha4.Cluster{}}
}

func (p *apiProvider) Create(ctx context.Context, cfg *v1alpha4.Cluster, opts kind.CreateOptions) error {
	p.mu.Lock()
	if _, ok := p.slots[cfg.Name]; ok {
		p.mu.Unlock()
		return fmt.Errorf("cluster %s already exists", cfg.Name)
	}
	p.mu.Unlock()
	// A sub-test owns the server so Delete can stop it before the test ends.
	srv, stop := startServer(p.t)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots[cfg.Name] = int(cfg.Networking.APIServerPort) - 7000
	p.servers[cfg.Name], p.stops[cfg.Name], p.configs[cfg.Name] = srv, stop, cfg
	return nil
}

// startServer starts a kube-apiserver that lives until stop is called (or
// the test ends).
func startServer(t *testing.T) (*kubetest.Cluster, func()) {
	var srv *kubetest.Cluster
	done := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	go t.Run("apiserver", func(t *testing.T) {
		srv = kubetest.Start(t)
		close(done)
		<-release
	})
	<-done
	stop := func() { once.Do(func() { close(release) }) }
	t.Cleanup(stop)
	return srv, stop
}

func (p *apiProvider) Delete(ctx context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stop := p.stops[name]; stop != nil {
		stop()
	}
	delete(p.slots, name)
	delete(p.servers, name)
	delete(p.stops, name)
	return nil
}

func (p *apiProvider) List(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.slots {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func (p *apiProvider) Kubeconfig(ctx context.Context, name string, internal bool) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	srv, ok := p.servers[name]
	if !ok {
		return nil, fmt.Errorf("no cluster %s", name)
	}
	cfg, err := clientcmd.Load(srv.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// kind names everything kind-<name>.
	out := clientcmdapi.NewConfig()
	for _, v := range cfg.Clusters {
		out.Clusters["kind-"+name] = v
	}
	for _, v := range cfg.AuthInfos {
		out.AuthInfos["kind-"+name] = v
	}
	for _, v := range cfg.Contexts {
		v.Cluster, v.AuthInfo = "kind-"+name, "kind-"+name
		out.Contexts["kind-"+name] = v
	}
	out.CurrentContext = "kind-" + name
	return clientcmd.Write(*out)
}

func (p *apiProvider) mustKubeconfig(t *testing.T, name string) []byte {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.servers[name].Kubeconfig
}

func (p *apiProvider) Nodes(ctx context.Context, name string) ([]string, error) { return nil, nil }

// server returns the kube-apiserver standing in for cluster name.
func (p *apiProvider) server(t *testing.T, name string) *kubetest.Cluster {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	srv := p.servers[name]
	if srv == nil {
		t.Fatalf("no cluster %s", name)
	}
	return srv
}

// stopAPI stops cluster name's API server but keeps the cluster (its
// nodes, hence its slot): a cluster whose API does not answer. It returns
// once the server no longer answers (it stops in the background).
func (p *apiProvider) stopAPI(t *testing.T, name string) {
	t.Helper()
	srv := p.server(t, name)
	p.mu.Lock()
	stop := p.stops[name]
	p.mu.Unlock()
	stop()
	cs, err := clientsetFor(srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		cancel()
		if err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server of %s still answers 30s after it was stopped", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addNode registers a node the way a kubelet does: the Node object with
// labels, then its status (Ready, kubelet version).
func (p *apiProvider) addNode(t *testing.T, cluster, node string, labels map[string]string, ready bool) {
	t.Helper()
	cs := p.server(t, cluster).Clientset(t)
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (p *apiProvider) slotsOf(ctx context.Context) (map[string]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.slots {
		out[k] = v
	}
	return out, nil
}

var testPluginBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "marina-lab-test")
	if err != nil {
		panic(err)
	}
	testPluginBin = filepath.Join(dir, "testplugin")
	if out, err := exec.Command("go", "build", "-o", testPluginBin, "../plugin/testdata/testplugin").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test plugin: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// labFor returns a lab on the host driver with one real plugin process
// (the test plugin, configured with cfgJSON) and the clusters' deps.
func labFor(t *testing.T, p *apiProvider, home, cfgJSON string) (*Lab, *Clusters) {
	t.Helper()
	cfg := config.Default()
	var d *plugin.Dispatcher
	if cfgJSON != "" {
		d = plugin.NewDispatcher([]plugin.Plugin{{Spec: plugin.Spec{Name: "probe", Path: testPluginBin, Args: []string{"-name", "probe", "-marker", "lab-test"}}, Config: []byte(cfgJSON)}},
			plugin.Options{Logger: slog.New(slog.DiscardHandler), HostVersion: "test"})
		t.Cleanup(func() { _ = d.Close() })
	}
	target := kubeconfig.NewTarget(filepath.Join(home, ".kube", "config"))
	l := &Lab{Config: cfg, Driver: &hostvm.Host{}, Plugins: d}
	c := &Clusters{Provider: p, Slots: p.slotsOf, StateDir: filepath.Join(home, ".marina", "state"), Home: home, Target: &target, NodeFilesDir: filepath.Join(home, "nodefiles")}
	return l, c
}

func touched(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), "probe ", ""))
}

// TestCreateAndDeleteCluster (tier 3): create runs the hooks in a real
// plugin process, writes the kubeconfig (0600) pointing at the real API
// server, merges it, marks the cluster complete; list reads it back from
// the API; delete runs the cleanup hook and removes file and entries.
func TestCreateAndDeleteCluster(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	touch := filepath.Join(home, "touch")
	p := newAPIProvider(t)
	l, c := labFor(t, p, home, `{"mode":"ok","touch":"`+touch+`"}`)
	ctx := context.Background()

	cl, err := l.CreateCluster(ctx, c, ClusterSpec{Name: "dev", Labels: map[string]string{"team": "a"}}, lifecycle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Slot != 1 || cl.APIPort != 7001 || cl.Labels["team"] != "a" || cl.Labels["topology.kubernetes.io/region"] != "europe-west1" {
		t.Fatalf("cluster = %+v", cl)
	}
	if got := touched(t, touch); strings.Join(got, ",") != "PreCluster,PostCluster" {
		t.Fatalf("hooks run = %v", got)
	}
	kc := filepath.Join(home, ".kube", "marina", "dev.kubeconfig")
	fi, err := os.Stat(kc)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v %v", fi, err)
	}
	if kcfg := p.configs["dev"]; kcfg.Networking.APIServerPort != 7001 || kcfg.Networking.ServiceSubnet != "10.1.0.0/16" || kcfg.Networking.PodSubnet != "10.11.0.0/16" {
		t.Fatalf("kind config networking = %+v", kcfg.Networking)
	}
	merged, err := clientcmd.LoadFromFile(filepath.Join(home, ".kube", "config"))
	if err != nil || merged.Contexts["dev"] == nil {
		t.Fatalf("merged kubeconfig: %v %v", merged, err)
	}

	list, err := l.ListClusters(ctx, c)
	if err != nil || len(list) != 1 || !list[0].Complete || list[0].Slot != 1 || list[0].Problem != "" {
		t.Fatalf("list = %+v, %v", list, err)
	}

	// Node labels: set and remove on every node (a Node object stands in
	// for the kubelet's registration).
	cs, err := clientsetFor(p.mustKubeconfig(t, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dev-control-plane", Labels: map[string]string{"old": "x"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := l.LabelNodes(ctx, c, "dev", map[string]string{"tier": "gold", "old": "-"}); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "dev-control-plane", metav1.GetOptions{})
	if err != nil || n.Labels["tier"] != "gold" || n.Labels["old"] != "" {
		t.Fatalf("node labels = %v, %v", n.Labels, err)
	}

	if _, err := l.CreateCluster(ctx, c, ClusterSpec{Name: "dev"}, lifecycle.Options{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second create of dev: %v", err)
	}

	if err := l.DeleteCluster(ctx, c, "dev", lifecycle.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := touched(t, touch); strings.Join(got, ",") != "PreCluster,PostCluster,PreClusterDelete" {
		t.Fatalf("hooks after delete = %v", got)
	}
	if _, err := os.Stat(kc); !os.IsNotExist(err) {
		t.Fatalf("kubeconfig file after delete: %v", err)
	}
	merged, err = clientcmd.LoadFromFile(filepath.Join(home, ".kube", "config"))
	if err != nil || merged.Contexts["dev"] != nil || merged.Clusters["dev"] != nil || merged.AuthInfos["dev"] != nil {
		t.Fatalf("merged kubeconfig after delete: %+v %v", merged, err)
	}
	if names, _ := p.List(ctx); len(names) != 0 {
		t.Fatalf("clusters after delete: %v", names)
	}
}

// TestDeleteWithFailingCleanup (tier 3): a failing PreClusterDelete hook
// stops the delete before anything is removed; with ForceDelete (`cluster
// delete --force`) the cluster is deleted anyway and the hook's error is a
// warning in the step's progress.
func TestDeleteWithFailingCleanup(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	touch := filepath.Join(home, "touch")
	p := newAPIProvider(t)
	l, c := labFor(t, p, home, `{"mode":"ok","failOn":"PreClusterDelete","touch":"`+touch+`"}`)
	ctx := context.Background()
	if _, err := l.CreateCluster(ctx, c, ClusterSpec{Name: "keep"}, lifecycle.Options{}); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(home, ".kube", "marina", "keep.kubeconfig")

	err := l.DeleteCluster(ctx, c, "keep", lifecycle.Options{})
	if err == nil || !strings.Contains(err.Error(), "failing PreClusterDelete on purpose") {
		t.Fatalf("delete with a failing cleanup hook: %v", err)
	}
	if names, _ := p.List(ctx); len(names) != 1 {
		t.Fatalf("clusters after the refused delete: %v (nothing may be removed)", names)
	}
	if _, err := os.Stat(kc); err != nil {
		t.Fatalf("kubeconfig after the refused delete: %v", err)
	}

	c.ForceDelete = true
	rec := &progressRecorder{}
	if err := l.DeleteCluster(ctx, c, "keep", lifecycle.Options{Renderer: rec}); err != nil {
		t.Fatalf("delete --force: %v", err)
	}
	if names, _ := p.List(ctx); len(names) != 0 {
		t.Fatalf("clusters after delete --force: %v", names)
	}
	if _, err := os.Stat(kc); !os.IsNotExist(err) {
		t.Fatalf("kubeconfig after delete --force: %v", err)
	}
	if !rec.contains("warning: ") || !rec.contains("failing PreClusterDelete on purpose") || !rec.contains("anyway (--force)") {
		t.Errorf("the hook's error is not reported as a warning: %q", rec.lines())
	}
}

// TestCreateFailingAtPostClusterLeavesNothing (tier 3): a PostCluster hook
// fails; without --retain the cluster, its kubeconfig file and entries and
// its slot reservation are gone, and the cleanup hook ran.
func TestCreateFailingAtPostClusterLeavesNothing(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	touch := filepath.Join(home, "touch")
	p := newAPIProvider(t)
	l, c := labFor(t, p, home, `{"mode":"ok","failOn":"PostCluster","touch":"`+touch+`"}`)
	ctx := context.Background()

	_, err := l.CreateCluster(ctx, c, ClusterSpec{Name: "bad"}, lifecycle.Options{})
	if err == nil || !strings.Contains(err.Error(), "failing PostCluster on purpose") || !strings.Contains(err.Error(), "Plugins: PostCluster") {
		t.Fatalf("create with a failing PostCluster: %v", err)
	}
	if got := touched(t, touch); strings.Join(got, ",") != "PreCluster,PostCluster,PreClusterDelete" {
		t.Fatalf("hooks run = %v (the cleanup hook must run after a failed PostCluster)", got)
	}
	if names, _ := p.List(ctx); len(names) != 0 {
		t.Fatalf("clusters left: %v", names)
	}
	if _, err := os.Stat(filepath.Join(home, ".kube", "marina", "bad.kubeconfig")); !os.IsNotExist(err) {
		t.Fatalf("kubeconfig file left: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".kube", "config")); err == nil && strings.Contains(string(b), "bad") {
		t.Fatalf("kubeconfig entries left:\n%s", b)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, ".marina", "state", "slots")); len(entries) > 1 { // the lock file stays
		t.Fatalf("slot reservations left: %v", entries)
	}
	// The slot is free again.
	l2, c2 := labFor(t, p, home, "")
	cl, err := l2.CreateCluster(ctx, c2, ClusterSpec{Name: "good"}, lifecycle.Options{})
	if err != nil || cl.Slot != 1 {
		t.Fatalf("create after the failed one: %+v, %v", cl, err)
	}
}

// TestParallelCreates (tier 3): four creates at once, each with its own Lab
// (as four processes would have), share the state directory and the user's
// kubeconfig: four distinct slots, and a kubeconfig with four contexts.
func TestParallelCreates(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	p := newAPIProvider(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	slots := make([]int, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			l, c := labFor(t, p, home, "")
			cl, err := l.CreateCluster(ctx, c, ClusterSpec{Name: fmt.Sprintf("c%d", i)}, lifecycle.Options{})
			errs[i] = err
			if cl != nil {
				slots[i] = cl.Slot
			}
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create c%d: %v", i, err)
		}
		if seen[slots[i]] {
			t.Fatalf("two clusters got slot %d: %v", slots[i], slots)
		}
		seen[slots[i]] = true
	}
	merged, err := clientcmd.LoadFromFile(filepath.Join(home, ".kube", "config"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		name := fmt.Sprintf("c%d", i)
		if merged.Contexts[name] == nil {
			t.Fatalf("context %s missing from the merged kubeconfig", name)
		}
		// Each context reaches its own API server.
		cs, err := clientsetFor(mustWrite(t, merged, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, MarkerConfigMap, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: marker: %v", name, err)
		}
	}
}

// mustWrite returns a kubeconfig of cfg with context name current.
func mustWrite(t *testing.T, cfg *clientcmdapi.Config, name string) []byte {
	t.Helper()
	cp := cfg.DeepCopy()
	cp.CurrentContext = name
	b, err := clientcmd.Write(*cp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createClusters creates the named clusters (no plugins) and fails the test
// on error.
func createClusters(t *testing.T, l *Lab, c *Clusters, specs ...ClusterSpec) {
	t.Helper()
	for _, spec := range specs {
		if _, err := l.CreateCluster(context.Background(), c, spec, lifecycle.Options{}); err != nil {
			t.Fatalf("create %s: %v", spec.Name, err)
		}
	}
}

// TestListClustersLabelsAgeAndSelector (tier 3): list reads each cluster's
// control-plane labels, readiness, version, fleet and age from its real API
// server; the age comes from the completion marker, or from the
// control-plane node when there is no marker; label selectors pick
// clusters; a cluster whose API does not answer is reported, never matched
// by a selector, and does not slow the list down.
func TestListClustersLabelsAgeAndSelector(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	p := newAPIProvider(t)
	l, c := labFor(t, p, home, "")
	ctx := context.Background()
	createClusters(t, l, c,
		ClusterSpec{Name: "dev", Labels: map[string]string{"team": "a"}, Fleet: "f1"},
		ClusterSpec{Name: "qa", Labels: map[string]string{"team": "b"}},
		ClusterSpec{Name: "old"})

	// The kubelets' registration: the control-plane node carries the
	// cluster's labels; a worker (listed first by name) carries others.
	cp := func(extra map[string]string) map[string]string {
		m := map[string]string{labelControlPlane: "", "kubernetes.io/os": "linux"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	p.addNode(t, "dev", "dev-control-plane", cp(map[string]string{"team": "a", LabelFleet: "f1"}), true)
	p.addNode(t, "dev", "aaa-worker", map[string]string{"team": "z", "tier": "worker"}, false)
	p.addNode(t, "qa", "qa-control-plane", cp(map[string]string{"team": "b"}), true)
	p.addNode(t, "old", "old-control-plane", cp(nil), false)

	// qa was completed three hours ago; old has no marker (a half-made
	// cluster): its age is its control-plane node's.
	qa := p.server(t, "qa").Clientset(t)
	cm, err := qa.CoreV1().ConfigMaps("kube-system").Get(ctx, MarkerConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	threeHoursAgo := time.Now().Add(-3*time.Hour - time.Minute).UTC().Format(time.RFC3339)
	cm.Data["createdAt"] = threeHoursAgo
	if _, err := qa.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.server(t, "old").Clientset(t).CoreV1().ConfigMaps("kube-system").Delete(ctx, MarkerConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	list, err := l.ListClusters(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ClusterInfo{}
	for _, ci := range list {
		if ci.Problem != "" {
			t.Fatalf("%s: problem %q", ci.Name, ci.Problem)
		}
		byName[ci.Name] = ci
	}
	if names := clusterNames(list); names != "dev,old,qa" {
		t.Fatalf("list = %s, want dev,old,qa (sorted)", names)
	}
	dev, qaInfo, old := byName["dev"], byName["qa"], byName["old"]
	if dev.Slot != 1 || dev.APIPort != 7001 || dev.Nodes != 2 || dev.Ready != 1 || dev.Version != "v1.37.2" || dev.Fleet != "f1" || !dev.Complete {
		t.Errorf("dev = %+v", dev)
	}
	if dev.Labels["team"] != "a" || dev.Labels["tier"] != "" || dev.Labels[LabelFleet] != "f1" {
		t.Errorf("dev labels = %v, want the control-plane node's", dev.Labels)
	}
	if created, err := time.Parse(time.RFC3339, dev.CreatedAt); err != nil || time.Since(created) > 10*time.Minute || (!strings.HasSuffix(dev.Age, "s") && !strings.HasSuffix(dev.Age, "m")) {
		t.Errorf("dev createdAt %q age %q: want just now", dev.CreatedAt, dev.Age)
	}
	if qaInfo.CreatedAt != threeHoursAgo || qaInfo.Age != "3h1m" {
		t.Errorf("qa createdAt %q age %q, want %s and 3h1m", qaInfo.CreatedAt, qaInfo.Age, threeHoursAgo)
	}
	if old.Complete || old.CreatedAt == "" || old.Age == "" {
		t.Errorf("old (no marker) = %+v: want incomplete, aged by its node", old)
	}

	for _, tc := range []struct{ selector, want string }{
		{"", "dev,old,qa"},
		{"team=a", "dev"},
		{"team", "dev,qa"},
		{"team in (a,b)", "dev,qa"},
		{"team notin (a)", "old,qa"},
		{"!team", "old"},
		{LabelFleet + "=f1", "dev"},
		{"tier=worker", ""},
	} {
		sel, err := k8slabels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		got, unread := SelectClusters(list, sel)
		if names := clusterNames(got); names != tc.want || len(unread) != 0 {
			t.Errorf("-l %q: %s (unread %v), want %s", tc.selector, names, unread, tc.want)
		}
	}

	// qa's API stops answering: it is still listed (from its nodes), with
	// the problem, and no selector but the empty one picks it.
	p.stopAPI(t, "qa")
	start := time.Now()
	list, err = l.ListClusters(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > clusterReadTimeout+2*time.Second {
		t.Errorf("list with one API down took %v", d)
	}
	if names := clusterNames(list); names != "dev,old,qa" || list[2].Problem == "" || list[2].Labels != nil {
		t.Fatalf("list with qa down = %+v", list)
	}
	sel, _ := k8slabels.Parse("team")
	got, unread := SelectClusters(list, sel)
	if clusterNames(got) != "dev" || strings.Join(unread, ",") != "qa" {
		t.Errorf("-l team with qa down: %s, unread %v", clusterNames(got), unread)
	}
	if got, unread := SelectClusters(list, k8slabels.Everything()); clusterNames(got) != "dev,old,qa" || len(unread) != 0 {
		t.Errorf("empty selector with qa down: %s, unread %v", clusterNames(got), unread)
	}
}

func clusterNames(list []ClusterInfo) string {
	var names []string
	for _, ci := range list {
		names = append(names, ci.Name)
	}
	return strings.Join(names, ",")
}

// TestClusterServer: the address a cluster's API server is reached at is
// the lab's address (127.0.0.1 on the host driver, the VM's with lima) and
// the slot's port.
func TestClusterServer(t *testing.T) {
	slots := func(context.Context) (map[string]int, error) { return map[string]int{"dev": 3, "qa": 42}, nil }
	for _, tc := range []struct {
		addr, name, want, err string
	}{
		{"", "dev", "https://127.0.0.1:7003", ""},
		{"", "qa", "https://127.0.0.1:7042", ""},
		{"192.168.105.3", "dev", "https://192.168.105.3:7003", ""},
		{"fd00::5", "qa", "https://[fd00::5]:7042", ""},
		{"192.168.105.3", "gone", "", "no cluster named gone (see marina cluster list)"},
	} {
		l := &Lab{}
		got, err := l.ClusterServer(context.Background(), &Clusters{Slots: slots, APIServerAddress: tc.addr}, tc.name)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ClusterServer(%q at %q) = %q, %v; want %q, %q", tc.name, tc.addr, got, err, tc.want, tc.err)
		}
	}
	failing := func(context.Context) (map[string]int, error) { return nil, fmt.Errorf("docker is down") }
	if _, err := (&Lab{}).ClusterServer(context.Background(), &Clusters{Slots: failing}, "dev"); err == nil || !strings.Contains(err.Error(), "docker is down") {
		t.Errorf("ClusterServer with Docker down: %v", err)
	}
}

// TestRefreshKubeconfig (tier 3): refresh points a kubeconfig at the
// cluster's current address; a missing or unreadable kubeconfig is
// exported again from the cluster (and works); refreshing all clusters
// rewrites every kubeconfig and the user's entries, and skips (saying why)
// leftover files and clusters without one.
func TestRefreshKubeconfig(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	p := newAPIProvider(t)
	l, c := labFor(t, p, home, "")
	ctx := context.Background()
	createClusters(t, l, c, ClusterSpec{Name: "dev"}, ClusterSpec{Name: "qa"})
	devPath, qaPath := filepath.Join(home, ".kube", "marina", "dev.kubeconfig"), filepath.Join(home, ".kube", "marina", "qa.kubeconfig")
	userPath := filepath.Join(home, ".kube", "config")
	orig, err := clientcmd.LoadFromFile(devPath)
	if err != nil {
		t.Fatal(err)
	}
	realServer := p.server(t, "dev").Host

	// Missing, then unreadable: exported again, at the address given; the
	// result reaches the real API server with the cluster's credentials.
	for _, damage := range []func() error{
		func() error { return os.Remove(devPath) },
		func() error { return os.WriteFile(devPath, []byte("not: [a kubeconfig"), 0o600) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		res, err := l.RefreshKubeconfig(ctx, c, "dev", realServer)
		if err != nil || !res.Exported || res.Server != realServer || res.Kubeconfig != devPath {
			t.Fatalf("refresh of a damaged kubeconfig: %+v, %v", res, err)
		}
		fi, err := os.Stat(devPath)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("re-exported file: %v, %v", fi, err)
		}
		got, err := clientcmd.LoadFromFile(devPath)
		if err != nil || got.CurrentContext != "dev" || got.Contexts["dev"] == nil || got.AuthInfos["dev"].Token != orig.AuthInfos["dev"].Token {
			t.Fatalf("re-exported kubeconfig: %+v, %v", got, err)
		}
		b, _ := os.ReadFile(devPath)
		cs, err := clientsetFor(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, MarkerConfigMap, metav1.GetOptions{}); err != nil {
			t.Fatalf("the re-exported kubeconfig does not reach the cluster: %v", err)
		}
	}

	// Without a server: the cluster's address on this machine (host driver).
	res, err := l.RefreshKubeconfig(ctx, c, "dev", "")
	if err != nil || res.Exported || res.Server != "https://127.0.0.1:7001" {
		t.Fatalf("refresh dev: %+v, %v", res, err)
	}
	if got := serverOf(t, devPath, "dev"); got != "https://127.0.0.1:7001" {
		t.Errorf("dev's server = %q", got)
	}
	if got := serverOf(t, userPath, "dev"); got != "https://127.0.0.1:7001" {
		t.Errorf("dev's server in the user's kubeconfig = %q", got)
	}
	if _, err := l.RefreshKubeconfig(ctx, c, "nope", ""); err == nil || !strings.Contains(err.Error(), "no cluster named nope") {
		t.Errorf("refresh of an unknown cluster: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".kube", "marina", "nope.kubeconfig")); !os.IsNotExist(err) {
		t.Errorf("refresh of an unknown cluster wrote a file: %v", err)
	}

	// Everything, after the VM's address changed (lima): both files and
	// both entries follow; the leftover file of a deleted cluster is not
	// touched.
	leftover := filepath.Join(home, ".kube", "marina", "gone.kubeconfig")
	if err := os.WriteFile(leftover, []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.APIServerAddress = "192.168.105.7"
	all, err := l.RefreshKubeconfigs(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := refreshSummary(all); got != "dev=https://192.168.105.7:7001 gone=skipped qa=https://192.168.105.7:7002" {
		t.Fatalf("refresh all = %s", got)
	}
	if !strings.Contains(all[1].Skipped, "deleted cluster") {
		t.Errorf("leftover skipped because %q", all[1].Skipped)
	}
	for name, path := range map[string]string{"dev": devPath, "qa": qaPath} {
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if cl := cfg.Clusters[name]; cl.Server != "https://192.168.105.7:700"+map[string]string{"dev": "1", "qa": "2"}[name] || cl.TLSServerName != "kubernetes" {
			t.Errorf("%s after refresh all: server %q, tls-server-name %q", name, cl.Server, cl.TLSServerName)
		}
		if got := serverOf(t, userPath, name); got != cfg.Clusters[name].Server {
			t.Errorf("%s in the user's kubeconfig: %q", name, got)
		}
	}
	if b, _ := os.ReadFile(leftover); string(b) != "left" {
		t.Errorf("the leftover file was changed: %q", b)
	}

	// A live cluster whose kubeconfig is gone is skipped with the command
	// that exports it again.
	if err := os.Remove(qaPath); err != nil {
		t.Fatal(err)
	}
	all, err = l.RefreshKubeconfigs(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := refreshSummary(all); got != "dev=https://192.168.105.7:7001 gone=skipped qa=skipped" || !strings.Contains(all[2].Skipped, "marina kubeconfig refresh qa") {
		t.Fatalf("refresh all without qa's file = %s (%q)", got, all[2].Skipped)
	}
	if _, err := os.Stat(qaPath); !os.IsNotExist(err) {
		t.Errorf("refresh all re-exported qa: %v", err)
	}
}

// serverOf returns the server of cluster name in the kubeconfig at path.
func serverOf(t *testing.T, path, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clusters[name] == nil {
		t.Fatalf("%s has no cluster %s", path, name)
	}
	return cfg.Clusters[name].Server
}

// refreshSummary is "name=server" or "name=skipped" for each result.
func refreshSummary(list []KubeconfigRefresh) string {
	var out []string
	for _, r := range list {
		v := r.Server
		if r.Skipped != "" {
			v = "skipped"
		}
		out = append(out, r.Name+"="+v)
	}
	return strings.Join(out, " ")
}

// progressRecorder is a lifecycle.Renderer that keeps progress messages.
type progressRecorder struct {
	mu  sync.Mutex
	msg []string
}

func (r *progressRecorder) Handle(e lifecycle.Event) {
	if e.Message == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msg = append(r.msg, e.Message)
}

func (r *progressRecorder) Close() {}

func (r *progressRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msg...)
}

func (r *progressRecorder) contains(s string) bool {
	for _, m := range r.lines() {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// TestCreateClusterBusyAPIPort (tier 3): a slot whose API port another
// container holds on the Docker host (a cluster of another lab) is
// skipped; pinning it is refused, naming the holder, before kind runs.
func TestCreateClusterBusyAPIPort(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	p := newAPIProvider(t)
	l, c := labFor(t, p, home, "")
	const holder = "container demo-control-plane (kind cluster demo on network kind)"
	c.BusyPorts = func(context.Context) (map[int]string, error) { return map[int]string{7001: holder}, nil }
	ctx := context.Background()
	_, err := l.CreateCluster(ctx, c, ClusterSpec{Name: "pinned", Slot: 1}, lifecycle.Options{})
	if err == nil || !strings.Contains(err.Error(), "its API port 7001 is taken on the Docker host by "+holder) {
		t.Fatalf("pinned on a busy API port: %v", err)
	}
	if len(p.configs) != 0 {
		t.Fatalf("kind ran for a refused slot: %v", p.configs)
	}
	cl, err := l.CreateCluster(ctx, c, ClusterSpec{Name: "auto"}, lifecycle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Slot != 2 || p.configs["auto"].Networking.APIServerPort != 7002 {
		t.Fatalf("cluster %+v, kind's API port %d; want slot 2 on 7002, past the busy 7001", cl, p.configs["auto"].Networking.APIServerPort)
	}
}

// TestWaitKubeProxy (tier 3): no kube-proxy DaemonSet is nothing to wait
// for; one with a pod not ready times out saying how many are; one ready
// on every node ends the wait.
func TestWaitKubeProxy(t *testing.T) {
	kubetest.RequireAssets(t)
	c := kubetest.Start(t)
	ctx := context.Background()
	if err := waitKubeProxy(ctx, c.Kubeconfig, time.Second); err != nil {
		t.Fatalf("without a kube-proxy DaemonSet: %v", err)
	}
	cs := c.Clientset(t)
	labels := map[string]string{"k8s-app": "kube-proxy"}
	ds, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.37.2"}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 1, NumberReady: 0}
	if ds, err = cs.AppsV1().DaemonSets("kube-system").UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = waitKubeProxy(ctx, c.Kubeconfig, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "0 of 1 pods ready") || !strings.Contains(err.Error(), "Services cannot work") {
		t.Fatalf("with kube-proxy not ready: %v", err)
	}
	ds.Status.NumberReady = 1
	if _, err = cs.AppsV1().DaemonSets("kube-system").UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitKubeProxy(ctx, c.Kubeconfig, 10*time.Second); err != nil {
		t.Fatalf("with kube-proxy ready: %v", err)
	}
}
