package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/lock"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// MarkerConfigMap is the ConfigMap (in kube-system) marina writes into a
// cluster once it is completely created: a cluster without it was left
// half-made by a failed run and is not counted as existing.
const MarkerConfigMap = "marina-cluster"

// slotLockWait bounds the wait for another marina process that is picking
// a slot (it holds the lock for milliseconds).
const slotLockWait = 2 * time.Minute

// ClusterSpec is what `marina cluster create` asks for.
type ClusterSpec struct {
	Name string
	// Slot pins the slot; 0 takes the lowest free one.
	Slot         int
	Region, Zone string
	// Labels are extra node labels.
	Labels map[string]string
	// NodeImage overrides the node image ("" = the config's).
	NodeImage string
	Workers   int
	// Mirrors selects registry mirrors by name (nil = all).
	Mirrors []string
	// Retain keeps a failed cluster for debugging.
	Retain bool
	// Wait bounds kind's wait for the control plane (0 = 5 minutes).
	Wait time.Duration
	// Fleet is the fleet the cluster belongs to (label marina.dev/fleet).
	Fleet string
	// Exclude names plugins whose hooks do not run for this cluster.
	Exclude []string
}

// Clusters is what cluster operations need beyond the Lab.
type Clusters struct {
	Provider kind.Provider
	// Slots returns the slot of every cluster that has nodes (by name).
	Slots func(ctx context.Context) (map[string]int, error)
	// BusyPorts returns the API host ports (7001..7099) that something
	// other than the lab's clusters holds on the Docker host, with the
	// holder (e.g. a cluster of another lab on the same engine); nil
	// means none. Allocation skips their slots.
	BusyPorts func(ctx context.Context) (map[int]string, error)
	// StateDir holds slot reservations (~/.marina/state).
	StateDir string
	// Home is the user's home (kubeconfig files under ~/.kube/marina).
	Home string
	// Target is the user's kubeconfig (merge and remove); nil skips both.
	Target *kubeconfig.Target
	// NodeFilesDir is where plugins' node files go on the Docker host.
	NodeFilesDir string
	// APIServerAddress is the address kubeconfigs use (the VM's IP with
	// lima; "" = 127.0.0.1 on the Docker host).
	APIServerAddress string
	// ForceDelete: a failing PreClusterDelete hook does not stop a delete
	// (`cluster delete --force`); its error is reported as a warning and
	// the cluster is deleted anyway. Without it the delete stops before
	// anything is removed, so the hook can be fixed and the delete rerun.
	ForceDelete bool
}

// NodeFilesDir is where plugins' node files live on the Docker host (kept
// across reboots; not /tmp).
const NodeFilesDir = "/var/lib/marina/nodefiles"

// OpenClusters returns what cluster operations need, for the lab's machine,
// which must run: its status is read and recorded (Machine), so the
// cluster hooks get its DockerHost and driver.
func (l *Lab) OpenClusters(ctx context.Context) (*Clusters, error) {
	st, err := l.Machine(ctx)
	if err != nil {
		return nil, err
	}
	return l.ClustersOn(st)
}

// ClustersOn is OpenClusters for st, the machine's status the caller has
// just read through the lab (Machine, Status), which must be running.
func (l *Lab) ClustersOn(st vm.Status) (*Clusters, error) {
	if st.State != vm.Running {
		return nil, fmt.Errorf("the lab's machine is %s: run marina up first", st.State)
	}
	network := l.Config.Network.Name
	withDocker := func(ctx context.Context, f func(*docker.Client) error) error {
		dc, err := docker.Open(ctx, st.DockerHost)
		if err != nil {
			return err
		}
		defer dc.Close()
		return f(dc)
	}
	c := &Clusters{
		Provider: &kind.KindProvider{Executable: l.KindHelper, DockerHost: st.DockerHost, Network: network, ProxyEnv: l.Config.EffectiveProxy(l.getenv).Env()},
		Slots: func(ctx context.Context) (slots map[string]int, err error) {
			err = withDocker(ctx, func(dc *docker.Client) error { slots, err = dc.ClusterSlots(ctx, network); return err })
			return slots, err
		},
		BusyPorts: func(ctx context.Context) (busy map[int]string, err error) {
			err = withDocker(ctx, func(dc *docker.Client) error { busy, err = dc.APIPortHolders(ctx, network); return err })
			return busy, err
		},
		StateDir:     l.StateDir,
		Home:         l.Home,
		Target:       l.Target,
		NodeFilesDir: NodeFilesDir,
	}
	if l.Driver.Name() == "lima" {
		c.APIServerAddress = st.GuestIP
	}
	return c, nil
}

