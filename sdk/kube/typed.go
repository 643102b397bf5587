package kube

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Typed reads and writes objects of one kind as the Go type T of
// k8s.io/api (corev1.ConfigMap, appsv1.Deployment, ...), through the
// dynamic client: objects travel as JSON, as with client-go's typed
// clientset, and are converted to and from T with
// runtime.DefaultUnstructuredConverter. It stands in for the typed
// clientset (k8s.io/client-go/kubernetes), which this package does not
// use: that package's scheme registers every built-in API group's types
// at init, in every process that links it, used or not. A plugin that wants the typed clientset anyway can
// make one from Client.Config.
//
// Errors are the API server's (apierrors.IsNotFound, IsConflict, ...
// work on them), as with the typed clientset.
type Typed[T any] struct {
	ri  dynamic.ResourceInterface
	gvk schema.GroupVersionKind
}

// NewTyped returns the typed client of resource gvr (e.g. {Version: "v1",
// Resource: "configmaps"}) in namespace; "" for a cluster-scoped kind, or
// to list across all namespaces. T's type name is the kind: what Create,
// Update and Apply send carries apiVersion gvr.GroupVersion() and that kind.
func NewTyped[T any](dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace string) Typed[T] {
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespace != "" {
		ri = dyn.Resource(gvr).Namespace(namespace)
	}
	return Typed[T]{ri: ri, gvk: gvr.GroupVersion().WithKind(reflect.TypeFor[T]().Name())}
}

// Get reads the object name.
func (t Typed[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	u, err := t.ri.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return FromUnstructured[T](u)
}

// List lists the objects opts selects.
func (t Typed[T]) List(ctx context.Context, opts metav1.ListOptions) ([]T, error) {
	l, err := t.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", t.gvk.Kind, l.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// Create creates obj and returns it as the API server stored it.
func (t Typed[T]) Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error) {
	u, err := t.toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if u, err = t.ri.Create(ctx, u, opts); err != nil {
		return nil, err
	}
	return FromUnstructured[T](u)
}

// Update replaces obj (optimistic concurrency: a stale resourceVersion is a
// conflict) and returns it as the API server stored it.
func (t Typed[T]) Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error) {
	u, err := t.toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if u, err = t.ri.Update(ctx, u, opts); err != nil {
		return nil, err
	}
	return FromUnstructured[T](u)
}

// UpdateStatus replaces obj's status subresource.
func (t Typed[T]) UpdateStatus(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error) {
	u, err := t.toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if u, err = t.ri.UpdateStatus(ctx, u, opts); err != nil {
		return nil, err
	}
	return FromUnstructured[T](u)
}

// Patch patches the object name.
func (t Typed[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*T, error) {
	u, err := t.ri.Patch(ctx, name, pt, data, opts)
	if err != nil {
		return nil, err
	}
	return FromUnstructured[T](u)
}

// Delete deletes the object name.
func (t Typed[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return t.ri.Delete(ctx, name, opts)
}

func (t Typed[T]) toUnstructured(obj *T) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", t.gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(t.gvk)
	return u, nil
}

// FromUnstructured converts u to the Go type T (e.g. appsv1.Deployment).
func FromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
}

// ToUnstructured converts obj (a k8s.io/api type, or a struct of your own
// with JSON tags, e.g. an apply configuration) to an unstructured object
// with apiVersion and kind set from gvk, ready for Client.Apply.
func ToUnstructured(obj any, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// Resources of the common built-in kinds, for NewTyped (the Go type of each
// is k8s.io/api's of the same kind: corev1.ResourceQuota for
// ResourceQuotas, ...).
var (
	ConfigMaps             = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	Secrets                = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	Namespaces             = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	Nodes                  = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	Pods                   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	Services               = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	ServiceAccounts        = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	ResourceQuotas         = schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}
	LimitRanges            = schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}
	PersistentVolumeClaims = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	Deployments            = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	DaemonSets             = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	StatefulSets           = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	Jobs                   = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	CronJobs               = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
	Ingresses              = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	NetworkPolicies        = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	Roles                  = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	RoleBindings           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	ClusterRoles           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	ClusterRoleBindings    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)
