package kube_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// componentsYAML stands for an addon's release manifest, embedded with
// //go:embed so nothing is downloaded when a cluster is created.
var componentsYAML = []byte(`apiVersion: v1
kind: Namespace
metadata: {name: acme}
`)

// A PostCluster hook that installs an addon, waits for it, then applies
// a custom resource its webhook validates (retrying while the webhook is
// not serving yet).
func Example() {
	postCluster := func(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
		c, err := kube.Connect(req.Cluster.Kubeconfig)
		if err != nil {
			return nil, err
		}
		objs, err := kube.DecodeManifests(componentsYAML)
		if err != nil {
			return nil, err
		}
		req.Progress("applying acme to %s", req.Cluster.Name)
		if err := c.Apply(ctx, "acme", objs...); err != nil {
			return nil, err
		}
		if err := kube.WaitFor(ctx, "deployment acme/controller to be available", time.Second,
			kube.DeploymentAvailable(c.Dynamic, "acme", "controller")); err != nil {
			return nil, err
		}
		config, err := kube.DecodeManifests([]byte("apiVersion: acme.example.com/v1\nkind: Settings\nmetadata: {name: default, namespace: acme}\n"))
		if err != nil {
			return nil, err
		}
		err = kube.WaitFor(ctx, "acme's webhook to accept its settings", 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			err := c.Apply(ctx, "acme", config...)
			if kube.IsWebhookUnavailable(err) {
				return false, err // not serving yet: retry
			}
			return true, err // applied, or refused for good
		})
		return &sdk.Result{}, err
	}
	fmt.Println(postCluster != nil)
	// Output: true
}
