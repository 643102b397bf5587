package externaldns

import (
	"context"
	"fmt"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// Test network for this package's tier-2 tests; other packages use
// 172.31/16 (dockertest), 172.28/16 and marina's own 172.30/16.
const (
	testSubnet = "172.29.0.0/16"
	testEtcdIP = "172.29.255.52"
)

// startEtcd runs the test etcd image on a fresh network, as localdns runs it
// on the kind bridge, and waits until it answers.
func startEtcd(t *testing.T) (id, endpoint string) {
	t.Helper()
	img := dockertest.Image(t, "etcd")
	n := dockertest.Network(t, testSubnet)
	endpoint = "http://" + testEtcdIP + ":2379"
	id = dockertest.Run(t, "--network", n.ID, "--ip", testEtcdIP, img,
		"--name", "marina-externaldns-test",
		"--listen-client-urls", "http://0.0.0.0:2379",
		"--advertise-client-urls", endpoint,
		"--unsafe-no-fsync")
	dockertest.WaitFor(t, 60*time.Second, 500*time.Millisecond, "etcd endpoint health", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return tryExec(ctx, id, "etcdctl", "endpoint", "health")
	})
	return id, endpoint
}

// tryExec runs `docker exec id cmd...`, returning its failure instead of
// failing the test (for polling).
func tryExec(ctx context.Context, id string, cmd ...string) error {
	c := osexec.CommandContext(ctx, "docker", append([]string{"exec", id}, cmd...)...)
	c.WaitDelay = 5 * time.Second
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// etcdKeys lists the keys under /skydns/ with etcdctl in the container: an
// observer independent of the plugin's own etcd client.
func etcdKeys(t *testing.T, id string) []string {
	t.Helper()
	out := dockertest.Exec(t, id, "etcdctl", "get", "--prefix", "--keys-only", EtcdPrefix)
	var keys []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keys = append(keys, l)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestPreClusterDeleteRealEtcd writes the records two clusters' ExternalDNS
// would write (strict and TXT-registry styles, plus hand-made records) into a
// real etcd with etcdctl, runs PreClusterDelete for "dev" through the plugin
// harness, and checks with etcdctl that exactly dev's records are gone. A
// second run finds nothing to remove and succeeds; with etcd stopped the hook
// fails with a StaleRecordsError that says what is left and how to fix it.
func TestPreClusterDeleteRealEtcd(t *testing.T) {
	id, endpoint := startEtcd(t)

	n := 0
	dev := etcdWriter{owner: "dev", strict: true, next: &n}
	devOld := etcdWriter{owner: "dev", next: &n} // written before strictlyOwned was set
	prod := etcdWriter{owner: "prod", strict: true, next: &n}
	prodOld := etcdWriter{owner: "prod", next: &n}
	var all []entry
	all = append(all, mark(true, dev.publish("web.default.dev.demo.internal", "service/default/web", "172.30.1.16", "172.30.1.17")...)...)
	all = append(all, mark(true, dev.publish("shop.demo.internal", "service/default/shop", "172.30.1.18")...)...)
	all = append(all, mark(true, devOld.publish("old.default.dev.demo.internal", "service/default/old", "172.30.1.19")...)...)
	all = append(all, mark(false, prod.publish("shop.demo.internal", "service/default/shop", "172.30.2.16")...)...)
	all = append(all, mark(false, prod.publish("x.web.default.dev.demo.internal", "service/default/x", "172.30.2.17")...)...)
	all = append(all, mark(false, prodOld.publish("web.default.prod.demo.internal", "service/default/web", "172.30.2.18")...)...)
	all = append(all, mark(false,
		raw("/skydns/internal/demo/gateway", `{"host":"172.30.0.1"}`),
		raw("/skydns/internal/demo/dev/default/web/manual01", `{"host":"elsewhere.example.test","targetstrip":1}`),
	)...)
	var want []string
	for _, e := range all {
		dockertest.Exec(t, id, "etcdctl", "put", e.Key, string(e.Value))
		if !e.del {
			want = append(want, e.Key)
		}
	}
	slices.Sort(want)

	h := plugintest.New(t, New())
	opts := []plugintest.Option{
		plugintest.WithDeps(map[string]map[string]string{LocalDNS: {LocalDNSEtcdOutput: endpoint}}),
		// No API server here: skip stopping ExternalDNS (the tier-3 test covers it).
		plugintest.WithCluster(func(c *sdk.Cluster) { c.Kubeconfig = []byte{} }),
	}
	res, err := h.Run(sdk.PreClusterDelete, opts...)
	if err != nil {
		t.Fatalf("PreClusterDelete: %v", err)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %+v", res.Warnings)
	}
	if got := etcdKeys(t, id); !slices.Equal(got, want) {
		t.Fatalf("keys left after deleting dev:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if p := h.Progress(); len(p) == 0 || !strings.Contains(p[len(p)-1], "removed 7 DNS record(s) of dev") {
		t.Errorf("progress = %q, want the count of removed records (7)", p)
	}

	// Idempotent: nothing left of dev, the same (empty) result, other records intact.
	h.RequireIdempotent(t, sdk.PreClusterDelete, opts...)
	if p := h.Progress(); !strings.Contains(p[len(p)-1], "removed 0 DNS record(s)") {
		t.Errorf("second run progress = %q, want 0 removed", p)
	}

	// The Env fallback (no localdns output) reaches the same etcd: prod's turn.
	if _, err := h.Run(sdk.PreClusterDelete,
		plugintest.WithEnv(func(e *sdk.Env) { e.DNSEtcdIP = testEtcdIP }),
		plugintest.WithCluster(func(c *sdk.Cluster) { c.Name = "prod"; c.Kubeconfig = []byte{} })); err != nil {
		t.Fatalf("PreClusterDelete prod: %v", err)
	}
	want = []string{"/skydns/internal/demo/dev/default/web/manual01", "/skydns/internal/demo/gateway"}
	if got := etcdKeys(t, id); !slices.Equal(got, want) {
		t.Fatalf("keys left after deleting prod: %q, want only the hand-made %q", got, want)
	}

	// etcd down: an error naming the stale records, the endpoint and the fix.
	dockertest.Docker(t, "stop", "-t", "1", id)
	_, err = h.Run(sdk.PreClusterDelete, append(opts, plugintest.WithTimeout(8*time.Second))...)
	if err == nil {
		t.Fatal("PreClusterDelete succeeded with etcd stopped")
	}
	t.Logf("with etcd stopped: %v", err)
	for _, s := range []string{"DNS records of cluster dev", endpoint, "marina cluster delete dev", "etcdctl"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
