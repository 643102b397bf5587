// Package kube is the Kubernetes toolkit of marina's plugin SDK: the few
// client-go helpers every plugin that installs something into a cluster
// needs, so that each plugin does not re-learn them.
//
//   - Connect turns the admin kubeconfig a PostCluster (or PreClusterDelete)
//     request carries into a Client: dynamic client and a discovery-backed
//     REST mapper. NewTyped reads and writes built-in kinds as k8s.io/api's
//     Go types through it (client-go's typed clientset is not used here:
//     its package registers every API group's types at init, in every
//     process that links it; Client.Config makes one if you want it).
//   - DecodeManifests splits multi-document YAML (an upstream release
//     manifest you embed with go:embed, or objects you render) into
//     unstructured objects.
//   - Client.Apply server-side-applies objects: CRDs first, waited until
//     Established, then namespaces, then the rest in the order given. A
//     re-run with the same objects changes nothing (the API server does not
//     even bump resourceVersions), which is what makes hooks idempotent.
//   - Client.Prune removes the objects a plugin labelled as its own earlier
//     and no longer wants.
//   - WaitFor polls a Check with backoff until it passes, the context ends or
//     the check fails for good; its timeout error carries the last reason, so
//     "timed out" always says what was still missing. DeploymentAvailable and
//     CRDEstablished are ready-made checks; IsWebhookUnavailable tells a
//     request refused because an admission webhook is not serving yet (retry)
//     from one the webhook denied (do not).
//
// A PostCluster hook that installs an addon reads:
//
//	func (p *Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
//		c, err := kube.Connect(req.Cluster.Kubeconfig)
//		if err != nil {
//			return nil, err
//		}
//		objs, err := kube.DecodeManifests(componentsYAML) // //go:embed components.yaml
//		if err != nil {
//			return nil, err
//		}
//		req.Progress("applying metrics-server to %s", req.Cluster.Name)
//		if err := c.Apply(ctx, "acme-metrics-server", objs...); err != nil {
//			return nil, err
//		}
//		err = kube.WaitFor(ctx, "deployment kube-system/metrics-server to be available", time.Second,
//			kube.DeploymentAvailable(c.Dynamic, "kube-system", "metrics-server"))
//		return &sdk.Result{}, err
//	}
//
// Every wait is bounded: by the hook's context (marina gives every hook a
// deadline) and, for a context without deadline, by DefaultTimeout. Nothing
// here sleeps for a fixed time.
package kube

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client talks to one cluster. Its fields are exported so a plugin can use
// client-go directly for anything the helpers do not cover (e.g.
// kubernetes.NewForConfig(c.Config) for client-go's typed clientset, at
// the cost of its scheme's init in the plugin's process).
type Client struct {
	// Config is the REST config the clients were made from (nil for a
	// Client made by New from existing clients).
	Config *rest.Config
	// Dynamic reaches any resource, custom ones included; NewTyped gives
	// typed access to built-in kinds through it.
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources through discovery. It caches what it
	// learnt; Apply resets it after it creates CRDs, and so should code that
	// creates CRDs by other means before using their kinds.
	Mapper meta.ResettableRESTMapper
}

// Default client-side rate limits of Connect: an addon manifest is tens of
// objects, and client-go's defaults (5 QPS, burst 10) would throttle it.
const (
	defaultQPS   = 50
	defaultBurst = 100
)

// Connect makes a Client from a kubeconfig (the bytes of
// sdk.Cluster.Kubeconfig). Its current context is used.
func Connect(kubeconfig []byte) (*Client, error) {
	if len(kubeconfig) == 0 {
		return nil, errors.New("kube: the kubeconfig is empty: marina gives a plugin the cluster's admin kubeconfig (in PostCluster and PreClusterDelete requests) only when it declares the capability sdk.CapKubeconfig in Info.Capabilities; add it (users are asked to grant it at install)")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kube: reading the kubeconfig: %w", err)
	}
	return NewForConfig(cfg)
}

// NewForConfig makes a Client from a REST config. A config without rate
// limits gets 50 QPS, burst 100.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = defaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = defaultBurst
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: creating the dynamic client for %s: %w", cfg.Host, err)
	}
	mapper, err := NewDiscoveryRESTMapper(cfg)
	if err != nil {
		return nil, err
	}
	c := New(dyn, mapper)
	c.Config = cfg
	return c, nil
}

// New makes a Client from existing clients, e.g. client-go's fake dynamic
// client (k8s.io/client-go/dynamic/fake) with a meta.DefaultRESTMapper in
// unit tests. The mapper must not be nil: for a real cluster, use
// NewForConfig, or NewDiscoveryRESTMapper.
func New(dyn dynamic.Interface, mapper meta.ResettableRESTMapper) *Client {
	if mapper == nil {
		panic("kube.New: the REST mapper is nil (NewDiscoveryRESTMapper makes one for a cluster)")
	}
	return &Client{Dynamic: dyn, Mapper: mapper}
}
