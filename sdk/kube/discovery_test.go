package kube_test

// Tier 3: the discovery REST mapper and Typed against a real
// kube-apiserver, checked against client-go's own discovery mapper and
// typed clientset (which the package itself does not link).

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/kubetest"
)

// gadgetCRD serves kind Gadget in two versions; v1 is the preferred one.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.marina.dev, labels: {app.kubernetes.io/managed-by: kube-test}}
spec:
  group: example.marina.dev
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Cluster
  versions:
  - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
`

// requestLog records the paths of discovery requests made through a config,
// optionally asking the server for unaggregated discovery only (as an API
// server without aggregated discovery would answer).
type requestLog struct {
	mu     sync.Mutex
	paths  []string
	legacy bool
}

func (l *requestLog) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if l.legacy {
				r = r.Clone(r.Context())
				r.Header.Set("Accept", "application/json")
			}
			l.mu.Lock()
			l.paths = append(l.paths, r.URL.Path)
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.paths
	l.paths = nil
	return p
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// outcome is what one mapper question returned, comparable across mappers.
func outcome(v any, err error) string {
	if err != nil {
		return fmt.Sprintf("error (no match: %v)", meta.IsNoMatchError(err))
	}
	if ms, ok := v.([]*meta.RESTMapping); ok {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%+v", *m))
		}
		return strings.Join(out, ", ")
	}
	return fmt.Sprintf("%+v", v)
}

func TestDiscoveryRESTMapper(t *testing.T) {
	kc := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := kube.Connect(kc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, "kube-test", decode(t, gadgetCRD)...); err != nil {
		t.Fatal(err)
	}

	aggLog, legacyLog := &requestLog{}, &requestLog{legacy: true}
	aggregated, err := kube.NewDiscoveryRESTMapper(aggLog.config(kc.Config))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := kube.NewDiscoveryRESTMapper(legacyLog.config(kc.Config))
	if err != nil {
		t.Fatal(err)
	}
	want := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(kc.Config)))

	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	gadget := schema.GroupKind{Group: "example.marina.dev", Kind: "Gadget"}
	questions := []struct {
		name string
		ask  func(meta.RESTMapper) string
	}{
		{"ConfigMap v1", func(m meta.RESTMapper) string {
			return outcome(m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"))
		}},
		{"Deployment, no version", func(m meta.RESTMapper) string { return outcome(m.RESTMapping(deploy)) }},
		{"Deployment apps/v1beta1 (not served)", func(m meta.RESTMapper) string { return outcome(m.RESTMapping(deploy, "v1beta1")) }},
		{"Namespace is cluster-scoped", func(m meta.RESTMapper) string {
			r, err := m.RESTMapping(schema.GroupKind{Kind: "Namespace"}, "v1")
			if err != nil {
				return outcome(nil, err)
			}
			return string(r.Scope.Name())
		}},
		{"Gadget, preferred version", func(m meta.RESTMapper) string { return outcome(m.RESTMapping(gadget)) }},
		{"Gadget v1beta1", func(m meta.RESTMapper) string { return outcome(m.RESTMapping(gadget, "v1beta1")) }},
		{"Gadget, all versions", func(m meta.RESTMapper) string { return outcome(m.RESTMappings(gadget)) }},
		{"unknown kind", func(m meta.RESTMapper) string {
			return outcome(m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}, "v1"))
		}},
		{"KindFor deployments", func(m meta.RESTMapper) string {
			return outcome(m.KindFor(schema.GroupVersionResource{Resource: "deployments"}))
		}},
		{"KindsFor gadgets", func(m meta.RESTMapper) string {
			return outcome(m.KindsFor(schema.GroupVersionResource{Resource: "gadgets"}))
		}},
		{"ResourceFor singular pod", func(m meta.RESTMapper) string {
			return outcome(m.ResourceFor(schema.GroupVersionResource{Resource: "pod"}))
		}},
		{"ResourcesFor gadget", func(m meta.RESTMapper) string {
			return outcome(m.ResourcesFor(schema.GroupVersionResource{Resource: "gadget"}))
		}},
		{"ResourceSingularizer", func(m meta.RESTMapper) string { return outcome(m.ResourceSingularizer("ingresses")) }},
	}
	for _, q := range questions {
		w := q.ask(want)
		if got := q.ask(aggregated); got != w {
			t.Errorf("%s: aggregated discovery says %s, client-go %s", q.name, got, w)
		}
		if got := q.ask(legacy); got != w {
			t.Errorf("%s: unaggregated discovery says %s, client-go %s", q.name, got, w)
		}
	}

	// Discovery is read once, and (aggregated) in two requests.
	if got := aggLog.take(); !reflect.DeepEqual(got, []string{"/api", "/apis"}) {
		t.Errorf("aggregated discovery requests = %v, want /api and /apis once", got)
	}
	got := legacyLog.take()
	if len(got) < 4 || got[0] != "/api" || !contains(got, "/apis") || !contains(got, "/api/v1") || !contains(got, "/apis/example.marina.dev/v1beta1") {
		t.Errorf("unaggregated discovery requests = %v, want /api, /apis, then each group-version", got)
	}

	// A kind created after discovery was read is unknown until Reset.
	sprocket := strings.NewReplacer("gadget", "sprocket", "Gadget", "Sprocket").Replace(gadgetCRD)
	if err := c.Apply(ctx, "kube-test", decode(t, sprocket)...); err != nil {
		t.Fatal(err)
	}
	sk := schema.GroupKind{Group: "example.marina.dev", Kind: "Sprocket"}
	if _, err := aggregated.RESTMapping(sk, "v1"); !meta.IsNoMatchError(err) {
		t.Errorf("a kind created after discovery was read: %v, want no match before Reset", err)
	}
	aggregated.Reset()
	if m, err := aggregated.RESTMapping(sk, "v1"); err != nil || m.Resource.Resource != "sprockets" || m.Scope.Name() != meta.RESTScopeNameRoot {
		t.Errorf("after Reset: %+v, %v", m, err)
	}
	if got := aggLog.take(); !reflect.DeepEqual(got, []string{"/api", "/apis"}) {
		t.Errorf("requests = %v, want discovery read once more after Reset", got)
	}

	// A server that cannot be reached is an error, not "no match".
	down := rest.CopyConfig(kc.Config)
	down.Host = "https://127.0.0.1:1"
	dm, err := kube.NewDiscoveryRESTMapper(down)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dm.RESTMapping(deploy, "v1"); err == nil || meta.IsNoMatchError(err) || !strings.Contains(err.Error(), "/api") {
		t.Errorf("unreachable server: %v", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestTyped(t *testing.T) {
	kc := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kube.Connect(kc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kc.Clientset(t)
	cms := kube.NewTyped[corev1.ConfigMap](c.Dynamic, kube.ConfigMaps, "default")

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "typed", Labels: map[string]string{"a": "1"}},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{FieldManager: "kube-test"})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Data["k"] != "v" {
		t.Errorf("Create returned %+v", created)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "typed"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create: %v, want AlreadyExists", err)
	}
	read, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "typed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if read.UID != created.UID || read.Labels["a"] != "1" || read.ManagedFields[0].Manager != "kube-test" {
		t.Errorf("the clientset reads %+v", read)
	}

	// Typed fills in TypeMeta (the typed clientset leaves it empty);
	// everything else is what the clientset reads.
	got, err := cms.Get(ctx, "typed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "v1" || got.Kind != "ConfigMap" {
		t.Errorf("Get: TypeMeta %+v", got.TypeMeta)
	}
	if got.TypeMeta = read.TypeMeta; !reflect.DeepEqual(got, read) {
		t.Fatalf("Get = %+v; the clientset reads %+v", got, read)
	}
	stale := got.DeepCopy()
	got.Data["k"] = "w"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || updated.Data["k"] != "w" || updated.ResourceVersion == stale.ResourceVersion {
		t.Fatalf("Update = %+v, %v", updated, err)
	}
	stale.Data["k"] = "x"
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion: %v, want a conflict", err)
	}
	patched, err := cms.Patch(ctx, "typed", types.MergePatchType, []byte(`{"data":{"p":"q"}}`), metav1.PatchOptions{})
	if err != nil || patched.Data["p"] != "q" || patched.Data["k"] != "w" {
		t.Errorf("Patch = %+v, %v", patched, err)
	}
	list, err := kube.NewTyped[corev1.ConfigMap](c.Dynamic, kube.ConfigMaps, "").List(ctx, metav1.ListOptions{LabelSelector: "a=1"})
	if err != nil || len(list) != 1 || list[0].Namespace != "default" || list[0].Name != "typed" {
		t.Errorf("List across namespaces = %+v, %v", list, err)
	}
	if err := cms.Delete(ctx, "typed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "typed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}

	// A Deployment: nested types (quantities, int-or-string) and status.
	deployments := kube.NewTyped[appsv1.Deployment](c.Dynamic, kube.Deployments, "default")
	replicas := int32(2)
	d, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	if _, err := deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want.Status.AvailableReplicas != 2 {
		t.Errorf("UpdateStatus did not store the status: %+v", want.Status)
	}
	got2, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got2.TypeMeta = want.TypeMeta; !reflect.DeepEqual(got2, want) {
		t.Errorf("Get = %+v\nthe clientset reads %+v", got2, want)
	}
}

// TestBuiltinResources: every resource sdk/kube names for NewTyped is one a
// real API server serves, as the kind NewTyped gives it (the Go type's
// name); a ResourceQuota (what an outside author's addon writes) goes
// through NewTyped and back.
func TestBuiltinResources(t *testing.T) {
	kc := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kube.Connect(kc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"ConfigMap": kube.ConfigMaps, "Secret": kube.Secrets, "Namespace": kube.Namespaces, "Node": kube.Nodes,
		"Pod": kube.Pods, "Service": kube.Services, "ServiceAccount": kube.ServiceAccounts,
		"ResourceQuota": kube.ResourceQuotas, "LimitRange": kube.LimitRanges, "PersistentVolumeClaim": kube.PersistentVolumeClaims,
		"Deployment": kube.Deployments, "DaemonSet": kube.DaemonSets, "StatefulSet": kube.StatefulSets,
		"Job": kube.Jobs, "CronJob": kube.CronJobs, "Ingress": kube.Ingresses, "NetworkPolicy": kube.NetworkPolicies,
		"Role": kube.Roles, "RoleBinding": kube.RoleBindings, "ClusterRole": kube.ClusterRoles, "ClusterRoleBinding": kube.ClusterRoleBindings,
	} {
		gvk, err := c.Mapper.KindFor(gvr)
		if err != nil || gvk != gvr.GroupVersion().WithKind(kind) {
			t.Errorf("%v: the API server serves %v, %v; want kind %s", gvr, gvk, err, kind)
		}
	}
	quotas := kube.NewTyped[corev1.ResourceQuota](c.Dynamic, kube.ResourceQuotas, "default")
	if _, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	}, metav1.CreateOptions{FieldManager: "kube-test"}); err != nil {
		t.Fatal(err)
	}
	got, err := quotas.Get(ctx, "team", metav1.GetOptions{})
	if err != nil || got.Kind != "ResourceQuota" || got.Spec.Hard.Pods().String() != "10" {
		t.Fatalf("ResourceQuota read back: %+v, %v", got, err)
	}
}
