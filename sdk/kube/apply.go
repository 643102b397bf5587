package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// CRDTimeout bounds how long Apply waits for the CRDs it applied to become
// Established (the API server does it in well under a second; much longer
// means the CRD is broken, e.g. conflicting names), and how long it waits
// for discovery to serve their kinds afterwards.
const CRDTimeout = time.Minute

// crdGK is the kind of CustomResourceDefinitions.
var crdGK = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// Apply server-side-applies objs with fieldManager as the owner of the
// fields they set, forcing conflicts (the plugin is the authority on what it
// applies; fields other managers set and objs do not mention are left
// alone, e.g. a caBundle a controller injects into a webhook).
//
// Order: CustomResourceDefinitions first, then Apply waits until each is
// Established (at most CRDTimeout) and resets the mapper so their kinds
// resolve; then Namespaces; then every other object in the order given.
// Kinds map to resources through the cluster's discovery, so namespaced and
// cluster-scoped objects are told apart by the cluster: a namespaced object
// without metadata.namespace, or a cluster-scoped one with it, is an error
// (nothing is defaulted behind your back).
//
// A re-apply of unchanged objects writes nothing, with one exception of
// the API server's: an object that sets nothing but its name (e.g. an
// empty Secret a controller fills later) gets no managed fields on
// create, and is written once more, to record them, on the next apply.
// Labelling every object you apply (which Prune wants anyway) avoids it.
//
// The objects are not modified; server-populated metadata they may carry
// (resourceVersion, uid, managedFields, creationTimestamp, generation) is
// left out of the request. Apply stops at the first error, which names the
// object, and wraps the API error (apierrors.IsXxx and IsWebhookUnavailable
// work on it).
func (c *Client) Apply(ctx context.Context, fieldManager string, objs ...*unstructured.Unstructured) error {
	if fieldManager == "" {
		return errors.New("kube: Apply needs a field manager (e.g. the plugin's name): it records who owns the applied fields")
	}
	var crds, namespaces, rest []*unstructured.Unstructured
	for i, o := range objs {
		if err := checkObject(o); err != nil {
			return fmt.Errorf("kube: Apply: object %d: %w", i+1, err)
		}
		switch gk := o.GroupVersionKind().GroupKind(); gk {
		case crdGK:
			crds = append(crds, o)
		case schema.GroupKind{Kind: "Namespace"}:
			namespaces = append(namespaces, o)
		default:
			rest = append(rest, o)
		}
	}

	newKinds := map[schema.GroupKind]bool{}
	for _, o := range crds {
		if err := c.applyOne(ctx, fieldManager, o, false); err != nil {
			return err
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		newKinds[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	if len(crds) > 0 {
		wctx, cancel := context.WithTimeout(ctx, CRDTimeout)
		defer cancel()
		for _, o := range crds {
			if err := WaitFor(wctx, "CustomResourceDefinition "+o.GetName()+" to be established", 100*time.Millisecond, CRDEstablished(c.Dynamic, o.GetName())); err != nil {
				return fmt.Errorf("kube: %w", err)
			}
		}
		c.Mapper.Reset()
	}
	for _, group := range [][]*unstructured.Unstructured{namespaces, rest} {
		for _, o := range group {
			if err := c.applyOne(ctx, fieldManager, o, newKinds[o.GroupVersionKind().GroupKind()]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkObject rejects objects the API server would refuse with a less
// helpful message.
func checkObject(o *unstructured.Unstructured) error {
	switch {
	case o == nil:
		return errors.New("is nil")
	case o.GetAPIVersion() == "" || o.GetKind() == "":
		return fmt.Errorf("%s %q has no apiVersion or kind", o.GetKind(), o.GetName())
	case o.GetName() == "":
		if o.GetGenerateName() != "" {
			return fmt.Errorf("%s with generateName %q: server-side apply needs a fixed metadata.name", o.GetKind(), o.GetGenerateName())
		}
		return fmt.Errorf("%s has no metadata.name", o.GetKind())
	}
	return nil
}

func (c *Client) applyOne(ctx context.Context, fieldManager string, o *unstructured.Unstructured, kindIsNew bool) error {
	what := Describe(o)
	mapping, err := c.mapping(ctx, o.GroupVersionKind(), kindIsNew)
	if err != nil {
		return fmt.Errorf("kube: applying %s: %w", what, err)
	}
	ri, err := c.resourceFor(mapping, o.GetNamespace())
	if err != nil {
		return fmt.Errorf("kube: applying %s: %w", what, err)
	}
	if _, err := ri.Apply(ctx, o.GetName(), forApply(o), metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("kube: applying %s: %w", what, err)
	}
	return nil
}

// forApply returns o without the metadata the server owns.
func forApply(o *unstructured.Unstructured) *unstructured.Unstructured {
	md, ok := o.Object["metadata"].(map[string]any)
	if !ok {
		return o
	}
	strip := false
	for _, k := range serverMetadata {
		if _, ok := md[k]; ok {
			strip = true
		}
	}
	if !strip {
		return o
	}
	cp := o.DeepCopy()
	md = cp.Object["metadata"].(map[string]any)
	for _, k := range serverMetadata {
		delete(md, k)
	}
	return cp
}

var serverMetadata = []string{"resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink"}

// Describe names an object for messages: "Deployment metallb-system/controller",
// "CustomResourceDefinition ipaddresspools.metallb.io".
func Describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

// mapping finds gvk's resource. A kind the mapper does not know gets one
// mapper reset (discovery may be stale); a kind whose CRD was just created
// (kindIsNew) is waited for, up to CRDTimeout, as discovery can lag behind
// the CRD becoming Established.
func (c *Client) mapping(ctx context.Context, gvk schema.GroupVersionKind, kindIsNew bool) (*meta.RESTMapping, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m, nil
	}
	if !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("mapping %s to a resource: %w", gvk, err)
	}
	if !kindIsNew {
		c.Mapper.Reset()
		if m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m, nil
		}
		return nil, fmt.Errorf("the cluster does not serve kind %s in apiVersion %s: check apiVersion, or install the CRD that defines it first: %w", gvk.Kind, gvk.GroupVersion(), err)
	}
	wctx, cancel := context.WithTimeout(ctx, CRDTimeout)
	defer cancel()
	err = WaitFor(wctx, fmt.Sprintf("discovery to serve kind %s in %s", gvk.Kind, gvk.GroupVersion()), 100*time.Millisecond, func(context.Context) (bool, error) {
		c.Mapper.Reset()
		var err error
		m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil && !meta.IsNoMatchError(err) {
			return true, err
		}
		return err == nil, err
	})
	return m, err
}

// resourceFor returns the dynamic client of the mapping's resource, scoped
// to namespace for namespaced kinds.
func (c *Client) resourceFor(m *meta.RESTMapping, namespace string) (dynamic.ResourceInterface, error) {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			return nil, fmt.Errorf("%s is namespaced: set metadata.namespace", m.GroupVersionKind.Kind)
		}
		return c.Dynamic.Resource(m.Resource).Namespace(namespace), nil
	}
	if namespace != "" {
		return nil, fmt.Errorf("%s is cluster-scoped: remove metadata.namespace (%q)", m.GroupVersionKind.Kind, namespace)
	}
	return c.Dynamic.Resource(m.Resource), nil
}

// Resource returns the dynamic client of gvk's resource: in namespace for a
// namespaced kind ("" means all namespaces, for List), without one for a
// cluster-scoped kind (a namespace is then an error).
func (c *Client) Resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.mapping(context.Background(), gvk, false)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace && namespace == "" {
		return c.Dynamic.Resource(m.Resource), nil
	}
	ri, err := c.resourceFor(m, namespace)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	return ri, nil
}

// Prune deletes the objects of kind gvk that match the label selector, in
// namespace ("" means all namespaces; cluster-scoped kinds take ""), except
// those named in keep. It returns what it deleted ("namespace/name" or
// "name"), sorted as the API server lists them.
//
// It is how a hook removes what it created earlier and no longer wants:
// label every object you apply (e.g. app.kubernetes.io/managed-by=<plugin>),
// and prune with that label and the names you just applied. The selector
// must not be empty: Prune never deletes every object of a kind. A kind
// the cluster does not serve has nothing to prune.
func (c *Client) Prune(ctx context.Context, gvk schema.GroupVersionKind, namespace, selector string, keep ...string) ([]string, error) {
	if selector == "" {
		return nil, fmt.Errorf("kube: Prune %s needs a label selector naming your own objects (e.g. app.kubernetes.io/managed-by=<plugin>)", gvk.Kind)
	}
	m, err := c.mapping(ctx, gvk, false)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kube: pruning %s: %w", gvk.Kind, err)
	}
	var lister dynamic.ResourceInterface = c.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace && namespace != "" {
		lister = c.Dynamic.Resource(m.Resource).Namespace(namespace)
	} else if m.Scope.Name() != meta.RESTScopeNameNamespace && namespace != "" {
		return nil, fmt.Errorf("kube: pruning %s: it is cluster-scoped: pass no namespace", gvk.Kind)
	}
	list, err := lister.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("kube: listing %s with %q to prune: %w", m.Resource.Resource, selector, err)
	}
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	var deleted []string
	for i := range list.Items {
		o := &list.Items[i]
		if kept[o.GetName()] {
			continue
		}
		ri := c.Dynamic.Resource(m.Resource)
		var target dynamic.ResourceInterface = ri
		name := o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			target = ri.Namespace(ns)
			name = ns + "/" + name
		}
		bg := metav1.DeletePropagationBackground
		err := target.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: ptr(o.GetUID())}})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or replaced by a new object of that name
			// (the UID precondition failed): not ours to delete now.
			continue
		case err != nil:
			return deleted, fmt.Errorf("kube: pruning %s %s: %w", gvk.Kind, name, err)
		}
		deleted = append(deleted, name)
	}
	return deleted, nil
}

func ptr[T any](v T) *T { return &v }
