// Package metallb is marina's built-in metallb plugin: in PostCluster it
// installs MetalLB (the pinned upstream release manifest, embedded byte
// for byte and checked against its sha256), waits for MetalLB's controller
// to be available, and gives the cluster an IPAddressPool holding exactly
// its slot's address ranges plus an L2Advertisement announcing that pool.
//
// Nothing is fetched at run time and nothing waits a fixed time: the
// controller's readiness is polled, and the pool is applied with bounded
// retries while MetalLB's admission webhook is not serving yet (the
// predecessor's `kubectl wait` right after apply raced the pods' creation,
// and a `sleep 5` stood in for webhook readiness). Every write is a
// server-side apply, so a re-run converges and a changed pool is updated;
// pools the plugin made earlier under another name are removed.
//
// The package is built only against marina's public SDK (sdk/, sdk/kube).
package metallb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// Version is the plugin's version (Info.Version).
const Version = "0.1.0"

// Name is the plugin's name.
const Name = "metallb"

// FieldManager owns the fields the plugin applies (server-side apply).
const FieldManager = "marina-metallb"

// Outputs published by PostCluster.
const (
	// OutputPool is the IPAddressPool's name (for the metallb.io/address-pool annotation).
	OutputPool = "pool"
	// OutputAddresses is the pool's ranges, comma-separated "first-last".
	OutputAddresses = "addresses"
)

// PostClusterTimeout is the default deadline of PostCluster (the user can
// change it with plugins.metallb.timeout). Pulling MetalLB's two images on
// a cold cache is most of it.
const PostClusterTimeout = 5 * time.Minute

// Intervals of the waits (each backs off to four times its interval).
const (
	controllerPollInterval = time.Second
	poolRetryInterval      = 500 * time.Millisecond
)

// Plugin is the metallb plugin. It takes no config.
type Plugin struct{}

// New returns the metallb plugin.
func New() sdk.Plugin { return &Plugin{} }

// Info describes the plugin.
func (*Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         Name,
		Version:      Version,
		Description:  "Installs MetalLB " + MetalLBVersion + " in every cluster with an L2 pool of the cluster's slot addresses.",
		Maintainer:   "marina",
		Capabilities: []string{sdk.CapKubeconfig},
		Outputs:      []string{OutputPool, OutputAddresses},
		Timeouts:     map[sdk.Hook]time.Duration{sdk.PostCluster: PostClusterTimeout},
	}
}

// PostCluster installs MetalLB and the cluster's pool. Steps:
//  1. render everything and check the cluster's ranges (before any write);
//  2. apply the MetalLB manifest (CRDs first, waited until Established);
//  3. wait for Deployment metallb-system/controller to be Available;
//  4. apply the IPAddressPool and the L2Advertisement, retrying while the
//     webhook cannot be called yet;
//  5. remove pools and advertisements the plugin made under other names.
func (*Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	cl := req.Cluster
	if cl == nil {
		return nil, errors.New("PostCluster needs the cluster: the request carries none")
	}
	pool, err := poolObjects(cl)
	if err != nil {
		return nil, err
	}
	objs, err := manifestObjects(req.Env.Images[ImageKeyController], req.Env.Images[ImageKeySpeaker])
	if err != nil {
		return nil, err
	}
	c, err := kube.Connect(cl.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}

	req.Progress("applying MetalLB %s (%d objects)", MetalLBVersion, len(objs))
	if err := c.Apply(ctx, FieldManager, objs...); err != nil {
		return nil, fmt.Errorf("installing MetalLB %s in %s: %w", MetalLBVersion, cl.Name, err)
	}

	req.Progress("waiting for the MetalLB controller")
	if err := kube.WaitFor(ctx, "Deployment "+Namespace+"/"+ControllerDeployment+" (MetalLB's controller) to be available", controllerPollInterval,
		kube.DeploymentAvailable(c.Dynamic, Namespace, ControllerDeployment)); err != nil {
		return nil, fmt.Errorf("cluster %s: %w (its pods: kubectl -n %s get pods)", cl.Name, err, Namespace)
	}

	name := PoolName(cl.Slot)
	addrs, err := poolAddresses(cl)
	if err != nil {
		return nil, err
	}
	req.Progress("configuring IPAddressPool %s (%s)", name, strings.Join(addrs, ", "))
	if err := applyPool(ctx, req, c, name, pool); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}

	// Advertisements first: one may name a stale pool.
	for _, gvk := range []schema.GroupVersionKind{l2AdvertisementGVK, ipAddressPoolGVK} {
		gone, err := c.Prune(ctx, gvk, Namespace, PoolSelector, name)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: removing stale MetalLB %ss: %w", cl.Name, gvk.Kind, err)
		}
		for _, g := range gone {
			req.Progress("removed stale %s %s", gvk.Kind, g)
		}
	}
	return &sdk.Result{Outputs: map[string]string{
		OutputPool:      name,
		OutputAddresses: strings.Join(addrs, ","),
	}}, nil
}

// applyPool applies the pool and its advertisement. Right after MetalLB's
// controller becomes available its webhook may not be reachable yet (the
// Service's endpoints lag, the certificate is being injected): the API
// server then refuses the request because it cannot call the webhook, and
// the apply is retried with backoff until it is accepted or ctx ends. A
// webhook that answers and denies is an error at once.
func applyPool(ctx context.Context, req *sdk.Request, c *kube.Client, name string, pool []*unstructured.Unstructured) error {
	attempts := 0
	return kube.WaitFor(ctx, "MetalLB's admission webhook to accept IPAddressPool "+Namespace+"/"+name, poolRetryInterval, func(ctx context.Context) (bool, error) {
		attempts++
		err := c.Apply(ctx, FieldManager, pool...)
		switch {
		case err == nil:
			if attempts > 1 {
				req.Progress("IPAddressPool %s accepted after %d attempts", name, attempts)
			}
			return true, nil
		case kube.IsWebhookUnavailable(err), meta.IsNoMatchError(err):
			req.Logger().Debug("pool apply refused, retrying", "attempt", attempts, "err", err)
			req.Progress("MetalLB's webhook is not serving yet (attempt %d), retrying", attempts)
			return false, err
		default:
			return true, err
		}
	})
}
