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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/test/kubetest"
)

// apiProvider is the cluster provider at the one boundary that cannot run
// here (kind nodes need privileged containers): each "cluster" is a real
// kube-apiserver from test/kubetest. Everything above it — slots, hooks in
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
	l := &Lab{Config: cfg, Driver: &vm.Host{}, Plugins: d}
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
