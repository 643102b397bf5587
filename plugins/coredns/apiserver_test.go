package coredns

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
	"github.com/bcollard/marina/test/kubetest"
)

// TestPostClusterAPIServer is tier 3: the hook runs (through plugintest's
// gRPC harness) against a real kube-apiserver holding the objects kubeadm
// creates for CoreDNS. The first run edits the Corefile and restarts the
// Deployment, waiting for a stand-in Deployment controller to report the
// rollout; the second run changes nothing: same ConfigMap resourceVersion,
// same Deployment generation and resourceVersion.
func TestPostClusterAPIServer(t *testing.T) {
	c := kubetest.Start(t)
	cs := c.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := cs.CoreV1().ConfigMaps(Namespace).Create(ctx, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := cs.AppsV1().Deployments(Namespace).Create(ctx, kubeadmDeployment(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rolledOut := fakeDeploymentController(ctx, t, cs)

	h := plugintest.New(t, New())
	run := func() {
		t.Helper()
		_, err := h.Run(sdk.PostCluster,
			plugintest.WithConfig(`{"rolloutTimeout": "60s"}`),
			plugintest.WithEnv(withCustomDomains),
			plugintest.WithCluster(func(cl *sdk.Cluster) { cl.Kubeconfig = c.Kubeconfig }))
		if err != nil {
			t.Fatal(err)
		}
	}

	run()
	cm, err := cs.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cm.Data[CorefileKey], testdata(t, "golden/kind-kubeadm-1.34"); got != want {
		t.Fatalf("Corefile:\n%s\nwant (corefile/testdata/golden/kind-kubeadm-1.34.Corefile):\n%s", got, want)
	}
	d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restartedAt, err := time.Parse(time.RFC3339, d.Spec.Template.Annotations[RestartedAtAnnotation])
	if err != nil || time.Since(restartedAt) > time.Hour {
		t.Fatalf("pod template %s = %q (%v), want the restart time", RestartedAtAnnotation, d.Spec.Template.Annotations[RestartedAtAnnotation], err)
	}
	if d.Spec.Template.Annotations[CorefileHashAnnotation] != cm.Annotations[CorefileHashAnnotation] || cm.Annotations[CorefileHashAnnotation] == "" {
		t.Errorf("restart hash %q, ConfigMap hash %q: want them equal", d.Spec.Template.Annotations[CorefileHashAnnotation], cm.Annotations[CorefileHashAnnotation])
	}
	if d.Generation != created.Generation+1 {
		t.Errorf("generation %d -> %d, want one restart", created.Generation, d.Generation)
	}
	if got := rolledOut.Load(); got < d.Generation {
		t.Errorf("the hook returned before the rollout of generation %d was reported (controller reported %d): it did not wait", d.Generation, got)
	}

	run()
	cm2, err := cs.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := cs.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm2.ResourceVersion != cm.ResourceVersion {
		t.Errorf("second run changed the ConfigMap: resourceVersion %s -> %s", cm.ResourceVersion, cm2.ResourceVersion)
	}
	if d2.Generation != d.Generation || d2.ResourceVersion != d.ResourceVersion {
		t.Errorf("second run changed the Deployment: generation %d -> %d, resourceVersion %s -> %s", d.Generation, d2.Generation, d.ResourceVersion, d2.ResourceVersion)
	}
}

// fakeDeploymentController stands in for kube-controller-manager, which
// kubetest does not run: when the CoreDNS Deployment's generation moves
// ahead of its status, it waits a little (so a hook that does not wait
// would return first) and then reports the rollout complete. It returns
// the last generation it reported; it stops with ctx or the test.
func fakeDeploymentController(ctx context.Context, t *testing.T, cs kubernetes.Interface) *atomic.Int64 {
	var reported atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration >= d.Generation {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			replicas := *d.Spec.Replicas
			d.Status = appsv1.DeploymentStatus{
				ObservedGeneration: d.Generation,
				Replicas:           replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			}
			if _, err := cs.AppsV1().Deployments(Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err == nil {
				reported.Store(d.Generation)
			}
		}
	}()
	return &reported
}
