package externaldns

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestAvailable: the readiness rule over Deployment statuses (tier 0).
func TestAvailable(t *testing.T) {
	cond := func(s corev1.ConditionStatus) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: s, Reason: "MinimumReplicasAvailable"}}
	}
	tests := []struct {
		name   string
		d      appsv1.Deployment
		want   bool
		reason string
	}{
		{"rolled out", appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: cond(corev1.ConditionTrue)},
		}, true, ""},
		{"new spec not observed", appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: cond(corev1.ConditionTrue)},
		}, false, "not seen the latest spec"},
		{"old replica still serving", appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 0, AvailableReplicas: 1, Conditions: cond(corev1.ConditionTrue)},
		}, false, "0 of 1 replicas updated"},
		{"pulling", appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, UpdatedReplicas: 1, Conditions: cond(corev1.ConditionFalse)},
		}, false, "0 of 1 replicas available"},
		{"fresh", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}}, false, "not seen the latest spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := available(&tt.d)
			if got != tt.want || !strings.Contains(why, tt.reason) {
				t.Fatalf("available = %v, %q; want %v, %q", got, why, tt.want, tt.reason)
			}
		})
	}
}

// resourceVersions returns the resourceVersion of every object PostCluster applies.
func resourceVersions(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	rv := map[string]string{}
	get := func(kind string, obj metav1.Object, err error) {
		if err != nil {
			t.Fatalf("get %s: %v", kind, err)
		}
		rv[kind] = obj.GetResourceVersion()
		if obj.GetLabels()["app.kubernetes.io/managed-by"] != "marina" {
			t.Errorf("%s lacks the managed-by label: %v", kind, obj.GetLabels())
		}
		var managers []string
		for _, m := range obj.GetManagedFields() {
			managers = append(managers, m.Manager+"/"+string(m.Operation))
		}
		if !slices.Contains(managers, FieldManager+"/Apply") {
			t.Errorf("%s is not server-side applied by %s: managers %v", kind, FieldManager, managers)
		}
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	get("Namespace", ns, err)
	sa, err := cs.CoreV1().ServiceAccounts(Namespace).Get(ctx, AppName, metav1.GetOptions{})
	get("ServiceAccount", sa, err)
	cr, err := cs.RbacV1().ClusterRoles().Get(ctx, AppName, metav1.GetOptions{})
	get("ClusterRole", cr, err)
	crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, AppName, metav1.GetOptions{})
	get("ClusterRoleBinding", crb, err)
	d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, AppName, metav1.GetOptions{})
	get("Deployment", d, err)
	return rv
}

