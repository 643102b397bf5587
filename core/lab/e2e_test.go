//go:build linux

package lab

// `marina cluster e2e` against the real parts that run here (TESTING.md,
// tiers 2 and 3): a real kube-apiserver (sdk/kubetest) stands in for the
// kind cluster, MetalLB's real controller assigns the VIP from the pool, the
// real ExternalDNS (coredns provider) writes the name into a real etcd, and
// marina's CoreDNS (the localdns plugin's golden Corefile) answers it, all on
// a test docker network 172.19.0.0/16 playing the lab's bridge. What cannot
// run here is the data plane (no kubelet, no kube-proxy, no speaker): the
// test plays the kubelet (it marks the Deployment available) and puts an
// HTTP server container at the pool's first addresses, where the Service
// would answer.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/kubetest"
)

// The test network plays the lab's bridge (network.bridgeCIDR); no other
// package's tests use this subnet.
const (
	e2eSubnet    = "172.19.0.0/16"
	e2eEtcdIP    = "172.19.255.52"
	e2eDNSIP     = "172.19.255.53"
	e2eCluster   = "e2e"
	e2eSlot      = 3
	e2eZone      = "demo.internal"
	e2eMetalLBNS = "metallb-system"
	e2eHTTPPath  = "/v2/" // what the registry image answers 200 on
)

// TestE2EObjects checks the workload e2e deploys (tier 0).
func TestE2EObjects(t *testing.T) {
	d, svc := e2eObjects("marina-e2e-abcde", E2EOptions{Image: DefaultE2EImage, Args: defaultE2EArgs, Port: 8080, Path: "/"}, map[string]string{LabelE2E: "true"})
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != DefaultE2EImage || !slices.Equal(c.Args, []string{"netexec", "--http-port=8080"}) {
		t.Errorf("container %s %v", c.Image, c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/" || c.ReadinessProbe.HTTPGet.Port.IntValue() != 8080 {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("service spec %+v", svc.Spec)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v || d.Spec.Selector.MatchLabels[k] != v {
			t.Errorf("selector %s=%s does not select the pods %v", k, v, d.Spec.Template.Labels)
		}
	}
	if svc.Name != E2EService || d.Namespace != "marina-e2e-abcde" {
		t.Errorf("names %s %s", svc.Name, d.Namespace)
	}
}

func TestE2ENamespaceName(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		ns, err := e2eNamespace()
		if err != nil {
			t.Fatal(err)
		}
		suffix, ok := strings.CutPrefix(ns, E2ENamespacePrefix)
		if !ok || len(suffix) != 5 || strings.Trim(suffix, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Fatalf("namespace %q: want %s<5 of [a-z0-9]>", ns, E2ENamespacePrefix)
		}
		seen[ns] = true
	}
	if len(seen) < 45 {
		t.Errorf("only %d distinct names in 50", len(seen))
	}
}

