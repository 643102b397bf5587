package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// This file is a REST mapper backed by the cluster's discovery documents,
// written here instead of using client-go's discovery and restmapper
// packages: those import k8s.io/client-go/kubernetes/scheme, whose init
// registers every built-in API group's types in every process that links
// it, i.e. every marina command and built-in plugin, used or not. It reads what client-go's DeferredDiscoveryRESTMapper over
// a memory-cached discovery client reads: aggregated discovery (/api and
// /apis, one request each) where the server serves it, otherwise the group
// lists and then every group-version's resource list; group-versions that
// fail or are stale are left out, as client-go does. The mapping it builds
// is client-go's (restmapper.NewDiscoveryRESTMapper): core/v1 first, then
// each group's preferred version, then its other versions.

// aggregatedDiscoveryV2 is the media type of aggregated discovery, the
// APIGroupDiscoveryList of apidiscovery.k8s.io/v2.
const aggregatedDiscoveryV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// discoveryMapper is a meta.ResettableRESTMapper that reads discovery on
// first use and again after Reset.
type discoveryMapper struct {
	rc rest.Interface

	mu       sync.Mutex
	delegate meta.RESTMapper // nil until discovery was read
}

// NewDiscoveryRESTMapper returns a REST mapper backed by the discovery
// documents of the cluster cfg points at (what Connect and NewForConfig
// give a Client). It reads discovery when first asked, keeps what it read
// until Reset, and reads again on the next question after that.
func NewDiscoveryRESTMapper(cfg *rest.Config) (meta.ResettableRESTMapper, error) {
	rc, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(cfg))
	if err != nil {
		return nil, fmt.Errorf("kube: creating the discovery client for %s: %w", cfg.Host, err)
	}
	return &discoveryMapper{rc: rc}, nil
}

// mapper returns the discovery-backed mapper, reading discovery if needed.
func (d *discoveryMapper) mapper() (meta.RESTMapper, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.delegate != nil {
		return d.delegate, nil
	}
	groups, err := d.discover(context.Background())
	if err != nil {
		return nil, err
	}
	d.delegate = newPriorityMapper(groups)
	return d.delegate, nil
}

// Reset forgets what discovery said; the next question reads it again.
func (d *discoveryMapper) Reset() {
	d.mu.Lock()
	d.delegate = nil
	d.mu.Unlock()
}

func (d *discoveryMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	m, err := d.mapper()
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return m.KindFor(resource)
}

func (d *discoveryMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	m, err := d.mapper()
	if err != nil {
		return nil, err
	}
	return m.KindsFor(resource)
}

func (d *discoveryMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	m, err := d.mapper()
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.ResourceFor(input)
}

func (d *discoveryMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	m, err := d.mapper()
	if err != nil {
		return nil, err
	}
	return m.ResourcesFor(input)
}

func (d *discoveryMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := d.mapper()
	if err != nil {
		return nil, err
	}
	return m.RESTMapping(gk, versions...)
}

func (d *discoveryMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	m, err := d.mapper()
	if err != nil {
		return nil, err
	}
	return m.RESTMappings(gk, versions...)
}

func (d *discoveryMapper) ResourceSingularizer(resource string) (string, error) {
	m, err := d.mapper()
	if err != nil {
		return "", err
	}
	return m.ResourceSingularizer(resource)
}

// apiGroup is one API group as discovery describes it: its versions,
// preferred first, and the resources of each version it could read.
type apiGroup struct {
	name      string
	versions  []string
	resources map[string][]metav1.APIResource
}

// discover reads the cluster's API groups and their resources: /api (the
// core group; a 404 there is tolerated, as client-go does for aggregated
// API servers) and /apis.
func (d *discoveryMapper) discover(ctx context.Context) ([]*apiGroup, error) {
	core, err := d.discoverPath(ctx, "/api")
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the cluster's API discovery (/api): %w", err)
	}
	groups, err := d.discoverPath(ctx, "/apis")
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's API discovery (/apis): %w", err)
	}
	return append(core, groups...), nil
}

// withStatusMessage adds to err the message of the Status the server
// answered with, when client-go's generic text ("the server is currently
// unable to handle the request") left it out: the discovery client decodes
// unstructured, so it never sees the Status.
func withStatusMessage(err error, body []byte) error {
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Message == "" || strings.Contains(err.Error(), st.Message) {
		return err
	}
	return fmt.Errorf("%w: %s", err, st.Message)
}

