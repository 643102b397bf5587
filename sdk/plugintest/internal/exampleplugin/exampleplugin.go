// Package exampleplugin is a small marina plugin used to test sdk/plugintest
// in-process (New) and, wrapped by testdata/example, out of process (Start).
//
// PreCluster declares a node label and a file for every node; PostCluster
// records the cluster in the plugin's state directory and publishes the
// address pools it would serve. Both are idempotent.
package exampleplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bcollard/marina/sdk"
)

// Config is the plugin's config.
type Config struct {
	Replicas int           `json:"replicas" doc:"Replicas of the example controller (1-5)."`
	Wait     time.Duration `json:"wait" doc:"How long PostCluster may wait for readiness."`
	Pools    []Pool        `json:"pools" doc:"Address pools to announce."`
	// Fail makes a hook fail or panic on purpose: "error", "panic" or "block"
	// (wait until the context ends). Tests use it.
	Fail string `json:"fail,omitempty" doc:"Test only: error, panic or block."`
}

// Pool is a named address range.
type Pool struct {
	Name      string `json:"name" doc:"Unique pool name."`
	Addresses string `json:"addresses" doc:"first-last, e.g. 172.30.1.16-172.30.1.254."`
}

// Validate checks what the JSON types cannot.
func (c *Config) Validate() []sdk.Diagnostic {
	var ds []sdk.Diagnostic
	if c.Replicas < 1 || c.Replicas > 5 {
		ds = append(ds, sdk.Errorf("replicas", "must be between 1 and 5, got %d", c.Replicas))
	}
	seen := map[string]bool{}
	for i, p := range c.Pools {
		switch {
		case p.Name == "":
			ds = append(ds, sdk.Errorf(fmt.Sprintf("pools[%d].name", i), "must not be empty"))
		case seen[p.Name]:
			ds = append(ds, sdk.Errorf(fmt.Sprintf("pools[%d].name", i), "%q is used twice", p.Name))
		}
		seen[p.Name] = true
	}
	if c.Wait > 10*time.Minute {
		ds = append(ds, sdk.Diagnostic{Severity: sdk.SeverityWarning, Path: "wait", Summary: "more than 10m makes failures slow to show"})
	}
	switch c.Fail {
	case "", "error", "panic", "block":
	default:
		ds = append(ds, sdk.Errorf("fail", "must be error, panic or block, got %q", c.Fail))
	}
	return ds
}

// Plugin is the example plugin.
type Plugin struct{}

// Info describes the plugin.
func (Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         "example",
		Version:      "0.3.1",
		Description:  "Example plugin for the plugintest harness",
		Maintainer:   "marina authors",
		Dependencies: []sdk.Dependency{{Name: "localdns", Version: "^1.0", Optional: true}},
		Capabilities: []string{sdk.CapKubeconfig},
		Outputs:      []string{"pools", "zone"},
		Timeouts:     map[sdk.Hook]time.Duration{sdk.PostCluster: 2 * time.Minute},
		Config:       &Config{Replicas: 1, Wait: 30 * time.Second},
	}
}

// PreCluster declares a node label and a config file for every node.
func (Plugin) PreCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	if err := misbehave(ctx, cfg.Fail); err != nil {
		return nil, err
	}
	req.Progress("preparing %s", req.Cluster.Name)
	return &sdk.Result{Kind: &sdk.KindContribution{
		NodeLabels: map[string]string{"example.marina.dev/replicas": fmt.Sprint(cfg.Replicas)},
		NodeFiles: []sdk.NodeFile{{
			Path:    "/etc/example/cluster",
			Content: fmt.Appendf(nil, "cluster=%s\nslot=%d\n", req.Cluster.Name, req.Cluster.Slot),
		}},
	}}, nil
}

// PostCluster records the cluster in the state directory and publishes its pools.
func (Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	if err := misbehave(ctx, cfg.Fail); err != nil {
		return nil, err
	}
	if len(req.Cluster.Kubeconfig) == 0 {
		return nil, errors.New("no kubeconfig for cluster " + req.Cluster.Name)
	}
	pools := cfg.Pools
	if len(pools) == 0 {
		for i, r := range req.Cluster.MetalLBPools {
			pools = append(pools, Pool{Name: fmt.Sprintf("%s-%d", req.Cluster.Name, i), Addresses: r.String()})
		}
	}
	var names []string
	for _, p := range pools {
		req.Progress("announcing pool %s (%s)", p.Name, p.Addresses)
		names = append(names, p.Name)
	}
	// Converge: the same file with the same content, however often we run.
	marker := filepath.Join(req.Env.StateDir, req.Cluster.Name+".pools")
	if err := os.WriteFile(marker, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("recording the pools of %s: %w", req.Cluster.Name, err)
	}
	req.Logger().Info("pools announced", "cluster", req.Cluster.Name, "count", len(names))
	zone := req.Env.DNSZone
	if z, ok := req.Dep("localdns", "zone"); ok {
		zone = z
	}
	return &sdk.Result{Outputs: map[string]string{"pools": strings.Join(names, ","), "zone": zone}}, nil
}

func misbehave(ctx context.Context, how string) error {
	switch how {
	case "error":
		return errors.New("asked to fail")
	case "panic":
		panic("asked to panic")
	case "block":
		<-ctx.Done()
		return fmt.Errorf("gave up: %w", ctx.Err())
	}
	return nil
}