// TestHooksRealAPIServer applies ExternalDNS to a real kube-apiserver (tier 3)
// through the plugin harness, reads every object back, checks that a re-run
// changes nothing (same resourceVersions), that a config change and a
// foreign edit converge to what marina renders, that waitReady fails with a
// useful message when the Deployment never becomes Available (no controllers
// run here), and that PreClusterDelete stops ExternalDNS and cleans records
// in a real etcd (the API server's own, under /skydns/).
func TestHooksRealAPIServer(t *testing.T) {
	c := kubetest.Start(t)
	cs := c.Clientset(t)
	ctx := context.Background()
	h := plugintest.New(t, New())
	deps := plugintest.WithDeps(map[string]map[string]string{LocalDNS: {LocalDNSEtcdOutput: c.EtcdURL}})
	cluster := plugintest.WithCluster(func(cl *sdk.Cluster) { cl.Kubeconfig = c.Kubeconfig })
	noWait := plugintest.WithConfig(`{"waitReady":false}`)

	res, err := h.Run(sdk.PostCluster, noWait, deps, cluster)
	if err != nil {
		t.Fatalf("PostCluster: %v", err)
	}
	if res.Outputs[OutputNamespace] != Namespace || res.Outputs[OutputDomain] != "dev.demo.internal" {
		t.Errorf("outputs = %v", res.Outputs)
	}
	first := resourceVersions(t, cs)

	d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, AppName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--txt-owner-id=dev") || ctr.Env[0].Value != c.EtcdURL || ctr.Image != DefaultImage {
		t.Fatalf("stored deployment: args %q env %v image %s", ctr.Args, ctr.Env, ctr.Image)
	}

	// A re-run converges: same result, and the server changed nothing.
	h.RequireIdempotent(t, sdk.PostCluster, noWait, deps, cluster)
	if again := resourceVersions(t, cs); !maps.Equal(first, again) {
		t.Fatalf("re-run changed objects: resourceVersions %v -> %v", first, again)
	}

	// A config change reaches the Deployment, and only the Deployment.
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"waitReady":false,"interval":"30s"}`), deps, cluster); err != nil {
		t.Fatalf("PostCluster with a new interval: %v", err)
	}
	changed := resourceVersions(t, cs)
	for kind := range first {
		if (first[kind] != changed[kind]) != (kind == "Deployment") {
			t.Errorf("%s resourceVersion %s -> %s after an interval change", kind, first[kind], changed[kind])
		}
	}
	d, _ = cs.AppsV1().Deployments(Namespace).Get(ctx, AppName, metav1.GetOptions{})
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--interval=30s") {
		t.Errorf("args after the change: %q", d.Spec.Template.Spec.Containers[0].Args)
	}

	// Someone edits the image by hand: the next run puts marina's back.
	d.Spec.Template.Spec.Containers[0].Image = "example.test/other:1"
	if _, err := cs.AppsV1().Deployments(Namespace).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(sdk.PostCluster, noWait, deps, cluster); err != nil {
		t.Fatalf("PostCluster after a foreign edit: %v", err)
	}
	d, _ = cs.AppsV1().Deployments(Namespace).Get(ctx, AppName, metav1.GetOptions{})
	if got := d.Spec.Template.Spec.Containers[0].Image; got != DefaultImage {
		t.Errorf("image after re-run = %s, want %s", got, DefaultImage)
	}

	// waitReady: no controller runs here, so the Deployment never becomes
	// Available; the wait is bounded and says what is wrong.
	start := time.Now()
	_, err = h.Run(sdk.PostCluster, plugintest.WithConfig(`{"readyTimeout":"3s"}`), deps, cluster)
	if err == nil {
		t.Fatal("PostCluster with waitReady succeeded, but nothing can make the Deployment Available here")
	}
	for _, s := range []string{"not Available after 3s", "no ExternalDNS pod exists", "waitReady=false"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("a 3s readyTimeout took %s", took)
	}

	// PreClusterDelete: records in a real etcd, ExternalDNS stopped first.
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{c.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	n := 0
	recs := append(etcdWriter{owner: "dev", strict: true, next: &n}.publish("web.default.dev.demo.internal", "service/default/web", "172.30.1.16"),
		etcdWriter{owner: "prod", strict: true, next: &n}.publish("web.default.prod.demo.internal", "service/default/web", "172.30.2.16")...)
	for _, r := range recs {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := etcd.Put(pctx, r.Key, string(r.Value))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err = h.Run(sdk.PreClusterDelete, deps, cluster)
	if err != nil {
		t.Fatalf("PreClusterDelete: %v", err)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %+v", res.Warnings)
	}
	// Without a garbage collector the foreground deletion stays pending: the
	// Deployment is gone or marked for deletion.
	d, err = cs.AppsV1().Deployments(Namespace).Get(ctx, AppName, metav1.GetOptions{})
	if err == nil && d.DeletionTimestamp == nil {
		t.Errorf("deployment not deleted by PreClusterDelete")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	left, err := etcd.Get(gctx, EtcdPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range left.Kvs {
		keys = append(keys, string(k.Key))
	}
	want := []string{recs[2].Key, recs[3].Key}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys left = %q, want prod's %q", keys, want)
	}
}
