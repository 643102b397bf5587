package standin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/plugins/coredns"
	"github.com/bcollard/marina/plugins/coredns/corefile"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/test/standin"
	"github.com/bcollard/marina/test/standin/internal/addon"
)

// testSubnet is this package's Docker network (no other package uses it).
const testSubnet = "172.18.0.0/16"

// The slots of this package's clusters: API host ports 7071-7074, clear of
// the low slots marina's own end-to-end tests (and a developer's lab) take,
// since test packages run at the same time.
const (
	slotA      = 71
	slotB      = 72
	slotCancel = 73
	slotRefuse = 74
)

// gateway is the Docker host's address on testSubnet: the address marina's
// host driver gives kubeconfigs (RenderInput.APIServerAddress), so the
// API server listens on 0.0.0.0 and its certificate covers it.
const gateway = "172.18.0.1"

// Bounds of the tests' waits.
const (
	createTimeout = 3 * time.Minute
	waitTimeout   = 30 * time.Second
)

// testCluster is a cluster a test creates.
type testCluster struct {
	name string
	res  slot.Resources
	cfg  *v1alpha4.Cluster
	// wantCP and wantWorker are the node labels expected besides those of
	// the kubelet and kubeadm.
	wantCP, wantWorker map[string]string
	cs                 kubernetes.Interface
	rest               *rest.Config
	kubeconfig         string // path of the external kubeconfig (127.0.0.1)
}

// logLines collects the helper's progress lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool { return strings.Contains(line, s) })
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := sigsyaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nodeLabelsPatch sets the kubelet's node-labels in a kubeadm node
// registration: v1beta4's list form, or v1beta3's map form when asMap.
func nodeLabelsPatch(t *testing.T, kind, apiVersion, labels string, asMap bool) string {
	t.Helper()
	var args any = []map[string]string{{"name": "node-labels", "value": labels}}
	if asMap {
		args = map[string]string{"node-labels": labels}
	}
	p := map[string]any{"kind": kind, "nodeRegistration": map[string]any{"kubeletExtraArgs": args}}
	if apiVersion != "" {
		p["apiVersion"] = apiVersion
	}
	return toYAML(t, p)
}

// kubeletLabels are the slot's node labels the kubelet may set itself
// (marina sets the others after creation).
func kubeletLabels(res slot.Resources, extra map[string]string) map[string]string {
	labels, _ := kind.SplitNodeLabels(res.Labels("", ""))
	maps.Copy(labels, extra)
	return labels
}

// render renders a cluster's kind config with core/kind.Render.
func render(t *testing.T, network *dockertest.Net, n int, name string, workers int, extra map[string]string, contrib *sdk.KindContribution, filesDir string) (slot.Resources, *v1alpha4.Cluster) {
	t.Helper()
	res, err := slot.Derive(n, network.Subnet)
	if err != nil {
		t.Fatal(err)
	}
	in := kind.RenderInput{
		Name: name, Slot: res, Workers: workers, Labels: kubeletLabels(res, extra),
		APIServerAddress: gateway, NodeFilesDir: filesDir,
	}
	if contrib != nil {
		in.Contributions = []kind.NamedContribution{{Plugin: "standin-test", KindContribution: contrib}}
	}
	cfg, err := kind.Render(in)
	if err != nil {
		t.Fatalf("kind.Render %s: %v", name, err)
	}
	return res, cfg
}

// clusterContainers lists the containers Docker has with the cluster's
// kind label, the way marina and kind find nodes.
func clusterContainers(t *testing.T, name string) []string {
	t.Helper()
	out := dockertest.Docker(t, "ps", "-a", "--filter", "label="+kind.ClusterLabel+"="+name, "--format", "{{.Names}}")
	if out == "" {
		return nil
	}
	names := strings.Split(out, "\n")
	slices.Sort(names)
	return names
}