func TestClusterE2EArguments(t *testing.T) {
	l := &Lab{Config: config.Default()}
	c := &Clusters{Home: t.TempDir(), Slots: func(context.Context) (map[string]int, error) {
		t.Error("Slots called for invalid arguments")
		return nil, nil
	}}
	for _, tt := range []struct {
		name string
		opts E2EOptions
		want string
	}{
		{"Bad_Name", E2EOptions{}, "Bad_Name"},
		{"ok", E2EOptions{Timeout: -time.Second}, "must be positive"},
		{"ok", E2EOptions{Port: 70000}, "must be 1-65535"},
		{"ok", E2EOptions{Path: "healthz"}, "must start with /"},
	} {
		res, err := l.ClusterE2E(context.Background(), c, tt.name, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || res != nil {
			t.Errorf("%s %+v: %v, %v; want an error containing %q", tt.name, tt.opts, res, err, tt.want)
		}
	}
}

// TestClusterE2EUnknownCluster: no namespace is made for a cluster that
// does not exist, and the error says how to see the clusters.
func TestClusterE2EUnknownCluster(t *testing.T) {
	l := &Lab{Config: config.Default()}
	c := &Clusters{Home: t.TempDir(), Slots: func(context.Context) (map[string]int, error) { return map[string]int{"dev": 1}, nil }}
	res, err := l.ClusterE2E(context.Background(), c, "prod", E2EOptions{})
	if err == nil || !strings.Contains(err.Error(), "no cluster named prod (see marina cluster list") {
		t.Fatalf("err = %v", err)
	}
	if res == nil || res.Passed || res.Cleanup != "" || len(res.Checks) == 0 || res.Checks[0].Status != lifecycle.StatusFailed {
		t.Fatalf("result %+v", res)
	}
}

// e2eEnv is everything the tier-3 test runs once and shares between runs.
type e2eEnv struct {
	lab      *Lab
	clusters *Clusters
	cs       kubernetes.Interface
	kc       *kube.Client
	// kubelet is what the fake kubelet does (kubeletUp, ...).
	kubelet atomic.Int32
	// network is the test network's id.
	network string
}

func TestClusterE2E(t *testing.T) {
	env := e2eStartEnv(t)
	ctx := t.Context()

	t.Run("no VIP within the timeout", func(t *testing.T) {
		// The controller runs but no pool exists yet.
		res, err := env.lab.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: 4 * time.Second, Path: e2eHTTPPath})
		e2eWantErr(t, err, "no VIP within --timeout 4s", "is MetalLB's controller running?", "-n metallb-system get pods")
		env.checkDeleted(t, res)
		if res.VIP != "" || res.Passed {
			t.Errorf("result %+v", res)
		}
		e2eCheckStatuses(t, res, map[string]lifecycle.Status{"Wait for a LoadBalancer IP": lifecycle.StatusFailed, "GET the IP from this machine": lifecycle.StatusNotRun})
	})

	t.Run("no deployment controller", func(t *testing.T) {
		env.kubelet.Store(kubeletDown)
		defer env.kubelet.Store(kubeletUp)
		res, err := env.lab.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: 3 * time.Second, Path: e2eHTTPPath})
		e2eWantErr(t, err, "deployment "+res.Namespace+"/echo not available within --timeout 3s", "generation 1 not yet observed",
			"is kube-controller-manager running?", "-n kube-system get pods")
		env.checkDeleted(t, res)
	})

	t.Run("image cannot be pulled", func(t *testing.T) {
		env.kubelet.Store(kubeletPullFails)
		defer env.kubelet.Store(kubeletUp)
		res, err := env.lab.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: 3 * time.Second, Path: e2eHTTPPath, Image: "127.0.0.1:5999/nothing:v1"})
		e2eWantErr(t, err, "deployment "+res.Namespace+"/echo not available within --timeout 3s", "0 of 1 replicas available",
			"pod echo-test waiting: ImagePullBackOff Back-off pulling image", "the image cannot be pulled: check --image 127.0.0.1:5999/nothing:v1", "marina registry list")
		env.checkDeleted(t, res)
	})

	t.Run("VIP outside the slot's pool", func(t *testing.T) {
		stray := env.applyPool(t, "stray", "172.19.50.16-172.19.50.20")
		defer env.deletePool(t, stray)
		res, err := env.lab.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: 30 * time.Second, Path: e2eHTTPPath})
		e2eWantErr(t, err, "VIP 172.19.50.16 of service "+res.Namespace+"/echo is outside cluster e2e's MetalLB pool 172.19.3.1-172.19.3.7, 172.19.3.16-172.19.3.254 (slot 3)",
			"get ipaddresspools -A", "keep only marina-slot-3")
		env.checkDeleted(t, res)
		if res.VIP != "172.19.50.16" {
			t.Errorf("VIP %q, want 172.19.50.16 (MetalLB's first address of the stray pool)", res.VIP)
		}
	})

	// From here on the slot's pool exists, as the metallb plugin applies it,
	// and HTTP servers stand where the Service's addresses would answer.
	env.applyPool(t, "marina-slot-3", "172.19.3.1-172.19.3.7", "172.19.3.16-172.19.3.254")
	for _, ip := range []string{"172.19.3.1", "172.19.3.2"} {
		e2eStartHTTPServer(t, env.network, ip)
	}

	t.Run("passes and cleans up", func(t *testing.T) {
		var buf bytes.Buffer
		r, err := lifecycle.NewRenderer(&buf, lifecycle.FormatPlain, false)
		if err != nil {
			t.Fatal(err)
		}
		res, err := env.lab.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: 2 * time.Minute, Path: e2eHTTPPath, Renderer: r})
		r.Close()
		t.Logf("progress:\n%s", buf.String())
		if err != nil {
			t.Fatalf("e2e failed: %v", err)
		}
		if !res.Passed || res.Kept || res.Cleanup != "deleted" {
			t.Errorf("result %+v", res)
		}
		if res.VIP != "172.19.3.1" && res.VIP != "172.19.3.2" {
			t.Errorf("VIP %s, want the slot pool's first address", res.VIP)
		}
		wantName := "echo." + res.Namespace + ".e2e." + e2eZone
		if res.DNSName != wantName || res.NameURL != "http://"+wantName+e2eHTTPPath || res.URL != "http://"+res.VIP+e2eHTTPPath {
			t.Errorf("name %s, urls %s %s", res.DNSName, res.URL, res.NameURL)
		}
		for _, c := range res.Checks {
			if c.Status != lifecycle.StatusDone {
				t.Errorf("check %q: %s %s", c.Name, c.Status, c.Error)
			}
		}
		if len(res.Checks) != 9 {
			t.Errorf("%d checks, want 9: %+v", len(res.Checks), res.Checks)
		}
		for _, line := range []string{
			"Resolve " + wantName + " via " + e2eDNSIP,
			wantName + " -> " + res.VIP,
			"Delete namespace " + res.Namespace,
		} {
			if !strings.Contains(buf.String(), line) {
				t.Errorf("progress lacks %q", line)
			}
		}
		env.checkDeleted(t, res)
	})

	t.Run("DNS checks skipped without externaldns", func(t *testing.T) {
		cfg := *env.lab.Config
		cfg.Plugins = map[string]config.PluginConfig{}
		for k, v := range env.lab.Config.Plugins {
			cfg.Plugins[k] = v
		}
		cfg.Plugins["externaldns"] = config.PluginConfig{Enabled: false}
		lb := &Lab{Config: &cfg}
		res, err := lb.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: time.Minute, Path: e2eHTTPPath})
		if err != nil {
			t.Fatalf("e2e failed: %v", err)
		}
		if !res.Passed || len(res.Checks) != 7 || res.DNSSkipped != "plugin externaldns is disabled, so the cluster's Services get no DNS name" || res.NameURL != "" {
			t.Errorf("result %+v", res)
		}
		env.checkDeleted(t, res)
	})

	t.Run("keep leaves the workload", func(t *testing.T) {
		res, err := env.lab.ClusterE2E(ctx, env.clusters, e2eCluster, E2EOptions{Timeout: 2 * time.Minute, Path: e2eHTTPPath, Keep: true})
		if err != nil {
			t.Fatalf("e2e failed: %v", err)
		}
		ns, err := env.cs.CoreV1().Namespaces().Get(ctx, res.Namespace, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp != nil {
			t.Fatalf("namespace %s after --keep: %v, deleting=%v", res.Namespace, err, err == nil && ns.DeletionTimestamp != nil)
		}
		if _, err := env.cs.CoreV1().Services(res.Namespace).Get(ctx, E2EService, metav1.GetOptions{}); err != nil {
			t.Errorf("service after --keep: %v", err)
		}
		kubePath := slot.KubeconfigPath(env.clusters.Home, e2eCluster)
		if !res.Kept || res.Cleanup != "kept" || res.Delete != "kubectl --kubeconfig "+kubePath+" delete namespace "+res.Namespace {
			t.Errorf("result %+v", res)
		}
		if len(res.Reach) != 3 || res.Reach[0] != "curl "+res.URL || !strings.HasPrefix(res.Reach[1], "curl http://"+res.DNSName+e2eHTTPPath) {
			t.Errorf("reach %q", res.Reach)
		}
		env.finishDeletion(t, res.Namespace)
	})

	t.Run("cancelled run still cleans up", func(t *testing.T) {
		env.kubelet.Store(kubeletDown)
		defer env.kubelet.Store(kubeletUp)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Ctrl-C once the workload exists (the run then waits for the
		// Deployment, which no kubelet makes available).
		go func() {
			for cctx.Err() == nil {
				list, err := env.cs.CoreV1().Services("").List(cctx, metav1.ListOptions{LabelSelector: LabelE2E + "=true"})
				if err == nil {
					for _, svc := range list.Items {
						if ns, err := env.cs.CoreV1().Namespaces().Get(cctx, svc.Namespace, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil {
							cancel()
							return
						}
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		start := time.Now()
		res, err := env.lab.ClusterE2E(cctx, env.clusters, e2eCluster, E2EOptions{Timeout: time.Minute, Path: e2eHTTPPath})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		var ie *lifecycle.InterruptedError
		// The cancellation lands in the wait, or between the deploy and
		// the wait when it comes as the Service's create returns.
		if !errors.As(err, &ie) || (ie.Step != "Wait for deployment echo to be available" && ie.Step != "") {
			t.Errorf("err = %v, want an interruption at the availability wait", err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("cancelled run took %v", took)
		}
		env.checkDeleted(t, res)
	})
}

// e2eWantErr fails unless err contains every part.
func e2eWantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error lacks %q:\n%v", p, err)
		}
	}
}

func e2eCheckStatuses(t *testing.T, res *E2EResult, want map[string]lifecycle.Status) {
	t.Helper()
	for _, c := range res.Checks {
		if s, ok := want[c.Name]; ok && s != c.Status {
			t.Errorf("check %q: %s, want %s", c.Name, c.Status, s)
		}
		delete(want, c.Name)
	}
	for n := range want {
		t.Errorf("no check %q in %+v", n, res.Checks)
	}
}

// checkDeleted checks the run deleted its namespace (the API server alone
// leaves it Terminating: there is no namespace controller) and then plays
// the namespace controller, so MetalLB frees the VIP.
func (e *e2eEnv) checkDeleted(t *testing.T, res *E2EResult) {
	t.Helper()
	if res == nil || res.Namespace == "" {
		t.Fatalf("no namespace in result %+v", res)
	}
	ctx := t.Context()
	ns, err := e.cs.CoreV1().Namespaces().Get(ctx, res.Namespace, metav1.GetOptions{})
	switch {
	case err != nil:
		// NotFound too: without a namespace controller a deleted namespace
		// stays Terminating, so this one was never made.
		t.Fatalf("namespace %s: %v", res.Namespace, err)
	case ns.DeletionTimestamp == nil:
		t.Errorf("namespace %s was not deleted", res.Namespace)
	}
	if res.Kept || res.Cleanup != "deleted" {
		t.Errorf("cleanup %q kept=%v, want deleted", res.Cleanup, res.Kept)
	}
	e.finishDeletion(t, res.Namespace)
}

// finishDeletion does what the namespace controller would: deletes what
// the namespace holds, then finalizes it.
func (e *e2eEnv) finishDeletion(t *testing.T, name string) {
	t.Helper()
	ctx := t.Context()
	if err := e.cs.CoreV1().Services(name).Delete(ctx, E2EService, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := e.cs.AppsV1().Deployments(name).Delete(ctx, E2EService, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := e.cs.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := e.cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if ns.DeletionTimestamp == nil {
		if err := e.cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if ns, err = e.cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns.Spec.Finalizers = nil
	if _, err := e.cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("finalize namespace %s: %v", name, err)
	}
}

// e2eStartEnv starts the API server, the DNS pair, MetalLB's controller,
// ExternalDNS and the fake kubelet, and returns the lab and clusters that
// point at them.
func e2eStartEnv(t *testing.T) *e2eEnv {
	t.Helper()
	etcdImg, dnsImg := dockertest.Image(t, "etcd"), dockertest.Image(t, "coredns")
	metallbPath, externalDNSPath := kubetest.MetalLBControllerPath(t), kubetest.ExternalDNSPath(t)
	network := dockertest.Network(t, e2eSubnet)
	kc := kubetest.Start(t)
	ctx := t.Context()

	// The lab: the config with the test network as the bridge.
	cfg := config.Default()
	cfg.Network.BridgeCIDR = e2eSubnet
	cfg.DNS.EtcdIP, cfg.DNS.ServerIP, cfg.DNS.Zone = e2eEtcdIP, e2eDNSIP, e2eZone
	home := t.TempDir()
	kubePath := slot.KubeconfigPath(home, e2eCluster)
	if err := os.MkdirAll(filepath.Dir(kubePath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubePath, kc.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	env := &e2eEnv{
		lab: &Lab{Config: cfg},
		clusters: &Clusters{Home: home, Slots: func(context.Context) (map[string]int, error) {
			return map[string]int{e2eCluster: e2eSlot, "other": 4}, nil
		}},
		cs:      kc.Clientset(t),
		network: network.ID,
	}
	var err error
	if env.kc, err = kube.Connect(kc.Kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The lab's DNS pair, as the localdns plugin runs it.
	dockertest.Run(t, "--network", network.ID, "--ip", e2eEtcdIP, etcdImg,
		"--name", "marina-e2e-test",
		"--listen-client-urls", "http://0.0.0.0:2379",
		"--advertise-client-urls", "http://"+e2eEtcdIP+":2379",
		"--unsafe-no-fsync")
	corefile, err := os.ReadFile("../../plugins/localdns/testdata/default.Corefile")
	if err != nil {
		t.Fatal(err)
	}
	corefile = bytes.ReplaceAll(corefile, []byte("172.30.255.52"), []byte(e2eEtcdIP))
	if !bytes.Contains(corefile, []byte(e2eEtcdIP)) {
		t.Fatalf("localdns's golden Corefile names no etcd at 172.30.255.52:\n%s", corefile)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Corefile"), corefile, 0o644); err != nil {
		t.Fatal(err)
	}
	dockertest.Run(t, "--network", network.ID, "--ip", e2eDNSIP, "-v", dir+":/etc/coredns:ro", dnsImg, "-conf", "/etc/coredns/Corefile")
	e2eWaitHTTP(t, "CoreDNS ready", "http://"+e2eDNSIP+":8181/ready", nil)

	// MetalLB: its CRDs and namespace from the plugin's pinned manifest, and
	// its real controller (no webhook: nothing could call it here).
	manifest, err := os.ReadFile("../../plugins/metallb/manifests/metallb-native-v0.16.2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kube.DecodeManifests(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
			crds = append(crds, o)
		}
	}
	if len(crds) < 5 {
		t.Fatalf("only %d CRDs and namespaces in MetalLB's manifest", len(crds))
	}
	if err := env.kc.Apply(ctx, "marina-e2e-test", crds...); err != nil {
		t.Fatal(err)
	}
	// The controller reads its own Pod (owner of the objects it creates).
	const podName = "controller-e2e-test"
	automount := false
	if _, err := env.cs.CoreV1().ServiceAccounts(e2eMetalLBNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "controller"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.cs.CoreV1().Pods(e2eMetalLBNS).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{"app": "metallb", "component": "controller"}},
		Spec: corev1.PodSpec{ServiceAccountName: "controller", AutomountServiceAccountToken: &automount,
			Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller:v0.16.2"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	health := e2eFreePort(t)
	mlb := e2eStartProcess(t, "metallb-controller", metallbPath, nil,
		"--kubeconfig="+kc.KubeconfigPath, "--namespace="+e2eMetalLBNS, "--pod-name="+podName, "--webhook-mode=disabled",
		"--disable-cert-rotation", "--port=0", "--health-probe-port="+strconv.Itoa(health), "--log-level=info")
	e2eWaitHTTP(t, "MetalLB controller ready", "http://127.0.0.1:"+strconv.Itoa(health)+"/readyz", mlb)

	// ExternalDNS with the flags the externaldns plugin gives it (its
	// README), a short interval for the test.
	metrics := e2eFreePort(t)
	xdns := e2eStartProcess(t, "external-dns", externalDNSPath, []string{"ETCD_URLS=http://" + e2eEtcdIP + ":2379"},
		"--kubeconfig="+kc.KubeconfigPath,
		"--provider=coredns", "--source=service", "--service-type-filter=LoadBalancer",
		"--domain-filter="+e2eZone, "--fqdn-template={{.Name}}.{{.Namespace}}."+e2eCluster+"."+e2eZone,
		"--registry=txt", "--txt-owner-id="+e2eCluster, "--coredns-prefix=/skydns/", "--coredns-strictly-owned",
		"--policy=sync", "--events", "--interval=2s", "--min-event-sync-interval=1s",
		"--metrics-address=127.0.0.1:"+strconv.Itoa(metrics))
	e2eWaitHTTP(t, "ExternalDNS healthy", "http://127.0.0.1:"+strconv.Itoa(metrics)+"/healthz", xdns)

	go env.fakeKubelet(ctx)
	return env
}

// What the fake kubelet does.
const (
	// kubeletUp: e2e Deployments become available at once.
	kubeletUp int32 = iota
	// kubeletDown: nothing happens (no controller-manager, no kubelet).
	kubeletDown
	// kubeletPullFails: the Deployment is observed and its pod cannot pull
	// its image.
	kubeletPullFails
)

// fakeKubelet plays the kubelet, the deployment controller and the
// service account controller for e2e Deployments, as e.kubelet says.
func (e *e2eEnv) fakeKubelet(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		mode := e.kubelet.Load()
		if mode == kubeletDown {
			continue
		}
		list, err := e.cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: LabelE2E + "=true"})
		if err != nil {
			continue
		}
		for _, d := range list.Items {
			if d.Status.ObservedGeneration == d.Generation {
				continue
			}
			cond := appsv1.DeploymentCondition{
				Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
			if mode == kubeletPullFails {
				e.failingPod(ctx, &d)
				cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
				d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 0, 0, 1
			}
			d.Status.Conditions = []appsv1.DeploymentCondition{cond}
			_, _ = e.cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
		}
	}
}

// failingPod creates the pod of d as one whose image cannot be pulled.
func (e *e2eEnv) failingPod(ctx context.Context, d *appsv1.Deployment) {
	_, _ = e.cs.CoreV1().ServiceAccounts(d.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo-test", Namespace: d.Namespace, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	pod, err := e.cs.CoreV1().Pods(d.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return
	}
	c := pod.Spec.Containers[0]
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: "Back-off pulling image \"" + c.Image + "\"",
		}}}},
	}
	_, _ = e.cs.CoreV1().Pods(d.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// applyPool applies an IPAddressPool in metallb-system and returns it.
func (e *e2eEnv) applyPool(t *testing.T, name string, ranges ...string) *unstructured.Unstructured {
	t.Helper()
	var addrs []any
	for _, r := range ranges {
		addrs = append(addrs, r)
	}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": name, "namespace": e2eMetalLBNS},
		"spec":     map[string]any{"addresses": addrs},
	}}
	if err := e.kc.Apply(t.Context(), "marina-e2e-test", pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

func (e *e2eEnv) deletePool(t *testing.T, pool *unstructured.Unstructured) {
	t.Helper()
	ri, err := e.kc.Resource(pool.GroupVersionKind(), e2eMetalLBNS)
	if err != nil {
		t.Fatal(err)
	}
	if err := ri.Delete(t.Context(), pool.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// e2eStartHTTPServer runs the registry image (an HTTP server answering 200 on
// /v2/) at ip:80 on the test network, where the Service would answer.
func e2eStartHTTPServer(t *testing.T, network, ip string) {
	t.Helper()
	dockertest.Run(t, "--network", network, "--ip", ip, "-e", "REGISTRY_HTTP_ADDR=0.0.0.0:80", dockertest.Image(t, "registry"))
	e2eWaitHTTP(t, "HTTP server at "+ip, "http://"+ip+e2eHTTPPath, nil)
}

// e2eProc is a controller the test runs as a process.
type e2eProc struct {
	name string
	log  string
	done chan struct{}
	err  error
}

// e2eStartProcess runs path in its own process group (killed with the test
// process, by Pdeathsig), its output in a file; at cleanup it is stopped
// (SIGTERM, then SIGKILL) and the test fails if the group survives.
func e2eStartProcess(t *testing.T, name, path string, env []string, args ...string) *e2eProc {
	t.Helper()
	dir := t.TempDir()
	p := &e2eProc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	pgid := cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log tail:\n%s", name, e2eLogTail(p.log, 40))
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s (pid %d) did not exit after SIGKILL", name, pgid)
			}
		}
		if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d of %s survived its cleanup (kill 0: %v)", pgid, name, err)
		}
	})
	return p
}

func e2eLogTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// e2eWaitHTTP waits (bounded) until u answers 200; p, when set, must not exit
// meanwhile.
func e2eWaitHTTP(t *testing.T, what, u string, p *e2eProc) {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if p != nil {
			select {
			case <-p.done:
				t.Fatalf("%s: %s exited (%v):\n%s", what, p.name, p.err, e2eLogTail(p.log, 40))
			default:
			}
		}
		resp, err := client.Get(u)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	msg := ""
	if p != nil {
		msg = "\n" + e2eLogTail(p.log, 40)
	}
	t.Fatalf("%s: not ready after 60s: %v%s", what, last, msg)
}

func e2eFreePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The default image's --http-port argument is spelled as a constant (no
// work at init); it must stay the default port.
func TestDefaultE2EPortString(t *testing.T) {
	if want := strconv.Itoa(DefaultE2EPort); defaultE2EPortString != want {
		t.Fatalf("defaultE2EPortString = %q, want %q (DefaultE2EPort)", defaultE2EPortString, want)
	}
}
