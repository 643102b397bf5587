package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// version is stamped by the Makefile (-ldflags -X main.version=...).
var version = "1.0.0"

// Plugin is the metrics-server plugin.
type Plugin struct{}

type Config struct {
	Team               string        `json:"team" marina:"required,pattern=^[a-z][a-z0-9-]*$" doc:"Owning team, put on every object as the label marina.dev/team."`
	Replicas           int           `json:"replicas" marina:"min=1,max=5" doc:"metrics-server replicas."`
	MetricResolution   time.Duration `json:"metricResolution" marina:"min=10s,max=5m" doc:"How often metrics-server scrapes the kubelets."`
	KubeletInsecureTLS bool          `json:"kubeletInsecureTLS" doc:"Skip kubelet certificate checks (kind's kubelets use self-signed certificates)."`
}

func (c *Config) Validate() []sdk.Diagnostic {
	if c.Replicas > 1 && c.MetricResolution < 15*time.Second {
		return []sdk.Diagnostic{sdk.Errorf("metricResolution", "must be at least 15s with more than one replica, got %s", c.MetricResolution)}
	}
	return nil
}

func (*Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         "metrics-server", // lower-case, digits, '-'
		Version:      version,          // strict semver, no leading v
		Description:  "Installs metrics-server in every cluster.",
		Dependencies: []sdk.Dependency{{Name: "metallb", Optional: true}},
		Capabilities: []string{sdk.CapKubeconfig},
		Outputs:      []string{"namespace"},
		Timeouts:     map[sdk.Hook]time.Duration{sdk.PostCluster: 3 * time.Minute},
		Config:       &Config{Replicas: 1, MetricResolution: 15 * time.Second, KubeletInsecureTLS: true}, // defaults
	}
}

//go:embed components.yaml
var componentsYAML []byte

// PostCluster applies metrics-server to the new cluster with server-side apply
// (idempotent: applying the same objects again changes nothing) and waits,
// bounded by the hook's deadline, for it to be available.
func (*Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	c, err := kube.Connect(req.Cluster.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", req.Cluster.Name, err)
	}
	objs, err := kube.DecodeManifests(componentsYAML)
	if err != nil {
		return nil, err
	}
	if err := customize(objs, cfg); err != nil {
		return nil, err
	}
	req.Progress("applying metrics-server (%d replicas) to %s", cfg.Replicas, req.Cluster.Name)
	if err := c.Apply(ctx, "acme-metrics-server", objs...); err != nil {
		return nil, err
	}
	if err := kube.WaitFor(ctx, "deployment kube-system/metrics-server to be available", time.Second,
		kube.DeploymentAvailable(c.Dynamic, "kube-system", "metrics-server")); err != nil {
		return nil, err
	}
	return &sdk.Result{Outputs: map[string]string{"namespace": "kube-system"}}, nil
}

// customize applies the config to the release manifest: the team label on
// every object; replicas and flags on the Deployment.
func customize(objs []*unstructured.Unstructured, cfg Config) error {
	found := false
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["marina.dev/team"] = cfg.Team
		o.SetLabels(labels)
		if o.GetKind() != "Deployment" || o.GetName() != "metrics-server" {
			continue
		}
		found = true
		if err := unstructured.SetNestedField(o.Object, int64(cfg.Replicas), "spec", "replicas"); err != nil {
			return err
		}
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if err != nil || len(containers) == 0 {
			return errors.New("components.yaml: the metrics-server Deployment has no container")
		}
		c := containers[0].(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(c, "args")
		args = append(args, "--metric-resolution="+cfg.MetricResolution.String())
		if cfg.KubeletInsecureTLS {
			args = append(args, "--kubelet-insecure-tls")
		}
		if err := unstructured.SetNestedStringSlice(c, args, "args"); err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return err
		}
	}
	if !found {
		return errors.New("components.yaml has no metrics-server Deployment")
	}
	return nil
}
