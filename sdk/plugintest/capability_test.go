package plugintest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/plugintest"
)

// seer reports what its hooks were given, and asks for a resolver change
// in PreDown; it declares the capabilities in caps.
type seer struct{ caps []string }

func (s seer) Info() sdk.Info {
	return sdk.Info{Name: "seer", Version: "1.0.0", Capabilities: s.caps, Outputs: []string{"dockerHost", "kubeconfig", "mirrorPassword", "connect", "proxy", "caCert", "caKey"}}
}

func (seer) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	out := map[string]string{"dockerHost": req.Env.DockerHost, "proxy": req.Env.Proxy.HTTPS, "caCert": req.Env.LabCA.Cert, "caKey": req.Env.LabCA.Key}
	for _, m := range req.Env.Mirrors {
		out["mirrorPassword"] += m.Password
	}
	if _, err := container.Connect(ctx, req.Env.DockerHost); err != nil {
		out["connect"] = err.Error()
	}
	return &sdk.Result{Outputs: out}, nil
}

func (seer) PostCluster(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	out := map[string]string{"kubeconfig": string(req.Cluster.Kubeconfig) + req.Cluster.KubeconfigPath}
	if _, err := kube.Connect(req.Cluster.Kubeconfig); err != nil {
		out["connect"] = err.Error()
	}
	return &sdk.Result{Outputs: out}, nil
}

func (seer) PreDown(context.Context, *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{HostChanges: []sdk.HostChange{{Resolver: &sdk.ResolverChange{Domain: "demo.internal", Remove: true}, Reason: "seer"}}}, nil
}

// TestUndeclaredCapabilitiesGetNothing: like marina, the harness gives a
// plugin that declares no capability no Docker endpoint, no kubeconfig and
// no registry password — even when the test sets them — and the SDK's
// clients say which capability to declare; a host change it did not declare
// fails the hook. Declared, the same plugin sees all of it.
func TestUndeclaredCapabilitiesGetNothing(t *testing.T) {
	withMirror := plugintest.WithEnv(func(e *sdk.Env) {
		e.DockerHost = "unix:///nonexistent/docker.sock"
		e.Mirrors = []sdk.Mirror{{Name: "docker-io", Port: 5000, RemoteURL: "https://registry-1.docker.io", Username: "u", Password: "secret"}}
		e.Proxy = sdk.Proxy{HTTPS: "http://me:proxysecret@proxy.corp.example:3128", NoProxy: []string{"172.30.0.0/16"}}
		e.LabCA = sdk.LabCA{Cert: "CA CERTIFICATE", Key: "CA KEY"}
	})
	kubeconfig := plugintest.WithKubeconfig([]byte("apiVersion: v1\nkind: Config\n"))

	blind := plugintest.New(t, seer{})
	res, err := blind.Run(sdk.PostUp, withMirror)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs["dockerHost"] != "" || res.Outputs["mirrorPassword"] != "" {
		t.Errorf("undeclared: PostUp saw dockerHost %q, mirror password %q; want both withheld", res.Outputs["dockerHost"], res.Outputs["mirrorPassword"])
	}
	if res.Outputs["caCert"] != "CA CERTIFICATE" || res.Outputs["caKey"] != "" {
		t.Errorf("undeclared: PostUp saw the lab CA %q, key %q; want the certificate and no key", res.Outputs["caCert"], res.Outputs["caKey"])
	}
	if res.Outputs["proxy"] != "http://me@proxy.corp.example:3128" {
		t.Errorf("undeclared: the proxy reads %q; want it without its password", res.Outputs["proxy"])
	}
	if !strings.Contains(res.Outputs["connect"], "sdk.CapDocker") {
		t.Errorf("container.Connect without the capability = %q, want an error naming sdk.CapDocker", res.Outputs["connect"])
	}
	res, err = blind.Run(sdk.PostCluster, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs["kubeconfig"] != "" {
		t.Errorf("undeclared: PostCluster saw a kubeconfig %q", res.Outputs["kubeconfig"])
	}
	if !strings.Contains(res.Outputs["connect"], "sdk.CapKubeconfig") {
		t.Errorf("kube.Connect without the capability = %q, want an error naming sdk.CapKubeconfig", res.Outputs["connect"])
	}
	_, err = blind.Run(sdk.PreDown)
	if !errors.Is(err, plugintest.ErrUndeclaredCapability) || !strings.Contains(err.Error(), sdk.CapHostResolver) {
		t.Errorf("PreDown asking for a resolver change undeclared = %v, want ErrUndeclaredCapability naming %s", err, sdk.CapHostResolver)
	}

	all := plugintest.New(t, seer{caps: []string{sdk.CapDocker, sdk.CapKubeconfig, sdk.CapHostResolver, sdk.CapRegistryCredentials, sdk.CapLabCA}})
	res, err = all.Run(sdk.PostUp, withMirror)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs["dockerHost"] != "unix:///nonexistent/docker.sock" || res.Outputs["mirrorPassword"] != "secret" || res.Outputs["proxy"] != "http://me:proxysecret@proxy.corp.example:3128" {
		t.Errorf("declared: PostUp saw dockerHost %q, mirror password %q", res.Outputs["dockerHost"], res.Outputs["mirrorPassword"])
	}
	if res.Outputs["caKey"] != "CA KEY" {
		t.Errorf("declared: PostUp saw the lab CA's key %q, want it", res.Outputs["caKey"])
	}
	res, err = all.Run(sdk.PostCluster, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Outputs["kubeconfig"], "apiVersion: v1") {
		t.Errorf("declared: PostCluster saw kubeconfig %q", res.Outputs["kubeconfig"])
	}
	if _, err := all.Run(sdk.PreDown); err != nil {
		t.Errorf("declared: PreDown = %v", err)
	}
}

// TestUnknownCapabilityRefused: a capability this SDK does not know (a
// typo) is an invalid Info, as an unknown hook name would be.
func TestUnknownCapabilityRefused(t *testing.T) {
	_, err := sdk.Describe(seer{caps: []string{"dokcer"}})
	if err == nil || !strings.Contains(err.Error(), `capability "dokcer" is unknown`) || !strings.Contains(err.Error(), sdk.CapDocker) {
		t.Errorf("Describe with capability dokcer = %v, want an error naming it and the known ones", err)
	}
}