// clusterRun carries one create's state from step to step.
type clusterRun struct {
	spec      ClusterSpec
	res       slot.Resources
	cluster   *sdk.Cluster
	contribs  []kind.NamedContribution
	kubecfg   []byte
	kubePath  string
	created   bool // kind made nodes
	hooksRan  bool // PostCluster started
	releaseFn func()
}

// CreateCluster creates a cluster: slot, PreCluster hooks, kind config,
// node files, kind, kubeconfig, node labels, PostCluster hooks, the
// completion marker, and the merge into the user's kubeconfig. Unless
// spec.Retain, a failure undoes everything that was made (hooks' cleanup,
// nodes, files, kubeconfig entries, the slot) and the error names the
// failed step.
func (l *Lab) CreateCluster(ctx context.Context, c *Clusters, spec ClusterSpec, opts lifecycle.Options) (*sdk.Cluster, error) {
	if err := kind.ValidateName(spec.Name); err != nil {
		return nil, err
	}
	run := &clusterRun{spec: spec, kubePath: slot.KubeconfigPath(c.Home, spec.Name)}
	steps := []lifecycle.Step{
		lifecycle.NewStep("Allocate slot", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return l.allocate(ctx, c, run, r)
		}),
		lifecycle.NewStep("Plugins: PreCluster", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			results, err := l.RunHookExcept(ctx, sdk.PreCluster, run.cluster, run.spec.Exclude, r)
			for _, n := range sortedKeys(results) {
				if k := results[n].Kind; k != nil {
					run.contribs = append(run.contribs, kind.NamedContribution{Plugin: n, KindContribution: k})
				}
			}
			return err
		}),
		lifecycle.NewStep("Create cluster "+spec.Name+" (kind)", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return l.createNodes(ctx, c, run, r)
		}),
		lifecycle.NewStep("Kubeconfig", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return l.exportKubeconfig(ctx, c, run)
		}),
		lifecycle.NewStep("Services reachable (kube-proxy)", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return waitKubeProxy(ctx, run.kubecfg, run.spec.Wait)
		}),
		lifecycle.NewStep("Plugins: PostCluster", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			run.hooksRan = true
			_, err := l.RunHookExcept(ctx, sdk.PostCluster, run.cluster, run.spec.Exclude, r)
			return err
		}),
		lifecycle.NewStep("Mark complete", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return markComplete(ctx, run)
		}),
	}
	if c.Target != nil && l.Config.Kind.AutoMergeKubeconfig {
		steps = append(steps, lifecycle.NewStep("Merge kubeconfig into "+c.Target.DefaultFile(), nil,
			func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
				cfg, err := clientcmd.Load(run.kubecfg)
				if err != nil {
					return err
				}
				_, err = kubeconfig.Merge(ctx, *c.Target, cfg, spec.Name, kubeconfig.MergeOptions{})
				return err
			}))
	}
	defer func() {
		if run.releaseFn != nil {
			run.releaseFn()
		}
	}()
	_, err := lifecycle.Run(ctx, "cluster create", steps, opts)
	if err == nil || opts.DryRun {
		return run.cluster, err
	}
	if spec.Retain {
		return run.cluster, fmt.Errorf("%w\nThe cluster was kept for debugging (--retain); remove it with: marina cluster delete %s", err, spec.Name)
	}
	if rerr := l.rollback(c, run); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("undoing the failed create: %w", rerr))
	}
	return nil, fmt.Errorf("%w\nEverything made for %s was removed (keep it next time with --retain)", err, spec.Name)
}