// dockerClusters lists the kind clusters Docker has, as kind does.
func dockerClusters(t *testing.T) []string {
	t.Helper()
	out := dockertest.Docker(t, "ps", "-a", "--filter", "label="+kind.ClusterLabel, "--format", `{{.Label "`+kind.ClusterLabel+`"}}`)
	var names []string
	for _, n := range strings.Split(out, "\n") {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// deleteOnCleanup deletes the clusters when the test ends and fails it if
// a node container remains.
func deleteOnCleanup(t *testing.T, p *kind.KindProvider, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, n := range names {
			if err := p.Delete(ctx, n); err != nil {
				t.Errorf("cleanup: delete cluster %s: %v", n, err)
			}
			if left := clusterContainers(t, n); len(left) > 0 {
				t.Errorf("cleanup: cluster %s left containers %v", n, left)
			}
		}
	})
}

// connect reads the cluster's external kubeconfig from the provider and
// rewrites 0.0.0.0 to 127.0.0.1, as marina rewrites it to the address the
// user's machine reaches.
func (c *testCluster) connect(t *testing.T, ctx context.Context, p *kind.KindProvider) {
	t.Helper()
	raw, err := p.Kubeconfig(ctx, c.name, false)
	if err != nil {
		t.Fatalf("Kubeconfig(%s, external): %v", c.name, err)
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	key := "kind-" + c.name
	cl := cfg.Clusters[key]
	if cl == nil || cfg.CurrentContext != key || cfg.AuthInfos[key] == nil {
		t.Fatalf("kubeconfig of %s has no cluster, user and current context %s: %s", c.name, key, raw)
	}
	want := fmt.Sprintf("https://0.0.0.0:%d", c.res.APIPort)
	if cl.Server != want {
		t.Fatalf("external kubeconfig server = %s, want %s (the API binding as Docker reports it)", cl.Server, want)
	}
	cl.Server = fmt.Sprintf("https://127.0.0.1:%d", c.res.APIPort)
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = filepath.Join(t.TempDir(), c.name+".kubeconfig")
	if err := os.WriteFile(c.kubeconfig, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if c.rest, err = clientcmd.RESTConfigFromKubeConfig(out); err != nil {
		t.Fatal(err)
	}
	c.rest.QPS, c.rest.Burst = 50, 100
	if c.cs, err = kubernetes.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}
}

// kubectl runs the kubectl built with the API server against the cluster.
func (c *testCluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubetest.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubetest.KubectlPath(t), append([]string{"--kubeconfig=" + c.kubeconfig}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestStandIn creates two clusters at once through marina's KindProvider
// with the stand-in as its helper, and checks what marina relies on: Docker
// state, API servers on the slots' host ports, Nodes, CoreDNS, workload
// status, tokens, the internal kubeconfig, List and Delete.
func TestStandIn(t *testing.T) {
	paths := standin.Build(t)
	t.Setenv(standin.ImageEnv, paths.Image) // the helper inherits the environment
	network := dockertest.Network(t, testSubnet)
	var logs logLines
	prov := &kind.KindProvider{Executable: paths.Helper, Network: network.Name, Log: logs.add}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("helper output:\n%s", &logs)
		}
	})

	id := suffix()
	// Cluster a: node labels from kubeadm patches. A patch naming
	// node-labels replaces kind's own node-labels argument (kind merges
	// kubeletExtraArgs by name), so a's nodes carry the patch labels and
	// not the config's; the v1beta3 patch matches nothing on Kubernetes
	// v1.37 (kubeadm v1beta4) and is ignored.
	a := &testCluster{name: "standin-a-" + id,
		wantCP:     map[string]string{"standin.test/patched": "init"},
		wantWorker: map[string]string{"standin.test/patched": "join"}}
	a.res, a.cfg = render(t, network, slotA, a.name, 1, nil, &sdk.KindContribution{KubeadmConfigPatches: []string{
		nodeLabelsPatch(t, "InitConfiguration", "kubeadm.k8s.io/v1beta4", "standin.test/patched=init", false),
		nodeLabelsPatch(t, "JoinConfiguration", "", "standin.test/patched=join", true),
		nodeLabelsPatch(t, "InitConfiguration", "kubeadm.k8s.io/v1beta3", "standin.test/ignored=yes", true),
	}}, "")

	// Cluster b: the config's labels, two workers, a node file (a
	// read-only extra mount) and an extra certificate SAN.
	filesDir := t.TempDir()
	nodeFile := sdk.NodeFile{Path: "/etc/standin-test/hello.txt", Content: []byte("hello from marina\n")}
	b := &testCluster{name: "standin-b-" + id}
	b.res, b.cfg = render(t, network, slotB, b.name, 2, map[string]string{"standin.test/cluster": "b"}, &sdk.KindContribution{
		NodeFiles: []sdk.NodeFile{nodeFile},
		KubeadmConfigPatches: []string{toYAML(t, map[string]any{"kind": "ClusterConfiguration",
			"apiServer": map[string]any{"certSANs": []string{"api.standin.test"}}})},
	}, filesDir)
	b.wantCP = kubeletLabels(b.res, map[string]string{"standin.test/cluster": "b"})
	b.wantWorker = b.wantCP
	placed, err := kind.NodeFiles(b.name, []sdk.NodeFile{nodeFile}, filesDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := kind.PlaceFiles(context.Background(), localExec, placed); err != nil {
		t.Fatal(err)
	}

	deleteOnCleanup(t, prov, a.name, b.name)
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()

	begin := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*testCluster{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = prov.Create(ctx, c.cfg, kind.CreateOptions{Wait: 2 * time.Minute})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("created %s and %s in parallel in %s", a.name, b.name, time.Since(begin).Round(time.Millisecond))
	for _, line := range []string{"Preparing nodes", "Starting control-plane", "matches no document"} {
		if !logs.contains(line) {
			t.Errorf("the helper logged no %q line:\n%s", line, &logs)
		}
	}
	a.connect(t, ctx, prov)
	b.connect(t, ctx, prov)

	t.Run("Docker", func(t *testing.T) {
		for _, c := range []*testCluster{a, b} {
			want := []string{c.name + "-control-plane", c.name + "-worker"}
			if c == b {
				want = append(want, b.name+"-worker2")
			}
			if got := clusterContainers(t, c.name); !slices.Equal(got, want) {
				t.Errorf("docker ps --filter label=%s=%s: %v, want %v", kind.ClusterLabel, c.name, got, want)
			}
			if got, err := prov.Nodes(ctx, c.name); err != nil || !slices.Equal(got, want) {
				t.Errorf("Nodes(%s) = %v, %v; want %v", c.name, got, err, want)
			}
			for _, n := range want {
				role := "worker"
				if strings.HasSuffix(n, "-control-plane") {
					role = "control-plane"
				}
				got := dockertest.Docker(t, "inspect", "--format",
					`{{.Config.Hostname}} {{index .Config.Labels "io.x-k8s.kind.role"}} {{.HostConfig.RestartPolicy.Name}}:{{.HostConfig.RestartPolicy.MaximumRetryCount}} {{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}} {{.State.Status}}`, n)
				if want := fmt.Sprintf("%s %s on-failure:1 %s running", n, role, network.Name); got != want {
					t.Errorf("node %s: %q, want %q", n, got, want)
				}
			}
			port := dockertest.Docker(t, "port", c.name+"-control-plane", "6443/tcp")
			if want := fmt.Sprintf("0.0.0.0:%d", c.res.APIPort); strings.Split(port, "\n")[0] != want {
				t.Errorf("API binding of %s: %q, want %s first", c.name, port, want)
			}
		}
		// b's node file is bind-mounted read-only into every node.
		for _, n := range []string{b.name + "-control-plane", b.name + "-worker2"} {
			mounts := dockertest.Docker(t, "inspect", "--format", `{{range .Mounts}}{{.Source}}>{{.Destination}}>{{.RW}} {{end}}`, n)
			if want := placed[0].HostPath + ">" + nodeFile.Path + ">false"; !strings.Contains(mounts, want) {
				t.Errorf("mounts of %s: %q, want %s", n, mounts, want)
			}
			if content := dockertest.Docker(t, "cp", n+":"+nodeFile.Path, "-"); !strings.Contains(content, "hello from marina") {
				t.Errorf("%s in %s does not hold the node file's content", nodeFile.Path, n)
			}
		}
	})

	t.Run("APIServer", func(t *testing.T) {
		for _, c := range []*testCluster{a, b} {
			body, err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil || string(body) != "ok" {
				t.Errorf("%s /readyz = %q, %v", c.name, body, err)
			}
			// kubeadm's admin.conf identity: kubernetes-admin in
			// kubeadm:cluster-admins, bound to cluster-admin.
			who, err := c.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("%s: self subject review: %v", c.name, err)
			}
			if u := who.Status.UserInfo; u.Username != "kubernetes-admin" || !slices.Contains(u.Groups, "kubeadm:cluster-admins") {
				t.Errorf("%s: admin is %s %v, want kubernetes-admin in kubeadm:cluster-admins", c.name, u.Username, u.Groups)
			}
		}
		// The serving certificate covers what kubeadm's would.
		ca := x509.NewCertPool()
		ca.AppendCertsFromPEM(b.rest.CAData)
		for _, name := range []string{"api.standin.test", b.name + "-control-plane", "kubernetes.default.svc.cluster.local", "localhost", gateway, "127.0.0.1", "10.72.0.1"} {
			if err := tlsHandshake(b.res.APIPort, name, ca); err != nil {
				t.Errorf("TLS to %s:%d as %s: %v", "127.0.0.1", b.res.APIPort, name, err)
			}
		}
		if err := tlsHandshake(b.res.APIPort, "not-a-san.example", ca); err == nil {
			t.Error("the serving certificate is valid for not-a-san.example")
		}
	})

	t.Run("Nodes", func(t *testing.T) {
		for _, c := range []*testCluster{a, b} {
			v, err := c.cs.Discovery().ServerVersion()
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := prov.Nodes(ctx, c.name)
			var got []string
			for _, n := range nodes.Items {
				got = append(got, n.Name)
				cp := strings.HasSuffix(n.Name, "-control-plane")
				wantLabels := maps.Clone(c.wantWorker)
				if cp {
					wantLabels = maps.Clone(c.wantCP)
					wantLabels["node-role.kubernetes.io/control-plane"] = ""
					wantLabels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
				}
				wantLabels["kubernetes.io/hostname"] = n.Name
				wantLabels["kubernetes.io/os"], wantLabels["beta.kubernetes.io/os"] = "linux", "linux"
				wantLabels["kubernetes.io/arch"], wantLabels["beta.kubernetes.io/arch"] = n.Status.NodeInfo.Architecture, n.Status.NodeInfo.Architecture
				if !maps.Equal(n.Labels, wantLabels) {
					t.Errorf("Node %s labels:\n got %v\nwant %v", n.Name, n.Labels, wantLabels)
				}
				if tainted := len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == "node-role.kubernetes.io/control-plane"; tainted != cp {
					t.Errorf("Node %s taints %v (control plane: %v)", n.Name, n.Spec.Taints, cp)
				}
				if !nodeReady(n) || n.Status.NodeInfo.KubeletVersion != v.GitVersion {
					t.Errorf("Node %s: ready %v, kubelet %s (API server %s)", n.Name, nodeReady(n), n.Status.NodeInfo.KubeletVersion, v.GitVersion)
				}
				if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool {
					return a.Type == corev1.NodeInternalIP && network.Subnet.Contains(mustAddr(a.Address))
				}) {
					t.Errorf("Node %s has no InternalIP in %s: %v", n.Name, network.Subnet, n.Status.Addresses)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s Nodes %v, want the node containers %v", c.name, got, want)
			}
		}
	})

	t.Run("CoreDNS", func(t *testing.T) {
		cs := b.cs
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := addon.Corefile("cluster.local")
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["Corefile"] != want {
			t.Fatalf("Corefile:\n%s\nwant kubeadm's:\n%s", cm.Data["Corefile"], want)
		}
		// marina's coredns plugin: edit the Corefile, restart CoreDNS,
		// wait for the rollout by kubectl's rules (it speaks through the
		// dynamic client).
		dyn, err := dynamic.NewForConfig(b.rest)
		if err != nil {
			t.Fatal(err)
		}
		hash, changed, err := coredns.EnsureCorefile(ctx, dyn, []corefile.Forward{{Zone: "demo.internal", Resolvers: []string{"172.18.255.53"}}}, corefile.Options{CacheSeconds: 30})
		if err != nil || !changed {
			t.Fatalf("EnsureCorefile = %v, %v", changed, err)
		}
		restarted, err := coredns.EnsureRolledOut(ctx, dyn, hash, time.Now())
		if err != nil || !restarted {
			t.Fatalf("EnsureRolledOut = %v, %v", restarted, err)
		}
		if err := coredns.WaitRollout(ctx, dyn, waitTimeout, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Workloads", func(t *testing.T) {
		c := a
		labels := map[string]string{"app": "standin-test"}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}}}
		three, two := int32(3), int32(2)
		apps := c.cs.AppsV1()
		if _, err := apps.Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := apps.DaemonSets("default").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := apps.StatefulSets("default").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// kubectl's own rollout rules decide.
		for _, w := range []string{"deployment/web", "daemonset/agent", "statefulset/db"} {
			out := c.kubectl(t, "-n", "default", "rollout", "status", w, "--timeout="+waitTimeout.String())
			t.Logf("kubectl rollout status %s: %s", w, strings.TrimSpace(out))
		}
		d, err := apps.Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 3 || !deploymentAvailable(d) {
			t.Errorf("Deployment web: %+v, %v; want 3 available and Available=True", d.Status, err)
		}
		ds, err := apps.DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil || ds.Status.DesiredNumberScheduled != 1 || ds.Status.NumberAvailable != 1 {
			t.Errorf("DaemonSet agent: %+v, %v; want 1 (the worker: the control plane is tainted)", ds.Status, err)
		}
		// No pod runs: that is the stand-in's limit, and it is stated.
		pods, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("pods: %d, %v; the stand-in creates none", len(pods.Items), err)
		}
	})

	t.Run("ServiceAccounts", func(t *testing.T) {
		cs := a.cs
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "standin-sa"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dockertest.WaitFor(t, waitTimeout, 200*time.Millisecond, "ServiceAccount standin-sa/default", func() error {
			_, err := cs.CoreV1().ServiceAccounts("standin-sa").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		tok, err := cs.CoreV1().ServiceAccounts("standin-sa").CreateToken(ctx, "default", &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil || tok.Status.Token == "" {
			t.Fatalf("TokenRequest: %v", err)
		}
		cfg := rest.AnonymousClientConfig(a.rest)
		cfg.BearerToken = tok.Status.Token
		sa, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		who, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil || who.Status.UserInfo.Username != "system:serviceaccount:standin-sa:default" {
			t.Errorf("the token authenticates as %+v, %v", who, err)
		}
	})

	t.Run("InternalKubeconfig", func(t *testing.T) {
		raw, err := prov.Kubeconfig(ctx, b.name, true)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.Load(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cfg.Clusters["kind-"+b.name].Server, "https://"+b.name+"-control-plane:6443"; got != want {
			t.Fatalf("internal server = %s, want %s", got, want)
		}
		// kubectl (in the node image, as in kind's) in a container on the
		// cluster's network reaches the API by the node's name.
		path := filepath.Join(t.TempDir(), "internal.kubeconfig")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", "--rm", "--network", network.Name, "--tmpfs", "/tmp", "-e", "HOME=/tmp",
			"-v", path + ":/kubeconfig:ro", "--entrypoint", "/usr/local/bin/kubectl"}
		args = append(args, dockertest.LabelArgs(t)...)
		args = append(args, paths.Image, "--kubeconfig=/kubeconfig", "get", "nodes", "-o", "name")
		out := dockertest.Docker(t, args...)
		want := "node/" + b.name + "-control-plane\nnode/" + b.name + "-worker\nnode/" + b.name + "-worker2"
		if out != want {
			t.Errorf("kubectl get nodes from the network: %q, want %q", out, want)
		}
	})

	t.Run("Restart", func(t *testing.T) {
		// A node restarted by Docker (restart policy, reboot of the VM)
		// stops its processes on SIGTERM and comes back with its data:
		// same API port, same credentials, the objects still there.
		cp := a.name + "-control-plane"
		dockertest.Docker(t, "restart", cp)
		dockertest.WaitFor(t, time.Minute, 250*time.Millisecond, cp+" ready after a restart", func() error {
			// The init logs its ready line again once it has found its
			// objects in etcd (the log spans both runs).
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "docker", "logs", cp).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker logs: %v: %s", err, out)
			}
			if n := strings.Count(string(out), "ready: Nodes and the CoreDNS addon exist"); n < 2 {
				return fmt.Errorf("%d ready lines in its log, want 2", n)
			}
			return nil
		})
		if state := dockertest.Docker(t, "inspect", "--format", "{{.State.Status}} {{.RestartCount}}", cp); state != "running 0" {
			t.Fatalf("%s after a restart: %s, want running and never restarted by Docker (its init did not fail)", cp, state)
		}
		if _, err := a.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			t.Fatalf("%s /readyz after a restart: %v", cp, err)
		}
		if logs := dockertest.Docker(t, "logs", cp); !strings.Contains(logs, "standin-node: ") || !strings.Contains(logs, "stopping") {
			t.Errorf("%s did not log a clean stop on SIGTERM:\n%s", cp, logs)
		}
		if _, err := a.cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment web after the restart: %v", err)
		}
		nodes, err := a.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 2 {
			t.Errorf("Nodes after the restart: %v, %v", nodes, err)
		}
	})

	t.Run("ListAndDelete", func(t *testing.T) {
		got, err := prov.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := dockerClusters(t); !slices.Equal(got, want) || !slices.Contains(got, a.name) || !slices.Contains(got, b.name) {
			t.Fatalf("List = %v; Docker has %v; want both to hold %s and %s", got, want, a.name, b.name)
		}
		if err := prov.Delete(ctx, b.name); err != nil {
			t.Fatalf("Delete(%s): %v", b.name, err)
		}
		if left := clusterContainers(t, b.name); len(left) > 0 {
			t.Fatalf("Delete left %v", left)
		}
		got, err = prov.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := dockerClusters(t); !slices.Equal(got, want) || slices.Contains(got, b.name) || !slices.Contains(got, a.name) {
			t.Errorf("after Delete(%s): List = %v; Docker has %v", b.name, got, want)
		}
		if err := prov.Delete(ctx, b.name); err != nil {
			t.Errorf("Delete of a deleted cluster: %v", err)
		}
		if _, err := prov.Kubeconfig(ctx, b.name, false); err == nil || !strings.Contains(err.Error(), "could not locate any control plane nodes") {
			t.Errorf("Kubeconfig of a deleted cluster: %v", err)
		}
		// a is unaffected.
		if _, err := a.cs.Discovery().ServerVersion(); err != nil {
			t.Errorf("%s after deleting %s: %v", a.name, b.name, err)
		}
	})
}

