package registries_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bcollard/marina/plugins/registries"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/dockerfake"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestMirrorsTakeTheProxy (issue 25): behind a corporate proxy a mirror's
// container gets the lab's proxy variables (its upstream is reached
// through the proxy, the lab's own addresses bypass it); a changed proxy
// recreates it on the next PostUp; without one it gets none. The engine is
// sdk/dockerfake's.
func TestMirrorsTakeTheProxy(t *testing.T) {
	eng := dockerfake.Start(t)
	h := plugintest.New(t, registries.New())
	proxy := sdk.Proxy{HTTP: "http://proxy.corp.example:3128", HTTPS: "http://proxy.corp.example:3128", NoProxy: []string{"corp.example", "172.30.0.0/16", "demo.internal"}}
	env := func(p sdk.Proxy) plugintest.Option {
		return plugintest.WithEnv(func(e *sdk.Env) {
			e.DockerHost = eng.Host()
			e.Mirrors = []sdk.Mirror{{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io"}}
			e.Proxy = p
		})
	}
	if _, err := h.Run(sdk.PostUp, env(proxy)); err != nil {
		t.Fatal(err)
	}
	c, ok := eng.Container("registry-dockerio")
	if !ok {
		t.Fatalf("no mirror container; containers: %+v", eng.Containers())
	}
	for _, want := range []string{"HTTPS_PROXY=http://proxy.corp.example:3128", "https_proxy=http://proxy.corp.example:3128", "NO_PROXY=corp.example,172.30.0.0/16,demo.internal"} {
		if !slices.Contains(c.Env, want) {
			t.Errorf("mirror env lacks %q: %v", want, c.Env)
		}
	}

	moved := proxy
	moved.HTTPS = "http://proxy2.corp.example:8080"
	if _, err := h.Run(sdk.PostUp, env(moved)); err != nil {
		t.Fatal(err)
	}
	again, _ := eng.Container("registry-dockerio")
	if again.ID == c.ID || !slices.Contains(again.Env, "HTTPS_PROXY=http://proxy2.corp.example:8080") {
		t.Errorf("after the proxy changed: id %s (was %s), env %v; want a new container with the new proxy", again.ID, c.ID, again.Env)
	}

	if _, err := h.Run(sdk.PostUp, env(sdk.Proxy{})); err != nil {
		t.Fatal(err)
	}
	none, _ := eng.Container("registry-dockerio")
	for _, kv := range none.Env {
		if len(kv) > 6 && (kv[:6] == "HTTPS_" || kv[:6] == "https_" || kv[:3] == "NO_") {
			t.Errorf("without a proxy the mirror still has %s", kv)
		}
	}
}

// TestMirrorsTrustExtraCAs (issue 25): the company's CAs reach every mirror
// container beside the image's roots (SSL_CERT_DIR), so an upstream behind a
// TLS-intercepting proxy verifies; an emptied list recreates the mirror
// without them.
func TestMirrorsTrustExtraCAs(t *testing.T) {
	eng := dockerfake.Start(t)
	h := plugintest.New(t, registries.New())
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	env := func(cas string) plugintest.Option {
		return plugintest.WithEnv(func(e *sdk.Env) {
			e.DockerHost = eng.Host()
			e.Mirrors = []sdk.Mirror{{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io"}}
			e.ExtraCAs = cas
		})
	}
	if _, err := h.Run(sdk.PostUp, env(pem)); err != nil {
		t.Fatal(err)
	}
	c, _ := eng.Container("registry-dockerio")
	if f, ok := c.Files["/etc/marina/ca/extra-cas.pem"]; !ok || string(f.Content) != pem || f.Mode != 0o644 {
		t.Errorf("the mirror's extra CAs: %+v (files %v)", f, c.Files)
	}
	if !slices.Contains(c.Env, "SSL_CERT_DIR=/etc/ssl/certs:/etc/marina/ca") {
		t.Errorf("mirror env lacks SSL_CERT_DIR: %v", c.Env)
	}
	if _, err := h.Run(sdk.PostUp, env("")); err != nil {
		t.Fatal(err)
	}
	again, _ := eng.Container("registry-dockerio")
	if _, ok := again.Files["/etc/marina/ca/extra-cas.pem"]; ok || again.ID == c.ID || slices.Contains(again.Env, "SSL_CERT_DIR=/etc/ssl/certs:/etc/marina/ca") {
		t.Errorf("after the list emptied: id %s (was %s), env %v, files %v", again.ID, c.ID, again.Env, again.Files)
	}
}

// TestPreClusterExtraCAs (issue 25): every node gets the company's CAs and
// a containerd drop-in that reads them beside the image's roots, placed
// before containerd starts (PreCluster node files); none without a list.
func TestPreClusterExtraCAs(t *testing.T) {
	h := plugintest.New(t, registries.New())
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	res, err := h.Run(sdk.PreCluster, plugintest.WithEnv(func(e *sdk.Env) { e.Mirrors, e.ExtraCAs = defaultMirrors(), pem }))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range res.Kind.NodeFiles {
		files[f.Path] = string(f.Content)
	}
	if files["/etc/marina/ca/extra-cas.pem"] != pem ||
		!strings.Contains(files["/etc/systemd/system/containerd.service.d/marina-ca.conf"], "[Service]\nEnvironment=SSL_CERT_DIR=/etc/ssl/certs:/etc/marina/ca\n") {
		t.Errorf("node files: %v", files)
	}
	res, err = h.Run(sdk.PreCluster, plugintest.WithEnv(func(e *sdk.Env) { e.Mirrors = nil }))
	if err != nil || (res.Kind != nil && len(res.Kind.NodeFiles) != 0) {
		t.Errorf("without extra CAs or mirrors: %+v %v", res.Kind, err)
	}
}
