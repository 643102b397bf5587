// Command hookrecorder is a marina plugin for test/e2e's TestHookEnv: it
// implements every hook and appends one JSON line per call to the file its
// config names — the hook, the cluster, and the environment marina gave it
// (Docker host, driver, network) — so the test can check what every command
// hands its plugins.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/bcollard/marina/sdk"
)

type config struct {
	// File is where the calls are appended.
	File string `json:"file"`
}

// Call is one recorded hook call (test/e2e reads the same fields).
type Call struct {
	Hook        string `json:"hook"`
	Cluster     string `json:"cluster,omitempty"`
	DockerHost  string `json:"dockerHost"`
	Driver      string `json:"driver"`
	NetworkName string `json:"networkName"`
	// Kubeconfig: the call carried a kubeconfig (the plugin does not
	// declare the capability: it must never).
	Kubeconfig bool `json:"kubeconfig"`
}

type plugin struct{}

func (plugin) Info() sdk.Info {
	return sdk.Info{Name: "hookrecorder", Version: "1.0.0", Description: "records every hook call and its environment", Config: config{},
		Capabilities: []string{sdk.CapDocker}}
}

func record(req *sdk.Request) (*sdk.Result, error) {
	var c config
	if err := req.Config(&c); err != nil {
		return nil, err
	}
	if c.File == "" {
		return nil, errors.New("config.file is required")
	}
	call := Call{Hook: string(req.Hook), DockerHost: req.Env.DockerHost, Driver: req.Env.Driver, NetworkName: req.Env.NetworkName}
	if req.Cluster != nil {
		call.Cluster = req.Cluster.Name
		call.Kubeconfig = len(req.Cluster.Kubeconfig) > 0 || req.Cluster.KubeconfigPath != ""
	}
	b, err := json.Marshal(call)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(c.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return nil, err
	}
	return &sdk.Result{}, f.Close()
}

func (plugin) PostUp(_ context.Context, req *sdk.Request) (*sdk.Result, error) { return record(req) }
func (plugin) PreCluster(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	return record(req)
}
func (plugin) PostCluster(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	return record(req)
}
func (plugin) PreClusterDelete(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	return record(req)
}
func (plugin) PreDown(_ context.Context, req *sdk.Request) (*sdk.Result, error) { return record(req) }
func (plugin) PreDestroy(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	return record(req)
}

func main() { sdk.Serve(plugin{}) }