// discoverPath reads one discovery root, /api or /apis, asking for the
// aggregated form first.
func (d *discoveryMapper) discoverPath(ctx context.Context, path string) ([]*apiGroup, error) {
	var contentType string
	body, err := d.rc.Get().AbsPath(path).
		SetHeader("Accept", aggregatedDiscoveryV2+",application/json").
		Do(ctx).ContentType(&contentType).Raw()
	if err != nil {
		return nil, withStatusMessage(err, body)
	}
	if isAggregatedDiscovery(contentType) {
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		return aggregatedGroups(&list), nil
	}

	// Unaggregated discovery: the group list, then each group-version.
	var groups []*apiGroup
	if path == "/api" {
		var v metav1.APIVersions
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(v.Versions) > 0 {
			groups = append(groups, &apiGroup{versions: v.Versions, resources: map[string][]metav1.APIResource{}})
		}
	} else {
		var list metav1.APIGroupList
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		for _, g := range list.Groups {
			ag := &apiGroup{name: g.Name, resources: map[string][]metav1.APIResource{}}
			if p := g.PreferredVersion.Version; p != "" {
				ag.versions = append(ag.versions, p)
			}
			for _, v := range g.Versions {
				if v.Version != g.PreferredVersion.Version {
					ag.versions = append(ag.versions, v.Version)
				}
			}
			groups = append(groups, ag)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, g := range groups {
		for _, v := range g.versions {
			wg.Go(func() {
				gvPath := "/apis/" + g.name + "/" + v
				if g.name == "" {
					gvPath = "/api/" + v
				}
				b, err := d.rc.Get().AbsPath(gvPath).SetHeader("Accept", "application/json").Do(ctx).Raw()
				var list metav1.APIResourceList
				if err == nil {
					err = json.Unmarshal(b, &list)
				}
				if err != nil {
					return // left out, as client-go leaves out a group-version that fails
				}
				mu.Lock()
				g.resources[v] = list.APIResources
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return groups, nil
}

// isAggregatedDiscovery reports whether a response's Content-Type is
// aggregated discovery v2 (parameters in any order, extra ones allowed).
func isAggregatedDiscovery(contentType string) bool {
	base, params, err := mime.ParseMediaType(contentType)
	return err == nil && base == "application/json" &&
		params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
}

// aggregatedGroups converts aggregated discovery. Versions come preferred
// first; stale ones are left out; resources without a kind are left out,
// and subresources are not mapped (client-go's mapper skips them too).
func aggregatedGroups(list *apidiscoveryv2.APIGroupDiscoveryList) []*apiGroup {
	var out []*apiGroup
	for _, g := range list.Items {
		ag := &apiGroup{name: g.Name, resources: map[string][]metav1.APIResource{}}
		for _, v := range g.Versions {
			if v.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
				continue
			}
			ag.versions = append(ag.versions, v.Version)
			rs := []metav1.APIResource{}
			for _, r := range v.Resources {
				if r.ResponseKind == nil || r.ResponseKind.Kind == "" {
					continue
				}
				rs = append(rs, metav1.APIResource{
					Name:         r.Resource,
					SingularName: r.SingularResource,
					Namespaced:   r.Scope == apidiscoveryv2.ScopeNamespace,
					Kind:         r.ResponseKind.Kind,
				})
			}
			ag.resources[v.Version] = rs
		}
		out = append(out, ag)
	}
	return out
}

// newPriorityMapper builds the mapper client-go's
// restmapper.NewDiscoveryRESTMapper builds from the same groups: one
// DefaultRESTMapper per group-version, core/v1 first in priority, then each
// group's preferred version, its other versions, and the group as a whole.
func newPriorityMapper(groups []*apiGroup) meta.RESTMapper {
	var mappers meta.MultiRESTMapper
	resourcePriority := []schema.GroupVersionResource{{Group: "", Version: "v1", Resource: meta.AnyResource}}
	kindPriority := []schema.GroupVersionKind{{Group: "", Version: "v1", Kind: meta.AnyKind}}
	var groupNames []string
	for _, g := range groups {
		groupNames = append(groupNames, g.name)
		for _, v := range g.versions {
			resources, ok := g.resources[v]
			if !ok {
				continue
			}
			gv := schema.GroupVersion{Group: g.name, Version: v}
			resourcePriority = append(resourcePriority, gv.WithResource(meta.AnyResource))
			kindPriority = append(kindPriority, gv.WithKind(meta.AnyKind))
			m := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
			for _, r := range resources {
				if strings.Contains(r.Name, "/") {
					continue // a subresource
				}
				scope := meta.RESTScopeNamespace
				if !r.Namespaced {
					scope = meta.RESTScopeRoot
				}
				plural := gv.WithResource(r.Name)
				singular := gv.WithResource(r.SingularName)
				if r.SingularName == "" {
					_, singular = meta.UnsafeGuessKindToResource(gv.WithKind(r.Kind))
				}
				m.AddSpecific(gv.WithKind(strings.ToLower(r.Kind)), plural, singular, scope)
				m.AddSpecific(gv.WithKind(r.Kind), plural, singular, scope)
				m.Add(gv.WithKind(r.Kind+"List"), scope)
			}
			m.Add(gv.WithKind("List"), meta.RESTScopeRoot)
			mappers = append(mappers, m)
		}
	}
	for _, g := range groupNames {
		resourcePriority = append(resourcePriority, schema.GroupVersionResource{Group: g, Version: meta.AnyVersion, Resource: meta.AnyResource})
		kindPriority = append(kindPriority, schema.GroupVersionKind{Group: g, Version: meta.AnyVersion, Kind: meta.AnyKind})
	}
	return meta.PriorityRESTMapper{Delegate: mappers, ResourcePriority: resourcePriority, KindPriority: kindPriority}
}
