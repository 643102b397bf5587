package plugintest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// reacher is a plugin whose hooks reach for the cluster (PostCluster: apply
// a ConfigMap with sdk/kube) and for Docker (PostUp: connect with
// sdk/container), as real plugins do.
type reacher struct{}

func (reacher) Info() sdk.Info {
	return sdk.Info{Name: "reacher", Version: "1.0.0", Capabilities: []string{sdk.CapDocker, sdk.CapKubeconfig}}
}

func (reacher) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	c, err := kube.Connect(req.Cluster.Kubeconfig)
	if err != nil {
		return nil, err
	}
	objs, err := kube.DecodeManifests([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\n"))
	if err != nil {
		return nil, err
	}
	return &sdk.Result{}, c.Apply(ctx, "reacher", objs...)
}

func (reacher) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	c, err := container.Connect(ctx, req.Env.DockerHost)
	if err != nil {
		return nil, err
	}
	_ = c.Close()
	return &sdk.Result{}, errors.New("reached a Docker engine")
}

// TestHarnessTalksToNothing: by default a hook reaches neither a live lab's
// API server (the kubeconfig used to point at 127.0.0.1:7001, slot 1 of
// the user's lab) nor the machine's Docker engine (it used to fall back to
// /var/run/docker.sock); each attempt fails at once with an error that
// says how to give the hook a real one.
func TestHarnessTalksToNothing(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	os.Unsetenv("DOCKER_HOST")
	h := plugintest.New(t, reacher{})

	_, err := h.Run(sdk.PostCluster)
	if err == nil || !strings.Contains(err.Error(), "plugintest: no Kubernetes API server behind this cluster's kubeconfig") {
		t.Errorf("PostCluster against the default kubeconfig = %v, want the harness's message", err)
	}
	if strings.Contains(plugintest.DefaultEnv("").DockerHost, "/var/run/docker.sock") {
		t.Errorf("DefaultEnv's DockerHost is the machine's engine: %s", plugintest.DefaultEnv("").DockerHost)
	}
	_, err = h.Run(sdk.PostUp)
	if err == nil || !strings.Contains(err.Error(), "plugintest-has-no-docker-give-one-WithEnv-dockerfake-or-dockertest.sock") {
		t.Errorf("PostUp against the default Docker endpoint = %v, want a connection error naming the fix", err)
	}
}

// TestQuiet: a passing test that uses the harness prints nothing but the
// test runner's verdict (go-plugin's test connection printed "[DEBUG]
// stdio EOF" lines to stderr in every test). It runs this test binary's
// TestFakeHost and TestHarnessTalksToNothing in a child process.
func TestQuiet(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^(TestFakeHost|TestHarnessTalksToNothing)$", "-test.count", "1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child tests: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "PASS" {
		t.Errorf("a passing harness test printed more than PASS:\n%s", out)
	}
}

// TestWithKubeconfigRealAPIServer (tier 3): an author's test runs a hook
// against a real kube-apiserver (sdk/kubetest) through the harness, and the
// hook finds the same kubeconfig on disk at KubeconfigPath.
func TestWithKubeconfigRealAPIServer(t *testing.T) {
	c := kubetest.Start(t)
	h := plugintest.New(t, reacher{})
	if _, err := h.Run(sdk.PostCluster, plugintest.WithKubeconfig(c.Kubeconfig)); err != nil {
		t.Fatalf("PostCluster against a real API server: %v", err)
	}
	if out := c.Kubectl(t, "get", "configmap", "x", "-n", "default", "-o", "name"); strings.TrimSpace(out) != "configmap/x" {
		t.Errorf("the hook's ConfigMap: %q", out)
	}
	rec := &recorder{}
	hr := plugintest.New(t, rec)
	if _, err := hr.Run(sdk.PostCluster, plugintest.WithKubeconfig(c.Kubeconfig)); err != nil {
		t.Fatal(err)
	}
	req, _, file := rec.last()
	if string(req.Cluster.Kubeconfig) != string(c.Kubeconfig) || file != string(c.Kubeconfig) {
		t.Errorf("kubeconfig in the request / on disk is not the one given")
	}
}