// TestStandInRefuses checks that what kind would refuse is refused, with
// kind's kind of message, and that nothing is left behind.
func TestStandInRefuses(t *testing.T) {
	paths := standin.Build(t)
	t.Setenv(standin.ImageEnv, paths.Image)
	network := dockertest.Network(t, testSubnet)
	var logs logLines
	prov := &kind.KindProvider{Executable: paths.Helper, Network: network.Name, Log: logs.add}
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	id := suffix()

	t.Run("patch is not YAML", func(t *testing.T) {
		name := "standin-yaml-" + id
		_, cfg := render(t, network, slotRefuse, name, 1, nil, nil, "")
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, "kind: [InitConfiguration")
		deleteOnCleanup(t, prov, name)
		err := prov.Create(ctx, cfg, kind.CreateOptions{Wait: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "create cluster "+name+": failed to generate kubeadm config content: failed to parse patches: failed to parse type meta for") {
			t.Fatalf("Create = %v, want kind's patch parse error", err)
		}
		if left := clusterContainers(t, name); len(left) > 0 {
			t.Errorf("containers left: %v", left)
		}
	})

	t.Run("unknown field", func(t *testing.T) {
		// KindProvider sends typed configs; a hand-written request with
		// an unknown field is refused by the helper's strict decoding.
		req := map[string]any{"op": "create", "name": "standin-unknown", "config": map[string]any{
			"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "name": "standin-unknown",
			"nodes": []map[string]any{{"role": "control-plane", "bogus": true}}}}
		code, stdout, stderr := runHelper(t, paths.Helper, req, os.Environ())
		if code != 2 || !strings.Contains(stderr, `unknown field "bogus"`) {
			t.Errorf("helper exit %d, stdout %q, stderr %q; want 2 and an unknown-field error", code, stdout, stderr)
		}
	})

	t.Run("bad mount", func(t *testing.T) {
		// A file mounted over a directory of the node: Docker refuses to
		// start the node, as it would a kind node.
		name := "standin-mount-" + id
		_, cfg := render(t, network, slotRefuse, name, 1, nil, nil, "")
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Nodes[1].ExtraMounts = append(cfg.Nodes[1].ExtraMounts, v1alpha4.Mount{HostPath: file, ContainerPath: "/usr/local/bin"})
		deleteOnCleanup(t, prov, name)
		err := prov.Create(ctx, cfg, kind.CreateOptions{Wait: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "failed to create node "+name+"-worker") || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("Create = %v, want Docker's mount error for the worker", err)
		}
		if left := clusterContainers(t, name); len(left) > 0 {
			t.Errorf("containers left: %v", left)
		}
	})

	t.Run("no node image", func(t *testing.T) {
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, standin.ImageEnv+"=") {
				env = append(env, kv)
			}
		}
		create := map[string]any{"op": "create", "name": "standin-noimage", "config": map[string]any{
			"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "name": "standin-noimage",
			"nodes": []map[string]any{{"role": "control-plane"}}}}
		code, stdout, _ := runHelper(t, paths.Helper, create, env)
		if code != 1 || !strings.Contains(stdout, standin.ImageEnv+" is not set") {
			t.Errorf("create: helper exit %d, result %q; want 1 and an error naming %s", code, stdout, standin.ImageEnv)
		}
		// Everything but Create works without it (a cluster can still be
		// deleted).
		if code, stdout, stderr := runHelper(t, paths.Helper, map[string]any{"op": "list"}, env); code != 0 {
			t.Errorf("list without %s: exit %d, %s %s", standin.ImageEnv, code, stdout, stderr)
		}
	})
}

