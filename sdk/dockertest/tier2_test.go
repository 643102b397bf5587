package dockertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tier-2 tests of this package share one subnet and run one at a time. It
// stays clear of marina's default (172.30.0.0/16); other packages pick their own.
const testSubnet = "172.31.0.0/16"

// httpGet fetches u (only loopback or container addresses of this machine), never
// through a proxy, and returns the status code and body.
func httpGet(ctx context.Context, u string) (int, string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, "", err
	}
	host, err := netip.ParseAddr(pu.Hostname())
	if err != nil {
		return 0, "", fmt.Errorf("httpGet %s: host must be an IP address: %w", u, err)
	}
	if err := CheckLocal(host); err != nil {
		return 0, "", err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// waitHTTP200 waits (bounded) until u answers 200.
func waitHTTP200(t *testing.T, what, u string) {
	t.Helper()
	WaitFor(t, 60*time.Second, 250*time.Millisecond, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		code, body, err := httpGet(ctx, u)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", u, code, strings.TrimSpace(body))
		}
		return nil
	})
}

// skydnsRecord is the value ExternalDNS's coredns provider writes to etcd.
type skydnsRecord struct {
	Host string `json:"host"`
	Text string `json:"text,omitempty"`
	TTL  uint32 `json:"ttl,omitempty"`
}

// putRecord writes a record the way ExternalDNS does: under
// /skydns/<reversed name labels>/<random id>, with etcdctl in the etcd container.
func putRecord(t *testing.T, etcd, name string, rec skydnsRecord) {
	t.Helper()
	labels := strings.Split(name, ".")
	slices.Reverse(labels)
	key := "/skydns/" + strings.Join(labels, "/") + "/" + randHex(4)
	val, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if out := Exec(t, etcd, "etcdctl", "put", key, string(val)); out != "OK" {
		t.Fatalf("etcdctl put %s: %q, want OK", key, out)
	}
}

func queryA(t *testing.T, server netip.AddrPort, name string) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := QueryA(ctx, server, name)
	var s []string
	for _, a := range addrs {
		s = append(s, a.String())
	}
	slices.Sort(s)
	return s, err
}

