package dockerfake_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/dockerfake"
	"github.com/bcollard/marina/sdk/plugintest"
)

// cache is a plugin whose PostUp runs one container on the lab's bridge,
// as a third-party plugin would.
type cache struct{}

func (cache) Info() sdk.Info {
	return sdk.Info{
		Name: "acme-cache", Version: "1.0.0", Description: "Runs a cache on the lab's bridge",
		Capabilities: []string{sdk.CapDocker},
		Outputs:      []string{"endpoint"},
	}
}

func (cache) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	c, err := container.Connect(ctx, req.Env.DockerHost)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out, err := c.Ensure(ctx, container.Spec{
		Name:    "acme-cache",
		Image:   "quay.io/acme/cache:v1",
		Network: req.Env.NetworkName,
		IP:      "172.30.255.60",
		Files:   []container.File{{Path: "/etc/acme/config.yml", Content: []byte("zone: " + req.Env.DNSZone + "\n"), Mode: 0o600}},
	})
	if err != nil {
		return nil, err
	}
	req.Progress("acme-cache %s", out.Action)
	return &sdk.Result{
		Outputs: map[string]string{"endpoint": "http://172.30.255.60:5000"},
		Steady:  &sdk.Steady{Containers: []sdk.SteadyContainer{out.Steady()}},
	}, nil
}

// ExampleStart tests a plugin's PostUp hook with sdk/plugintest against
// the fake engine. (An example cannot be given a *testing.T: this
// package's TestExamplePostUp runs the same steps, and more.)
func ExampleStart() {
	testPostUp := func(t *testing.T) {
		eng := dockerfake.Start(t, dockerfake.WithImages("quay.io/acme/cache:v1"))
		h := plugintest.New(t, cache{})
		docker := plugintest.WithEnv(func(e *sdk.Env) { e.DockerHost = eng.Host() })

		if _, err := h.Run(sdk.PostUp, docker); err != nil {
			t.Fatal(err)
		}
		c, ok := eng.Container("acme-cache")
		if !ok || !c.Running() || c.Networks["kind"].IP != "172.30.255.60" {
			t.Fatalf("acme-cache: %+v", c)
		}
		if got := string(c.Files["/etc/acme/config.yml"].Content); got != "zone: demo.internal\n" {
			t.Fatalf("config.yml = %q", got)
		}

		// Stopped behind the plugin's back: the next PostUp starts it again.
		eng.Stop("acme-cache")
		if _, err := h.Run(sdk.PostUp, docker); err != nil {
			t.Fatal(err)
		}
		if again, _ := eng.Container("acme-cache"); !again.Running() || again.ID != c.ID {
			t.Fatalf("after a second PostUp: %+v", again)
		}
	}
	_ = testPostUp
}

// TestExamplePostUp runs ExampleStart's test, and checks what else a
// plugin test can see: progress, idempotence, the requests sent.
func TestExamplePostUp(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("quay.io/acme/cache:v1"))
	h := plugintest.New(t, cache{})
	docker := plugintest.WithEnv(func(e *sdk.Env) { e.DockerHost = eng.Host() })

	res, err := h.Run(sdk.PostUp, docker)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := eng.Container("acme-cache")
	if !ok || !c.Running() || c.Networks["kind"].IP != "172.30.255.60" {
		t.Fatalf("acme-cache: %+v", c)
	}
	if got := string(c.Files["/etc/acme/config.yml"].Content); got != "zone: demo.internal\n" {
		t.Fatalf("config.yml = %q", got)
	}
	if res.Steady == nil || res.Steady.Containers[0].ID != c.ID || res.Steady.Containers[0].Spec != c.Labels[container.LabelSpec] {
		t.Fatalf("Steady = %+v, container %s %v", res.Steady, c.ID, c.Labels)
	}
	if p := strings.Join(h.Progress(), "|"); p != "acme-cache created" {
		t.Fatalf("progress = %q", p)
	}

	// A re-run changes nothing.
	n := len(eng.Requests())
	if _, err := h.Run(sdk.PostUp, docker); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(h.Progress(), "|"); p != "acme-cache unchanged" {
		t.Fatalf("progress = %q", p)
	}
	for _, r := range eng.Requests()[n:] {
		if r.Method != "GET" && r.Method != "HEAD" {
			t.Errorf("an idempotent PostUp sent %s", r)
		}
	}

	// Stopped behind the plugin's back: the next PostUp starts it again.
	eng.Stop("acme-cache")
	if _, err := h.Run(sdk.PostUp, docker); err != nil {
		t.Fatal(err)
	}
	if again, _ := eng.Container("acme-cache"); !again.Running() || again.ID != c.ID {
		t.Fatalf("after a second PostUp: %+v", again)
	}
	if p := strings.Join(h.Progress(), "|"); p != "acme-cache started" {
		t.Fatalf("progress = %q", p)
	}

	// Without the engine's endpoint (the default: plugintest never points a
	// hook at the machine's engine), the hook fails rather than touching
	// anything.
	if _, err := h.Run(sdk.PostUp, plugintest.WithEnv(func(e *sdk.Env) { e.DockerHost = plugintest.NoDockerHost })); err == nil {
		t.Fatal("PostUp without an engine succeeded")
	}
}

// TestLabNetworkMatchesPlugintest: the network Start creates is the one
// plugintest's default environment names.
func TestLabNetworkMatchesPlugintest(t *testing.T) {
	env := plugintest.DefaultEnv(t.TempDir())
	var lab *dockerfake.Network
	eng := dockerfake.Start(t)
	for _, n := range eng.Networks() {
		if n.Name == env.NetworkName {
			lab = &n
		}
	}
	if lab == nil || lab.Name != dockerfake.LabNetwork || lab.Subnet != env.BridgeCIDR || lab.Subnet != dockerfake.LabSubnet || lab.Gateway != env.Gateway {
		t.Fatalf("lab network %+v; plugintest.DefaultEnv has %s %s gateway %s", lab, env.NetworkName, env.BridgeCIDR, env.Gateway)
	}
}