// TestStandInCancel cancels a Create once its node containers exist, while
// the helper waits for the control plane: KindProvider kills the helper and
// rolls back, and no container remains. (It cancels after every node
// exists because a container create the Docker daemon has accepted
// completes even when its client is killed: cancelling in that window can
// leave a container the rollback's Delete did not see, with kind as with
// the stand-in.)
func TestStandInCancel(t *testing.T) {
	paths := standin.Build(t)
	t.Setenv(standin.ImageEnv, paths.Image)
	network := dockertest.Network(t, testSubnet)
	prov := &kind.KindProvider{Executable: paths.Helper, Network: network.Name}
	name := "standin-cancel-" + suffix()
	_, cfg := render(t, network, slotCancel, name, 1, nil, nil, "")
	deleteOnCleanup(t, prov, name)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- prov.Create(ctx, cfg, kind.CreateOptions{Wait: time.Minute}) }()
	deadline := time.Now().Add(waitTimeout)
	for len(clusterContainers(t, name)) < len(cfg.Nodes) {
		select {
		case err := <-done:
			t.Fatalf("Create returned before its nodes existed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes of %s did not appear within %s", name, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "stopped") {
			t.Errorf("Create = %v, want a cancellation error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Create did not return after its context was cancelled")
	}
	if left := clusterContainers(t, name); len(left) > 0 {
		t.Errorf("cancelled Create left %v", left)
	}
}

// runHelper runs the helper with one request and returns its exit code,
// stdout and stderr.
func runHelper(t *testing.T, helper string, req any, env []string) (int, string, string) {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helper, kind.HelperArg)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", helper, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// localExec runs argv on this machine (the Docker host) for kind.PlaceFiles.
func localExec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = stdin
	return cmd.CombinedOutput()
}

// tlsHandshake connects to the API server on 127.0.0.1:port and verifies its
// certificate for name against ca.
func tlsHandshake(port int, name string, ca *x509.CertPool) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{ServerName: name, RootCAs: ca})
	if err != nil {
		return err
	}
	return conn.Close()
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func mustAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}