// TestCoreDNSServesExternalDNSRecordsFromEtcd runs marina's local DNS pair as
// built here — etcd at .255.52 and CoreDNS at .255.53 on a test network — writes
// records as ExternalDNS's coredns provider does, and asks CoreDNS for them over
// UDP. A second CoreDNS (.255.54, hosts plugin) is the forward target for every
// other name, so nothing is ever forwarded off this machine.
func TestCoreDNSServesExternalDNSRecordsFromEtcd(t *testing.T) {
	etcdImg, dnsImg := Image(t, "etcd"), Image(t, "coredns")
	n := Network(t, testSubnet)
	const etcdIP, dnsIP, upstreamIP = "172.31.255.52", "172.31.255.53", "172.31.255.54"

	etcd := Run(t, "--network", n.ID, "--ip", etcdIP, etcdImg,
		"--name", "marina-test",
		"--listen-client-urls", "http://0.0.0.0:2379",
		"--advertise-client-urls", "http://"+etcdIP+":2379",
		"--unsafe-no-fsync")

	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Corefile", `internal:53 {
    errors
    log
    ready :8181
    health :8080
    etcd internal {
        path /skydns
        endpoint http://`+etcdIP+`:2379
    }
}
.:53 {
    errors
    cache 5
    loop
    forward . `+upstreamIP+`:53
}
`)
	write("Upstream", `.:53 {
    hosts {
        172.31.9.9 upstream.example.test
    }
}
`)
	mount := []string{"-v", dir + ":/etc/coredns:ro"}
	Run(t, append(append([]string{"--network", n.ID, "--ip", upstreamIP}, mount...),
		dnsImg, "-conf", "/etc/coredns/Upstream")...)

	start := time.Now()
	WaitFor(t, 60*time.Second, 500*time.Millisecond, "etcd endpoint health", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := docker(ctx, "exec", etcd, "etcdctl", "endpoint", "health")
		return err
	})
	t.Logf("etcd healthy after %s", time.Since(start).Round(time.Millisecond))
	putRecord(t, etcd, "web.demo.internal", skydnsRecord{
		Host: "172.31.1.5", TTL: 30,
		Text: `"heritage=external-dns,external-dns/owner=marina-test,external-dns/resource=service/default/web"`,
	})

	Run(t, append(append([]string{"--network", n.ID, "--ip", dnsIP}, mount...),
		dnsImg, "-conf", "/etc/coredns/Corefile")...)
	waitHTTP200(t, "CoreDNS ready", "http://"+dnsIP+":8181/ready")
	waitHTTP200(t, "CoreDNS health", "http://"+dnsIP+":8080/health")
	t.Logf("CoreDNS ready after %s", time.Since(start).Round(time.Millisecond))

	server := netip.AddrPortFrom(netip.MustParseAddr(dnsIP), 53)
	got, err := queryA(t, server, "web.demo.internal")
	if err != nil || !slices.Equal(got, []string{"172.31.1.5"}) {
		t.Fatalf("A web.demo.internal = %v, %v; want [172.31.1.5]", got, err)
	}

	// Records are read from etcd live: a second endpoint of the same name shows up.
	putRecord(t, etcd, "web.demo.internal", skydnsRecord{Host: "172.31.1.6", TTL: 30})
	got, err = queryA(t, server, "web.demo.internal")
	if err != nil || !slices.Equal(got, []string{"172.31.1.5", "172.31.1.6"}) {
		t.Fatalf("A web.demo.internal after a second record = %v, %v; want [172.31.1.5 172.31.1.6]", got, err)
	}

	if got, err := queryA(t, server, "missing.demo.internal"); !IsNXDomain(err) {
		t.Fatalf("A missing.demo.internal = %v, %v; want NXDOMAIN", got, err)
	}

	// Any other name goes to the forward target: the upstream container.
	got, err = queryA(t, server, "upstream.example.test")
	if err != nil || !slices.Equal(got, []string{"172.31.9.9"}) {
		t.Fatalf("A upstream.example.test (forwarded) = %v, %v; want [172.31.9.9]", got, err)
	}
}

// buildSmokeImage builds a one-file FROM scratch image unique to this run, tagged
// ref, and returns its id; it is removed by id when the test ends.
func buildSmokeImage(t *testing.T, ref string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nonce"), []byte(randHex(16)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY nonce /nonce\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	args := append(append([]string{"build", "-q"}, LabelArgs(t)...), "-t", ref, dir)
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0") // the classic builder, as build.sh
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker build %s: %v", ref, err)
	}
	id := strings.TrimSpace(string(out))
	if !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("docker build -q printed %q, want an image id", id)
	}
	t.Cleanup(func() { remove(t, "image", "rm", "-f", id) })
	return id
}

// removeImage removes image id (all its tags) and checks it is gone, so that the
// next pull has to transfer it.
func removeImage(t *testing.T, id string) {
	t.Helper()
	Docker(t, "image", "rm", "-f", id)
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	if _, err := docker(ctx, "image", "inspect", id); err == nil {
		t.Fatalf("image %s still present after docker image rm", id)
	}
}

func imageID(t *testing.T, ref string) string {
	t.Helper()
	return Docker(t, "image", "inspect", "--format", "{{.Id}}", ref)
}

// TestRegistryPushPullAndPullThroughCache pushes a unique image to the registry
// image on a published loopback port, pulls it back, then pulls it through a
// second registry configured as a pull-through cache of the first — and again
// after the first was replaced by an empty registry, from the cache alone.
func TestRegistryPushPullAndPullThroughCache(t *testing.T) {
	regImg := Image(t, "registry")
	n := Network(t, testSubnet)
	const originIP, cacheIP = "172.31.255.60", "172.31.255.61"

	origin := Run(t, "--network", n.ID, "--ip", originIP, "-p", "127.0.0.1::5000", regImg)
	originAddr := HostPort(t, origin, "5000/tcp")
	waitHTTP200(t, "origin registry", "http://"+originAddr.String()+"/v2/")

	tag := randHex(6)
	ref := originAddr.String() + "/marina-test/smoke:" + tag
	id := buildSmokeImage(t, ref)
	Docker(t, "push", ref)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, body, err := httpGet(ctx, "http://"+originAddr.String()+"/v2/marina-test/smoke/tags/list")
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"`+tag+`"`) {
		t.Fatalf("origin tags/list = %d %q, %v; want tag %s listed", code, body, err, tag)
	}

	removeImage(t, id)
	Docker(t, "pull", ref)
	if got := imageID(t, ref); got != id {
		t.Fatalf("pulled %s has id %s, want the pushed %s", ref, got, id)
	}

	cache := Run(t, "--network", n.ID, "--ip", cacheIP, "-p", "127.0.0.1::5000",
		"-e", "REGISTRY_PROXY_REMOTEURL=http://"+net.JoinHostPort(originIP, "5000"), regImg)
	cacheAddr := HostPort(t, cache, "5000/tcp")
	waitHTTP200(t, "pull-through cache registry", "http://"+cacheAddr.String()+"/v2/")
	viaCache := cacheAddr.String() + "/marina-test/smoke:" + tag

	removeImage(t, id)
	Docker(t, "pull", viaCache)
	if got := imageID(t, viaCache); got != id {
		t.Fatalf("pulled through the cache %s has id %s, want %s", viaCache, got, id)
	}

	// The cache kept what it served: replace the origin by an empty registry at the
	// same address (an absent one would cost connect timeouts on every request) and
	// the image still comes, from the cache alone.
	Docker(t, "container", "rm", "-f", "-v", origin)
	Run(t, "--network", n.ID, "--ip", originIP, regImg)
	removeImage(t, id)
	Docker(t, "pull", viaCache)
	if got := imageID(t, viaCache); got != id {
		t.Fatalf("pulled from the cache alone %s has id %s, want %s", viaCache, got, id)
	}
}

// TestCleanupRemovesByID checks that what Network and Run create is gone, by id,
// once the (sub)test that created it has ended.
func TestCleanupRemovesByID(t *testing.T) {
	img := Image(t, "etcd")
	var netID, ctrID string
	t.Run("create", func(t *testing.T) {
		n := Network(t, testSubnet)
		netID = n.ID
		ctrID = Run(t, "--network", n.ID, img, "--unsafe-no-fsync")
		if state := Docker(t, "container", "inspect", "--format", "{{.State.Status}}", ctrID); state != "running" {
			t.Fatalf("container %.12s is %s, want running", ctrID, state)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	if _, err := docker(ctx, "container", "inspect", ctrID); err == nil || !isNotFound(err) {
		t.Errorf("container %.12s still exists after its test ended (inspect: %v)", ctrID, err)
	}
	if _, err := docker(ctx, "network", "inspect", netID); err == nil || !isNotFound(err) {
		t.Errorf("network %.12s still exists after its test ended (inspect: %v)", netID, err)
	}
}
