package main

import (
	"testing"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

func TestPostCluster(t *testing.T) {
	h := plugintest.New(t, &Plugin{})
	// A real kube-apiserver and etcd (sdk/kubetest; the binaries come from
	// KUBEBUILDER_ASSETS, e.g. controller-runtime's setup-envtest). No
	// kubelet runs: MarkDeploymentsAvailable plays the deployment controller.
	c := kubetest.Start(t)
	c.MarkDeploymentsAvailable(t)
	res, err := h.Run(sdk.PostCluster,
		plugintest.WithConfig(`{"team": "platform", "replicas": 2}`),
		plugintest.WithKubeconfig(c.Kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs["namespace"] != "kube-system" {
		t.Errorf("outputs = %v", res.Outputs)
	}
	h.RequireIdempotent(t, sdk.PostCluster,
		plugintest.WithConfig(`{"team": "platform", "replicas": 2}`),
		plugintest.WithKubeconfig(c.Kubeconfig))
}

func TestConfigRules(t *testing.T) {
	h := plugintest.New(t, &Plugin{})
	ds := h.ValidateConfig(`{"replicas": 9}`)
	if len(ds) != 2 || ds[0].Path != "replicas" || ds[1].Path != "team" {
		t.Fatalf("diagnostics = %+v, want replicas over max and team required", ds)
	}
}

func TestBinary(t *testing.T) {
	h := plugintest.Start(t, plugintest.Build(t, "."))
	if d := h.Describe(); d.Name != "metrics-server" {
		t.Fatal(d.Name)
	}
}
