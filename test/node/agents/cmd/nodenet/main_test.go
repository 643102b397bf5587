package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// fakeLister serves a NodeList or an error.
type fakeLister struct {
	nodes []corev1.Node
	err   error
}

func (f *fakeLister) List(context.Context, metav1.ListOptions) (*corev1.NodeList, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &corev1.NodeList{Items: f.nodes}, nil
}

func TestAgentSync(t *testing.T) {
	dir := t.TempDir()
	lister := &fakeLister{err: errors.New("connection refused")}
	ops := newFakeOps()
	a := &agent{
		cfg:    config{nodeName: "cp", cniConfDir: dir, resync: time.Second},
		nodes:  lister,
		routes: newRouteManager(ops, (&logSink{}).logf),
	}
	conf := filepath.Join(dir, conflistName)

	// API error: nothing happens, no panic, no exit.
	a.sync(context.Background())
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Fatalf("conflist written without a node: %v", err)
	}

	// Own node has no podCIDR yet.
	lister.err = nil
	lister.nodes = []corev1.Node{
		node("cp", nil, "InternalIP=172.18.0.2"),
		node("worker", []string{"10.244.1.0/24"}, "InternalIP=172.18.0.3"),
	}
	a.sync(context.Background())
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Fatalf("conflist written without a podCIDR: %v", err)
	}
	if got := ops.String(); got != "10.244.1.0/24 via 172.18.0.3" {
		t.Errorf("table = %q", got)
	}

	// podCIDR allocated.
	lister.nodes[0] = node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2")
	a.sync(context.Background())
	got, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := RenderConflist([]string{"10.244.0.0/24"})
	if string(got) != string(want) {
		t.Errorf("conflist =\n%s\nwant\n%s", got, want)
	}

	// The worker is deleted.
	lister.nodes = lister.nodes[:1]
	a.sync(context.Background())
	if len(ops.table) != 0 {
		t.Errorf("table = %q, want empty", ops)
	}
}

func TestAgentRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	lister := &fakeLister{err: errors.New("down")}
	a := &agent{
		cfg:    config{nodeName: "cp", cniConfDir: t.TempDir(), resync: time.Millisecond},
		nodes:  lister,
		routes: newRouteManager(newFakeOps(), (&logSink{}).logf),
	}
	done := make(chan struct{})
	go func() { a.run(ctx); close(done) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	c, err := configFromEnv(env(map[string]string{"NODE_NAME": "n1"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.cniConfDir != "/etc/cni/net.d" || c.resync != 5*time.Second || c.controlPlaneEndpoint != "" {
		t.Errorf("defaults = %+v", c)
	}
	c, err = configFromEnv(env(map[string]string{
		"NODE_NAME": "n1", "CNI_CONF_DIR": "/x", "RESYNC": "250ms",
		"CONTROL_PLANE_ENDPOINT": "marina-control-plane:6443",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.cniConfDir != "/x" || c.resync != 250*time.Millisecond || c.controlPlaneEndpoint != "marina-control-plane:6443" {
		t.Errorf("config = %+v", c)
	}
	for _, bad := range []map[string]string{
		{},
		{"NODE_NAME": "n1", "RESYNC": "5"},
		{"NODE_NAME": "n1", "RESYNC": "-1s"},
	} {
		if _, err := configFromEnv(env(bad)); err == nil {
			t.Errorf("configFromEnv(%v) succeeded, want an error", bad)
		}
	}
}

func TestRestConfig(t *testing.T) {
	inCluster := func() (*rest.Config, error) {
		return &rest.Config{
			Host:            "https://10.96.0.1:443",
			BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
			TLSClientConfig: rest.TLSClientConfig{CAFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"},
		}, nil
	}
	for endpoint, wantHost := range map[string]string{
		"":                          "https://10.96.0.1:443",
		"marina-control-plane:6443": "https://marina-control-plane:6443",
		"[fc00::2]:6443":            "https://[fc00::2]:6443",
	} {
		c, err := restConfig(inCluster, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if c.Host != wantHost {
			t.Errorf("endpoint %q: Host = %q, want %q", endpoint, c.Host, wantHost)
		}
		if c.TLSClientConfig.CAFile == "" || c.BearerTokenFile == "" {
			t.Errorf("endpoint %q: in-cluster credentials lost: %+v", endpoint, c)
		}
	}
	notInCluster := func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	if _, err := restConfig(notInCluster, ""); err == nil {
		t.Error("restConfig hid the in-cluster error")
	}
	// Without the kubernetes Service env vars, an endpoint and the service
	// account files are enough.
	c, err := restConfig(notInCluster, "cp:6443")
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "https://cp:6443" || c.BearerTokenFile != serviceAccountDir+"/token" || c.TLSClientConfig.CAFile != serviceAccountDir+"/ca.crt" {
		t.Errorf("fallback config = %+v", c)
	}
	other := errors.New("cannot read token")
	if _, err := restConfig(func() (*rest.Config, error) { return nil, other }, "cp:6443"); !errors.Is(err, other) {
		t.Errorf("restConfig error = %v, want %v", err, other)
	}
}

// TestAgentWithAPIServer runs one sync through the real client against a
// stub API server on the loopback interface.
func TestAgentWithAPIServer(t *testing.T) {
	list := corev1.NodeList{
		TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
		Items: []corev1.Node{
			node("cp", []string{"10.244.0.0/24"}, "InternalIP=172.18.0.2"),
			node("worker", []string{"10.244.1.0/24"}, "InternalIP=172.18.0.3"),
		},
	}
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&list)
	}))
	defer srv.Close()

	client, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ops := newFakeOps()
	a := &agent{
		cfg:    config{nodeName: "cp", cniConfDir: dir, resync: time.Second},
		nodes:  client.Nodes(),
		routes: newRouteManager(ops, (&logSink{}).logf),
	}
	a.sync(context.Background())
	if fmt.Sprint(paths) != "[GET /api/v1/nodes]" {
		t.Errorf("requests = %v", paths)
	}
	if _, err := os.Stat(filepath.Join(dir, conflistName)); err != nil {
		t.Errorf("conflist not written: %v", err)
	}
	if got := ops.String(); got != "10.244.1.0/24 via 172.18.0.3" {
		t.Errorf("table = %q", got)
	}
}