// allocate picks the slot under the process lock and reserves it until the
// cluster's nodes exist (they then hold the slot through their API port).
func (l *Lab) allocate(ctx context.Context, c *Clusters, run *clusterRun, r lifecycle.Reporter) error {
	bridge, err := netip.ParsePrefix(l.Config.Network.BridgeCIDR)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.StateDir, "slots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The file lock orders marina processes; allocMu orders the creates of
	// one process (a fleet creates clusters in parallel).
	allocMu.Lock()
	defer allocMu.Unlock()
	// Other marina processes hold this lock only while they pick a slot:
	// wait for it (bounded), never fail a parallel create for it.
	lctx, cancel := context.WithTimeout(ctx, slotLockWait)
	defer cancel()
	lk, err := lock.Acquire(lctx, filepath.Join(dir, ".lock"), lock.Options{Wait: true, OnWait: func(h lock.Holder) {
		r.Progress(fmt.Sprintf("waiting for marina process %d, which is picking a slot", h.PID))
	}})
	if err != nil {
		if ctx.Err() == nil && lctx.Err() != nil {
			return fmt.Errorf("the slot lock %s was not free within %s: %w (is another marina process stuck? see its PID above)", filepath.Join(dir, ".lock"), slotLockWait, err)
		}
		return err
	}
	defer lk.Release()

	live, err := c.Slots(ctx)
	if err != nil {
		return err
	}
	if n, ok := live[run.spec.Name]; ok {
		return fmt.Errorf("cluster %s already exists (slot %d); delete it first: marina cluster delete %s", run.spec.Name, n, run.spec.Name)
	}
	taken := map[int]string{}
	for name, n := range live {
		taken[n] = name
	}
	reservations, err := readReservations(dir)
	if err != nil {
		return err
	}
	for name, res := range reservations {
		if name == run.spec.Name {
			return fmt.Errorf("cluster %s is being created by another marina process (pid %d)", name, res.PID)
		}
		taken[res.Slot] = name
	}
	var nums []int
	for n := range taken {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	var busy map[int]string
	if c.BusyPorts != nil {
		if busy, err = c.BusyPorts(ctx); err != nil {
			return err
		}
	}
	n, err := slot.Allocate(bridge, nums, busy, run.spec.Slot)
	if err != nil {
		return err
	}
	res, err := slot.Derive(n, bridge)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(reservation{Slot: n, PID: os.Getpid(), Since: time.Now().UTC()})
	path := filepath.Join(dir, run.spec.Name+".json")
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	run.releaseFn = func() { _ = os.Remove(path) }
	run.res = res
	run.cluster = l.sdkCluster(c, run.spec, res, run.kubePath)
	r.Progress(fmt.Sprintf("slot %d: API port %d, services %s, pods %s", n, res.APIPort, res.ServiceSubnet, res.PodSubnet))
	for _, w := range l.slotRouteWarnings(ctx, run.spec.Name, n) {
		r.Progress("warning: " + w)
		l.addWarning(w)
	}
	return nil
}

// slotRouteWarnings says which routes of this machine (a VPN's) overlap the
// service or pod subnet of cluster name on slot n: pods would not reach
// those outside addresses. Nothing when the routes cannot be read.
func (l *Lab) slotRouteWarnings(ctx context.Context, name string, n int) []string {
	rep, err := l.RouteOverlaps(ctx, map[string]int{name: n})
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range rep.Checks(l.Config.Network.BridgeCIDR) {
		if c.Status != OK && strings.Contains(c.Detail, "of cluster "+name+" ") {
			out = append(out, c.Detail+" (fix: "+c.Fix+")")
		}
	}
	return out
}

// allocMu serializes slot allocation within this process.
var allocMu sync.Mutex

// reservation is a slot held by a create in progress.
type reservation struct {
	Slot  int       `json:"slot"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
}

// readReservations returns the live reservations; those of dead processes
// are removed.
func readReservations(dir string) (map[string]reservation, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]reservation{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || name == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r reservation
		if json.Unmarshal(b, &r) != nil || !pidAlive(r.PID) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		out[name] = r
	}
	return out, nil
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sdkCluster is what cluster hooks are told about the cluster.
func (l *Lab) sdkCluster(c *Clusters, spec ClusterSpec, res slot.Resources, kubePath string) *sdk.Cluster {
	labels := res.Labels(spec.Region, spec.Zone)
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.Fleet != "" {
		labels[LabelFleet] = spec.Fleet
	}
	image := spec.NodeImage
	if image == "" {
		image = l.imageKindNode()
	}
	cl := &sdk.Cluster{
		Name: spec.Name, Slot: res.Slot, APIPort: res.APIPort,
		ServiceSubnet: res.ServiceSubnet.String(), PodSubnet: res.PodSubnet.String(),
		NodeVersion: l.Config.Kind.NodeVersion, NodeImage: image, Labels: labels,
		KubeconfigPath: kubePath, Workers: spec.Workers, Mirrors: spec.Mirrors,
	}
	for _, p := range res.Pools {
		cl.MetalLBPools = append(cl.MetalLBPools, sdk.AddressRange{First: p.First.String(), Last: p.Last.String()})
	}
	return cl
}

// LabelFleet marks a cluster's nodes with its fleet.
const LabelFleet = "marina.dev/fleet"

func (l *Lab) imageKindNode() string {
	if l.Config.Images.KindNode != "" {
		return l.Config.Images.KindNode
	}
	return "kindest/node:" + l.Config.Kind.NodeVersion
}

// createNodes renders the kind config, places the node files and runs kind.
func (l *Lab) createNodes(ctx context.Context, c *Clusters, run *clusterRun, r lifecycle.Reporter) error {
	kubeletLabels, _ := kind.SplitNodeLabels(run.cluster.Labels)
	cfg, err := kind.Render(kind.RenderInput{
		Name: run.spec.Name, Slot: run.res, NodeImage: run.cluster.NodeImage, Workers: run.spec.Workers,
		Labels: kubeletLabels, APIServerAddress: c.APIServerAddress, Contributions: run.contribs,
		NodeFilesDir: c.NodeFilesDir,
	})
	if err != nil {
		return err
	}
	files, err := kind.CollectNodeFiles(run.contribs)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		placed, err := kind.NodeFiles(run.spec.Name, files, c.NodeFilesDir)
		if err != nil {
			return err
		}
		r.Progress(fmt.Sprintf("placing %d node files", len(placed)))
		if err := kind.PlaceFiles(ctx, l.Driver.Exec, placed); err != nil {
			return err
		}
	}
	run.created = true // from here on, a failure must delete nodes
	return c.Provider.Create(ctx, cfg, kind.CreateOptions{Retain: run.spec.Retain, Wait: run.spec.Wait})
}

// exportKubeconfig writes ~/.kube/marina/<name>.kubeconfig (0600) with the
// address the user's machine reaches, and labels the nodes with what the
// kubelet may not set itself.
func (l *Lab) exportKubeconfig(ctx context.Context, c *Clusters, run *clusterRun) error {
	raw, err := c.Provider.Kubeconfig(ctx, run.spec.Name, false)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return fmt.Errorf("kubeconfig of %s: %w", run.spec.Name, err)
	}
	if err := kubeconfig.Rename(cfg, run.spec.Name); err != nil {
		return err
	}
	// kind reports the API's binding as Docker does; 0.0.0.0 (all
	// addresses) or a VM becomes the address this machine reaches it at.
	if err := pointAt(cfg, c.APIServerAddress); err != nil {
		return fmt.Errorf("kubeconfig of %s: %w", run.spec.Name, err)
	}
	if err := kubeconfig.WriteCluster(run.kubePath, cfg); err != nil {
		return err
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	run.kubecfg = out
	run.cluster.Kubeconfig = out
	_, admin := kind.SplitNodeLabels(run.cluster.Labels)
	if len(admin) == 0 {
		return nil
	}
	return labelNodes(ctx, out, run.spec.Name, admin)
}

// clientFor connects to a cluster through its admin kubeconfig. It is the
// dynamic client, read and written as k8s.io/api's types through
// kube.NewTyped: client-go's typed clientset is not linked into marina (its
// scheme's init would run in every command; see docs/design.md).
func clientFor(kubecfg []byte) (dynamic.Interface, error) {
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubecfg)
	if err != nil {
		return nil, err
	}
	rc.Timeout = 30 * time.Second
	return dynamic.NewForConfig(rc)
}

// kubeProxyPoll is how often waitKubeProxy first reads the DaemonSet
// (kube.WaitFor backs off from there).
const kubeProxyPoll = 500 * time.Millisecond

// waitKubeProxy waits, up to wait (0: 5 minutes), until the cluster's
// kube-proxy DaemonSet is ready on every node, so that Services work before
// PostCluster installs what uses them. kind's own wait ends when the node
// is Ready, a few seconds before kube-proxy has programmed any Service:
// a pod that starts then and talks to the API server through the
// kubernetes Service (MetalLB's controller, ExternalDNS) reaches nothing —
// or, through the node's default route, whatever answers that address
// outside — fails, and is restarted after a back-off. A cluster without
// kube-proxy (kubeProxyMode none, a CNI that replaces it) has no such
// DaemonSet: nothing to wait for.
func waitKubeProxy(ctx context.Context, kubecfg []byte, wait time.Duration) error {
	if wait <= 0 {
		wait = 5 * time.Minute
	}
	dyn, err := clientFor(kubecfg)
	if err != nil {
		return err
	}
	dss := kube.NewTyped[appsv1.DaemonSet](dyn, kube.DaemonSets, "kube-system")
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = kube.WaitFor(ctx, "DaemonSet kube-system/kube-proxy to be ready", kubeProxyPoll, func(ctx context.Context) (bool, error) {
		ds, err := dss.Get(ctx, "kube-proxy", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		case ds.Status.ObservedGeneration >= ds.Generation && ds.Status.DesiredNumberScheduled > 0 &&
			ds.Status.NumberReady == ds.Status.DesiredNumberScheduled:
			return true, nil
		}
		return false, fmt.Errorf("%d of %d pods ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
	})
	if err != nil {
		return fmt.Errorf("%w: Services cannot work; see kubectl -n kube-system get pods -l k8s-app=kube-proxy", err)
	}
	return nil
}

// markComplete writes the completion marker into the cluster.
func markComplete(ctx context.Context, run *clusterRun) error {
	dyn, err := clientFor(run.kubecfg)
	if err != nil {
		return err
	}
	cms := kube.NewTyped[corev1.ConfigMap](dyn, kube.ConfigMaps, "kube-system")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: MarkerConfigMap, Namespace: "kube-system",
			Labels: map[string]string{"app.kubernetes.io/managed-by": "marina"}},
		Data: map[string]string{
			"complete": "true", "slot": strconv.Itoa(run.res.Slot), "createdAt": time.Now().UTC().Format(time.RFC3339),
			"fleet": run.spec.Fleet,
		},
	}
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return err
}

// rollback undoes a failed create, in reverse order, with a fresh bounded
// context (an interrupted create is still cleaned up).
func (l *Lab) rollback(c *Clusters, run *clusterRun) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var errs []error
	if run.hooksRan && run.cluster != nil {
		if _, err := l.RunHookExcept(ctx, sdk.PreClusterDelete, run.cluster, run.spec.Exclude, nil); err != nil {
			errs = append(errs, err)
		}
	}
	if run.created {
		if err := c.Provider.Delete(ctx, run.spec.Name); err != nil {
			errs = append(errs, err)
		}
		if err := kind.RemoveFiles(ctx, l.Driver.Exec, run.spec.Name, c.NodeFilesDir); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, l.forgetKubeconfig(ctx, c, run.spec.Name, run.kubePath))
	return errors.Join(errs...)
}

// forgetKubeconfig removes the cluster's kubeconfig file and its entries in
// the user's kubeconfig.
func (l *Lab) forgetKubeconfig(ctx context.Context, c *Clusters, name, path string) error {
	var errs []error
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if c.Target != nil {
		if _, err := kubeconfig.Remove(ctx, *c.Target, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteCluster runs the cluster-delete hooks (e.g. its DNS records), then
// removes its nodes, node files, kubeconfig file and kubeconfig entries.
func (l *Lab) DeleteCluster(ctx context.Context, c *Clusters, name string, opts lifecycle.Options) error {
	if err := kind.ValidateName(name); err != nil {
		return err
	}
	path := slot.KubeconfigPath(c.Home, name)
	var cluster *sdk.Cluster
	steps := []lifecycle.Step{
		lifecycle.NewStep("Plugins: PreClusterDelete", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			slots, err := c.Slots(ctx)
			if err != nil {
				return err
			}
			n, ok := slots[name]
			if !ok {
				return fmt.Errorf("no cluster named %s (see marina cluster list)", name)
			}
			bridge, err := netip.ParsePrefix(l.Config.Network.BridgeCIDR)
			if err != nil {
				return err
			}
			res, err := slot.Derive(n, bridge)
			if err != nil {
				return err
			}
			cluster = l.sdkCluster(c, ClusterSpec{Name: name}, res, path)
			if b, err := os.ReadFile(path); err == nil {
				cluster.Kubeconfig = b
			}
			_, err = l.RunHook(ctx, sdk.PreClusterDelete, cluster, r)
			if err != nil && c.ForceDelete {
				r.Progress("warning: " + err.Error() + "; deleting " + name + " anyway (--force): what that plugin made for it may be left behind")
				return nil
			}
			return err
		}),
		lifecycle.NewStep("Delete cluster "+name+" (kind)", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			if err := c.Provider.Delete(ctx, name); err != nil {
				return err
			}
			return kind.RemoveFiles(ctx, l.Driver.Exec, name, c.NodeFilesDir)
		}),
		lifecycle.NewStep("Kubeconfig", nil, func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			if !l.Config.Kind.AutoRemoveKubeconfig {
				return os.Remove(path)
			}
			return l.forgetKubeconfig(ctx, c, name, path)
		}),
	}
	_, err := lifecycle.Run(ctx, "cluster delete", steps, opts)
	return err
}

// clusterReadTimeout bounds the reading of one cluster's API by
// ListClusters: a cluster that does not answer is reported, not waited for.
const clusterReadTimeout = 5 * time.Second

// ListClusters reads every cluster's state from live sources (the nodes'
// containers for the slots, then each cluster's API for nodes, labels and
// the completion marker), concurrently, each bounded by
// clusterReadTimeout. The list is sorted by name.
func (l *Lab) ListClusters(ctx context.Context, c *Clusters) ([]ClusterInfo, error) {
	slots, err := c.Slots(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ClusterInfo, 0, len(slots))
	for name, n := range slots {
		out = append(out, ClusterInfo{Name: name, Slot: n, APIPort: slot.APIPortBase + n, Kubeconfig: slot.KubeconfigPath(c.Home, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	now := time.Now()
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { readCluster(ctx, &out[i], now) })
	}
	wg.Wait()
	return out, nil
}

// SelectClusters returns the clusters of list whose labels match sel, and
// the names of the clusters whose labels could not be read (they match no
// selector but the empty one, which matches every cluster).
func SelectClusters(list []ClusterInfo, sel k8slabels.Selector) (matched []ClusterInfo, unread []string) {
	matched = []ClusterInfo{}
	for _, ci := range list {
		switch {
		case sel.Empty():
			matched = append(matched, ci)
		case ci.Problem != "":
			unread = append(unread, ci.Name)
		case sel.Matches(k8slabels.Set(ci.Labels)):
			matched = append(matched, ci)
		}
	}
	return matched, unread
}

// labelControlPlane is the label kubeadm (and so kind) puts on
// control-plane nodes.
const labelControlPlane = "node-role.kubernetes.io/control-plane"

// controlPlane returns the cluster's control-plane node: the first one with
// kubeadm's control-plane label, else the first node (nil if there is none).
func controlPlane(nodes []corev1.Node) *corev1.Node {
	for i := range nodes {
		if _, ok := nodes[i].Labels[labelControlPlane]; ok {
			return &nodes[i]
		}
	}
	if len(nodes) > 0 {
		return &nodes[0]
	}
	return nil
}

// readCluster fills in nodes, readiness, version, labels, the marker and
// the age (relative to now).
func readCluster(ctx context.Context, ci *ClusterInfo, now time.Time) {
	b, err := os.ReadFile(ci.Kubeconfig)
	if err != nil {
		ci.Problem = "no kubeconfig: " + err.Error() + " (marina kubeconfig refresh " + ci.Name + " exports it again)"
		return
	}
	dyn, err := clientFor(b)
	if err != nil {
		ci.Problem = err.Error()
		return
	}
	rctx, cancel := context.WithTimeout(ctx, clusterReadTimeout)
	defer cancel()
	// The marker is read while the nodes are listed: one round trip of
	// waiting per cluster, not two.
	var cm *corev1.ConfigMap
	var cmErr error
	got := make(chan struct{})
	go func() {
		defer close(got)
		cm, cmErr = kube.NewTyped[corev1.ConfigMap](dyn, kube.ConfigMaps, "kube-system").Get(rctx, MarkerConfigMap, metav1.GetOptions{})
	}()
	nodes, err := kube.NewTyped[corev1.Node](dyn, kube.Nodes, "").List(rctx, metav1.ListOptions{})
	<-got
	if err != nil {
		ci.Problem = "API not answering: " + err.Error()
		return
	}
	ci.Nodes = len(nodes)
	for _, n := range nodes {
		ci.Version = n.Status.NodeInfo.KubeletVersion
		if f := n.Labels[LabelFleet]; f != "" {
			ci.Fleet = f
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ci.Ready++
			}
		}
	}
	var created time.Time
	if cp := controlPlane(nodes); cp != nil {
		ci.Labels = cp.Labels
		if v := cp.Status.NodeInfo.KubeletVersion; v != "" {
			ci.Version = v
		}
		created = cp.CreationTimestamp.Time
	}
	if cmErr == nil {
		ci.Complete = cm.Data["complete"] == "true"
		if t, err := time.Parse(time.RFC3339, cm.Data["createdAt"]); err == nil {
			created = t
		}
		if ci.Fleet == "" {
			ci.Fleet = cm.Data["fleet"]
		}
	}
	if !created.IsZero() {
		ci.CreatedAt = created.UTC().Format(time.RFC3339)
		ci.Age = duration.HumanDuration(now.Sub(created))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pointAt rewrites the host of the kubeconfig's server to addr when addr is
// set, or to 127.0.0.1 when kind reported the unspecified address; the port
// is kept.
func pointAt(cfg *clientcmdapi.Config, addr string) error {
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return err
		}
		host := u.Hostname()
		switch {
		case addr != "":
			host = addr
			// The VM's address can change (a restart); verifying the API
			// server as "kubernetes" (a name in every kubeadm API server
			// certificate) keeps the kubeconfig valid when only the
			// server's address is rewritten (see docs/networking.md).
			cl.TLSServerName = "kubernetes"
		case host == "0.0.0.0" || host == "::" || host == "":
			host = "127.0.0.1"
		default:
			continue
		}
		u.Host = net.JoinHostPort(host, u.Port())
		if err := kubeconfig.SetServer(cfg, u.String()); err != nil {
			return err
		}
	}
	return nil
}

// ClusterServer returns the URL at which this machine reaches the API
// server of cluster name now: https://ADDR:PORT, where PORT is
// slot.APIPortBase plus the cluster's slot (read from its nodes) and ADDR is
// c.APIServerAddress (the VM's address with lima), or 127.0.0.1 when that
// is "" (the host driver: Docker publishes the port on this machine).
func (l *Lab) ClusterServer(ctx context.Context, c *Clusters, name string) (string, error) {
	slots, err := c.Slots(ctx)
	if err != nil {
		return "", err
	}
	n, ok := slots[name]
	if !ok {
		return "", fmt.Errorf("no cluster named %s (see marina cluster list)", name)
	}
	return serverURL(c.APIServerAddress, n), nil
}

// serverURL is the API server URL of slot n at addr ("" = 127.0.0.1).
func serverURL(addr string, n int) string {
	if addr == "" {
		addr = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(addr, strconv.Itoa(slot.APIPortBase+n))
}

// KubeconfigRefresh is what a refresh did to one cluster's kubeconfig.
type KubeconfigRefresh struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
	// Server is the API server URL the kubeconfig now points at.
	Server string `json:"server,omitempty"`
	// Exported is set when the file was missing or unreadable and was
	// exported again from the cluster.
	Exported bool `json:"exported,omitempty"`
	// Merged is what changed in the user's kubeconfig (marina's entries of
	// the cluster are updated where they are; none are added).
	Merged kubeconfig.Report `json:"merged"`
	// Skipped says why the cluster's kubeconfig was left alone.
	Skipped string `json:"skipped,omitempty"`
}

// RefreshKubeconfig points cluster name's kubeconfig
// (~/.kube/marina/NAME.kubeconfig) at server, or, when server is "", at the
// cluster's current address (ClusterServer). A missing or unreadable file is
// exported again from the cluster (c.Provider). marina's entries for name
// in the user's kubeconfig (c.Target, if set) are updated where they are;
// none are added. Only the address changes: credentials and certificate
// authority stay those of the cluster.
func (l *Lab) RefreshKubeconfig(ctx context.Context, c *Clusters, name, server string) (KubeconfigRefresh, error) {
	res := KubeconfigRefresh{Name: name, Kubeconfig: slot.KubeconfigPath(c.Home, name)}
	if err := kind.ValidateName(name); err != nil {
		return res, err
	}
	if server == "" {
		s, err := l.ClusterServer(ctx, c, name)
		if err != nil {
			return res, err
		}
		server = s
	}
	if err := kubeconfig.ValidateServer(server); err != nil {
		return res, fmt.Errorf("server for %s: %w", name, err)
	}
	return res, l.refresh(ctx, c, &res, server)
}

// RefreshKubeconfigs refreshes (RefreshKubeconfig) the kubeconfig of every
// cluster that has one, at its current address. Clusters without a
// kubeconfig file, and kubeconfig files of clusters that do not exist, are
// listed as skipped with the reason. One cluster's failure does not stop
// the others; the error joins them all.
func (l *Lab) RefreshKubeconfigs(ctx context.Context, c *Clusters) ([]KubeconfigRefresh, error) {
	slots, err := c.Slots(ctx)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(slot.KubeconfigPath(c.Home, "x"))
	files, err := filepath.Glob(filepath.Join(dir, "*.kubeconfig"))
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for name := range slots {
		names[name] = true
	}
	for _, f := range files {
		names[strings.TrimSuffix(filepath.Base(f), ".kubeconfig")] = true
	}
	out := []KubeconfigRefresh{}
	var errs []error
	for _, name := range sortedKeys(names) {
		res := KubeconfigRefresh{Name: name, Kubeconfig: slot.KubeconfigPath(c.Home, name)}
		n, live := slots[name]
		_, statErr := os.Stat(res.Kubeconfig)
		switch {
		case !live:
			res.Skipped = "no cluster of this name: the file is left from a deleted cluster (remove it: rm " + res.Kubeconfig + ")"
		case statErr != nil:
			res.Skipped = "no kubeconfig file (export it again: marina kubeconfig refresh " + name + ")"
		default:
			if err := l.refresh(ctx, c, &res, serverURL(c.APIServerAddress, n)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}

// refresh rewrites res.Kubeconfig to point at server, exporting it again
// from the cluster when it is missing or unreadable, and updates marina's
// entries in the user's kubeconfig.
func (l *Lab) refresh(ctx context.Context, c *Clusters, res *KubeconfigRefresh, server string) error {
	cfg, err := kubeconfig.ReadCluster(res.Kubeconfig)
	if err != nil {
		cfg, err = l.exportAgain(ctx, c, res.Name, err)
		if err != nil {
			return err
		}
		res.Exported = true
	}
	// With lima, this also makes the kubeconfig verify the API server as
	// "kubernetes", so that a later change of the VM's address only needs
	// the address rewritten (see pointAt).
	if err := pointAt(cfg, c.APIServerAddress); err != nil {
		return fmt.Errorf("%s: %w", res.Kubeconfig, err)
	}
	if err := kubeconfig.SetServer(cfg, server); err != nil {
		return fmt.Errorf("%s: %w", res.Kubeconfig, err)
	}
	if err := kubeconfig.WriteCluster(res.Kubeconfig, cfg); err != nil {
		return err
	}
	res.Server = server
	if c.Target == nil {
		return nil
	}
	rep, err := kubeconfig.Merge(ctx, *c.Target, cfg, res.Name, kubeconfig.MergeOptions{UpdateOnly: true})
	if err != nil {
		return fmt.Errorf("%s now points at %s, but updating %s failed: %w", res.Kubeconfig, server, c.Target.DefaultFile(), err)
	}
	res.Merged = rep
	return nil
}

// exportAgain fetches cluster name's kubeconfig from the cluster itself
// (its file could not be read: readErr), named and addressed as create
// writes it.
func (l *Lab) exportAgain(ctx context.Context, c *Clusters, name string, readErr error) (*clientcmdapi.Config, error) {
	path := slot.KubeconfigPath(c.Home, name)
	if c.Provider == nil || c.Slots == nil {
		return nil, fmt.Errorf("cluster %q has no readable kubeconfig at %s (%v), and the lab is not at hand to export it again: run marina up, then marina kubeconfig refresh %s", name, path, readErr, name)
	}
	slots, err := c.Slots(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := slots[name]; !ok {
		return nil, fmt.Errorf("cluster %q has no kubeconfig at %s, and there is no cluster named %s to export it from (see marina cluster list)", name, path, name)
	}
	raw, err := c.Provider.Kubeconfig(ctx, name, false)
	if err != nil {
		return nil, fmt.Errorf("%s could not be read (%v), and exporting it again from the cluster failed: %w", path, readErr, err)
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s exported by kind: %w", name, err)
	}
	if err := kubeconfig.Rename(cfg, name); err != nil {
		return nil, fmt.Errorf("kubeconfig of %s exported by kind: %w", name, err)
	}
	return cfg, nil
}

// StepDeleteClusters deletes every cluster (hooks, nodes, kubeconfig
// entries): the first step of `marina destroy`, so no context or DNS record
// of a destroyed cluster is left behind.
func (l *Lab) StepDeleteClusters(c *Clusters) lifecycle.Step {
	return lifecycle.NewStep("Delete clusters",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			slots, err := c.Slots(ctx)
			if err != nil {
				return nil, err
			}
			var changes []lifecycle.Change
			for _, n := range sortedKeys(slots) {
				changes = append(changes, lifecycle.Change{Action: "delete", Target: "cluster " + n})
			}
			return changes, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, changes []lifecycle.Change) error {
			slots, err := c.Slots(ctx)
			if err != nil {
				return err
			}
			var errs []error
			for _, n := range sortedKeys(slots) {
				r.Progress("deleting cluster " + n)
				if err := l.DeleteCluster(ctx, c, n, lifecycle.Options{}); err != nil {
					errs = append(errs, fmt.Errorf("cluster %s: %w", n, err))
				}
			}
			return errors.Join(errs...)
		})
}

// LabelNodes sets labels on every node of cluster name (through its
// kubeconfig), e.g. marina.dev/fleet when a fleet adopts it. A key whose
// value is "-" is removed.
func (l *Lab) LabelNodes(ctx context.Context, c *Clusters, name string, labels map[string]string) error {
	b, err := os.ReadFile(slot.KubeconfigPath(c.Home, name))
	if err != nil {
		return fmt.Errorf("cluster %s: %w", name, err)
	}
	return labelNodes(ctx, b, name, labels)
}

// labelNodes patches labels onto every node of cluster name, through the
// admin kubeconfig kubecfg. A key whose value is "-" is removed.
func labelNodes(ctx context.Context, kubecfg []byte, name string, labels map[string]string) error {
	dyn, err := clientFor(kubecfg)
	if err != nil {
		return err
	}
	nodeClient := kube.NewTyped[corev1.Node](dyn, kube.Nodes, "")
	nodes, err := nodeClient.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes of %s: %w", name, err)
	}
	set := map[string]any{}
	for k, v := range labels {
		if v == "-" {
			set[k] = nil // a JSON merge patch removes null keys
		} else {
			set[k] = v
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": set}})
	for _, n := range nodes {
		if _, err := nodeClient.Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", n.Name, err)
		}
	}
	return nil
}
