package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bcollard/marina/test/standin"
)

// hookCall is one line of the hookrecorder plugin's record (testdata/hookrecorder).
type hookCall struct {
	Hook        string `json:"hook"`
	Cluster     string `json:"cluster,omitempty"`
	DockerHost  string `json:"dockerHost"`
	Driver      string `json:"driver"`
	NetworkName string `json:"networkName"`
	Kubeconfig  bool   `json:"kubeconfig"`
}

// TestHookEnv (issue 24): every hook of every command — up, cluster create
// and delete, fleet create and delete, down and destroy — gets the lab's
// Docker host, driver and network in its environment, as a third-party
// plugin sees them: a real plugin process (testdata/hookrecorder),
// installed with `marina plugin install`, records every call it gets. The
// SDK tells plugin authors to connect to req.Env.DockerHost (an empty one
// used to fall back to $DOCKER_HOST, which on a Mac is the wrong engine).
// The recorder declares the docker capability and not kubeconfig (issue
// 26): install needs --yes for the grant, and no cluster hook of any
// command hands it a kubeconfig.
func TestHookEnv(t *testing.T) {
	paths := standin.Build(t)
	l := newLab(t, "", "[]", paths.Env())
	recorder := filepath.Join(t.TempDir(), "marina-plugin-hookrecorder")
	build := exec.Command("go", "build", "-o", recorder, "./testdata/hookrecorder")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the hookrecorder plugin: %v\n%s", err, out)
	}
	l.run(t, time.Minute, "plugin", "install", recorder, "--yes")
	calls := filepath.Join(l.home, "hook-calls.jsonl")
	cfg := filepath.Join(l.home, ".marina", "config.yaml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Under labConfig's plugins: the recorder, and no built-in whose
	// PostCluster needs pods (no kubelet plays for this lab's clusters).
	_, err = fmt.Fprintf(f, `  hookrecorder:
    enabled: true
    config:
      file: %s
  metallb: {enabled: false}
  coredns: {enabled: false}
  externaldns: {enabled: false}
`, calls)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(l.home, "fleet.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: marina.dev/v1alpha1
kind: Fleet
metadata: {name: e2e-hk}
spec:
  clusters:
  - e2e-hk-member
`), 0o600); err != nil {
		t.Fatal(err)
	}

	const one, two, member = "e2e-hk-one", "e2e-hk-two", "e2e-hk-member"
	l.run(t, upTimeout, "up", "--progress", "plain")
	l.run(t, createTimeout, "cluster", "create", one, "--progress", "plain")
	l.run(t, createTimeout, "fleet", "create", "-f", manifest)
	l.run(t, deleteTimeout, "cluster", "delete", one, "--progress", "plain")
	l.run(t, deleteTimeout, "fleet", "delete", "e2e-hk", "--yes", "--progress", "plain")
	l.run(t, createTimeout, "cluster", "create", two, "--progress", "plain")
	l.run(t, deleteTimeout, "down", "--progress", "plain")
	l.run(t, deleteTimeout+upTimeout, "destroy", "--yes", "--progress", "plain")

	want := []hookCall{
		{Hook: "PostUp"},
		{Hook: "PreCluster", Cluster: one}, {Hook: "PostCluster", Cluster: one},
		{Hook: "PreCluster", Cluster: member}, {Hook: "PostCluster", Cluster: member},
		{Hook: "PreClusterDelete", Cluster: one},
		{Hook: "PreClusterDelete", Cluster: member},
		{Hook: "PreCluster", Cluster: two}, {Hook: "PostCluster", Cluster: two},
		{Hook: "PreDown"},
		{Hook: "PreClusterDelete", Cluster: two},
		{Hook: "PreDestroy"},
	}
	dockerHost := os.Getenv("DOCKER_HOST")
	if dockerHost == "" {
		dockerHost = "unix:///var/run/docker.sock"
	}
	for i := range want {
		want[i].DockerHost, want[i].Driver, want[i].NetworkName = dockerHost, "host", network
	}
	got := readHookCalls(t, calls)
	if !slices.Equal(got, want) {
		t.Errorf("the hookrecorder plugin got:\n%s\nwant:\n%s", hookCallLines(got), hookCallLines(want))
	}
}

func readHookCalls(t *testing.T, path string) []hookCall {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the hookrecorder plugin recorded nothing: %v", err)
	}
	defer f.Close()
	var calls []hookCall
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c hookCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

func hookCallLines(calls []hookCall) string {
	var s string
	for _, c := range calls {
		s += fmt.Sprintf("  %-16s %-14s dockerHost=%q driver=%q network=%q kubeconfig=%v\n", c.Hook, c.Cluster, c.DockerHost, c.Driver, c.NetworkName, c.Kubeconfig)
	}
	return s
}
