package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk/dockertest"
)

// e2eSubnet is this package's test bridge (other packages use other ones).
const e2eSubnet = "172.24.0.0/16"

// writeLabConfig writes a config for a lab on the host driver that uses the
// locally built test images, a unique network and unique container names,
// so it cannot touch a real lab on this machine.
func writeLabConfig(t testing.TB, home, id string) {
	t.Helper()
	cfg := `vm:
  name: e2e
  driver: host
network:
  name: marina-e2e-` + id + `
  bridgeCIDR: ` + e2eSubnet + `
dns:
  etcdIP: 172.24.255.52
  serverIP: 172.24.255.53
images:
  dnsEtcd: marina-test/etcd:v3.7.3
  dnsServer: marina-test/coredns:v1.15.0
  registry: marina-test/registry:v3.1.2
registries:
  cacheStorage: guest
  mirrors:
    - name: marina-e2e-mirror-` + id + `
      port: 5030
      remoteURL: http://172.24.250.10:5000
plugins:
  localdns:
    enabled: true
    config:
      etcdContainer: marina-e2e-etcd-` + id + `
      serverContainer: marina-e2e-dns-` + id + `
      labels:
        marina.test: "1"
        marina.test.pid: "` + dockertest.Labels(t)[dockertest.LabelPID] + `"
  metallb: {enabled: false}
  coredns: {enabled: false}
  externaldns: {enabled: false}
`
	dir := filepath.Join(home, ".marina")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dockerOK runs the docker CLI and returns its trimmed output, or "" and
// the error when it fails (e.g. the object does not exist).
func dockerOK(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

type statusJSON struct {
	Machine struct {
		State string `json:"state"`
	} `json:"machine"`
	Network struct {
		Present bool   `json:"present"`
		Problem string `json:"problem"`
		IPRange string `json:"ipRange"`
	} `json:"network"`
	Services []struct {
		Name      string `json:"name"`
		Component string `json:"component"`
		Running   bool   `json:"running"`
		IP        string `json:"ip"`
	} `json:"services"`
}

func labStatus(t *testing.T, home string) statusJSON {
	t.Helper()
	r := marina(t, home, nil, "status", "-o", "json")
	if r.code != 0 {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	return st
}

// containerIDs returns the ids of the lab's service containers by name.
func containerIDs(t *testing.T, names ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, n := range names {
		ids[n] = dockertest.Docker(t, "inspect", "--format", "{{.Id}}", n)
	}
	return ids
}

// TestUpHostDriverEndToEnd (tier 2) runs marina's main job on the host
// driver against the real Docker engine: up creates the bridge (with its
// ip-range) and the built-in services; a second up changes nothing (same
// container ids); doctor fails when the DNS server is stopped and passes
// after up repairs it; destroy removes everything it made.
func TestUpHostDriverEndToEnd(t *testing.T) {
	dockertest.Require(t)
	dockertest.Image(t, "etcd")
	dockertest.Image(t, "coredns")
	home := t.TempDir()
	id := strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	writeLabConfig(t, home, id)
	network := "marina-e2e-" + id
	etcd, dns, mirror := "marina-e2e-etcd-"+id, "marina-e2e-dns-"+id, "marina-e2e-mirror-"+id
	dockertest.Cleanup(t, []string{etcd, dns, mirror}, []string{etcd + "-data", "marina-registry-cache-" + mirror})
	t.Cleanup(func() { marina(t, home, nil, "destroy", "--yes") })

	// First without the mirrors: the network must exist before the mirror's
	// upstream (a registry container on it) can start.
	r := marina(t, home, nil, "up", "--set", "plugins.registries.enabled=false")
	if r.code != 0 {
		t.Fatalf("up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "Bridge network "+network+": done") {
		t.Errorf("first up did not create the network:\n%s", r.stdout)
	}
	// It changed something (the network), so it shows the resolver
	// instructions in full.
	if !strings.Contains(r.stdout, "To resolve demo.internal through 172.24.255.53") {
		t.Errorf("up did not report the resolver change it could not make:\n%s", r.stdout)
	}
	upstream := dockertest.Run(t, "--network", network, "--ip", "172.24.250.10", dockertest.Image(t, "registry"))
	r = marina(t, home, nil, "up")
	if r.code != 0 {
		t.Fatalf("up with mirrors: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := labStatus(t, home)
	if st.Machine.State != "running" || !st.Network.Present || st.Network.Problem != "" || st.Network.IPRange != "172.24.128.0/18" {
		t.Fatalf("status after up: %+v", st)
	}
	byName := map[string]bool{}
	for _, s := range st.Services {
		byName[s.Name] = s.Running
	}
	if !byName[etcd] || !byName[dns] || !byName[mirror] {
		t.Fatalf("services after up: %+v", st.Services)
	}
	if got := dockertest.Docker(t, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", dns); got != "172.24.255.53" {
		t.Fatalf("DNS server address = %q", got)
	}
	before := containerIDs(t, etcd, dns, mirror)

	// A record written the way ExternalDNS writes it resolves through the
	// lab's DNS server; an unknown name does not (exit 1).
	dockertest.Exec(t, etcd, "etcdctl", "put", "/skydns/internal/demo/dev/default/web/1a2b3c4d", `{"host":"172.24.1.16","ttl":30}`)
	if r := marina(t, home, nil, "dns", "lookup", "web.default.dev.demo.internal"); r.code != 0 || strings.TrimSpace(r.stdout) != "172.24.1.16" {
		t.Fatalf("dns lookup: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "dns", "lookup", "nope.demo.internal"); r.code != 1 || !strings.Contains(r.stderr, "no such name") {
		t.Fatalf("dns lookup of an unknown name: exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	r = marina(t, home, nil, "registry", "list", "-o", "json")
	var mirrors []struct {
		Name       string `json:"name"`
		Port       int    `json:"port"`
		Upstream   string `json:"upstream"`
		Running    bool   `json:"running"`
		CacheBytes int64  `json:"cacheBytes"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &mirrors) != nil || len(mirrors) != 1 ||
		mirrors[0].Name != mirror || mirrors[0].Port != 5030 || mirrors[0].Upstream != "http://172.24.250.10:5000" || !mirrors[0].Running || mirrors[0].CacheBytes < 0 {
		t.Fatalf("registry list: exit %d %+v\n%s%s", r.code, mirrors, r.stdout, r.stderr)
	}

	r = marina(t, home, nil, "up")
	if r.code != 0 {
		t.Fatalf("second up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "Bridge network "+network+": unchanged") {
		t.Errorf("second up changed the network:\n%s", r.stdout)
	}
	// Nothing changed: the resolver instructions shrink to one line, and
	// doctor shows them in full.
	if !strings.Contains(r.stdout, "resolver: not configured — `marina doctor` explains") || strings.Contains(r.stdout, "To resolve demo.internal") {
		t.Errorf("an up that changed nothing repeated the resolver instructions (want one line):\n%s", r.stdout)
	}
	if d := marina(t, home, nil, "doctor"); !strings.Contains(d.stdout, "To resolve demo.internal through 172.24.255.53") {
		t.Errorf("doctor does not show the resolver instructions:\n%s%s", d.stdout, d.stderr)
	}
	if after := containerIDs(t, etcd, dns, mirror); after[etcd] != before[etcd] || after[dns] != before[dns] || after[mirror] != before[mirror] {
		t.Fatalf("second up recreated containers: %v -> %v", before, after)
	}
	// Their containers run as the last PostUp left them: neither plugin was
	// started (their recorded results were reused); --reconcile runs both.
	for _, p := range []string{"localdns", "registries"} {
		if !strings.Contains(r.stdout, p+": unchanged since ") {
			t.Errorf("second up started %s, whose containers run unchanged:\n%s", p, r.stdout)
		}
	}
	// --dry-run says so, plugin by plugin, and starts neither.
	r = marina(t, home, nil, "up", "--dry-run")
	for _, p := range []string{"localdns", "registries"} {
		if r.code != 0 || !strings.Contains(r.stdout, "reuse plugin "+p+": unchanged since ") {
			t.Errorf("up --dry-run on a lab where nothing changed: exit %d; want %s's result reused:\n%s%s", r.code, p, r.stdout, r.stderr)
		}
	}
	r = marina(t, home, nil, "up", "--dry-run", "--reconcile")
	if r.code != 0 || !strings.Contains(r.stdout, "run plugin localdns: --reconcile runs every hook") {
		t.Errorf("up --dry-run --reconcile: exit %d; want every plugin run:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = marina(t, home, nil, "up", "--reconcile")
	if r.code != 0 || strings.Contains(r.stdout, ": unchanged since ") || !strings.Contains(r.stdout, "localdns: CoreDNS") {
		t.Errorf("up --reconcile: exit %d; want every plugin run, none reused:\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = marina(t, home, nil, "doctor")
	if r.code != 0 {
		t.Fatalf("doctor on a healthy lab: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	dockertest.Docker(t, "stop", "-t", "1", dns)
	r = marina(t, home, nil, "doctor", "-o", "json")
	if r.code != 1 {
		t.Fatalf("doctor with the DNS server stopped: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	var checks []struct{ Name, Status string }
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, c := range checks {
		if c.Status == "FAIL" {
			failed[c.Name] = true
		}
	}
	if !failed["service "+dns] || !failed["dns 172.24.255.53"] {
		t.Fatalf("doctor failures = %v, want the DNS service and the DNS check", failed)
	}
	// --dry-run says localdns would run (its server does not run as its
	// last PostUp left it) and registries not; it repairs nothing.
	r = marina(t, home, nil, "up", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "run plugin localdns: ") || !strings.Contains(r.stdout, "reuse plugin registries: unchanged since ") {
		t.Errorf("up --dry-run with the DNS server stopped: exit %d; want localdns run, registries reused:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if d := marina(t, home, nil, "doctor"); d.code != 1 {
		t.Fatalf("doctor after up --dry-run: exit %d, want 1 (a dry run repairs nothing)\n%s%s", d.code, d.stdout, d.stderr)
	}
	if r := marina(t, home, nil, "up"); r.code != 0 || strings.Contains(r.stdout, "localdns: unchanged since ") {
		t.Fatalf("up to repair (localdns must run: its DNS server stopped): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "doctor"); r.code != 0 {
		t.Fatalf("doctor after up repaired the lab: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := containerIDs(t, etcd); after[etcd] != before[etcd] {
		t.Fatalf("the repair recreated etcd: %v -> %v", before[etcd], after[etcd])
	}

	// The mirror's cache: cleaned (container and volume gone), then
	// recreated empty by up.
	r = marina(t, home, nil, "registry", "clean-cache", mirror)
	if r.code != 0 || !strings.Contains(r.stdout, "cleaned "+mirror) {
		t.Fatalf("registry clean-cache: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out, _ := dockerOK("inspect", mirror); out != "" {
		t.Fatal("the mirror survived clean-cache")
	}
	if r := marina(t, home, nil, "registry", "clean-cache", "nope"); r.code == 0 || !strings.Contains(r.stderr, `no registry mirror named "nope"`) {
		t.Fatalf("clean-cache of an unknown mirror: exit %d\n%s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "up"); r.code != 0 {
		t.Fatalf("up after clean-cache: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out, _ := dockerOK("inspect", "--format", "{{.State.Running}}", mirror); out != "true" {
		t.Fatalf("up did not recreate the mirror: %q", out)
	}

	// The upstream is the test's own container: remove it so destroy can
	// remove the network.
	dockertest.Docker(t, "rm", "-f", upstream)
	r = marina(t, home, nil, "destroy")
	if r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("destroy without a terminal and without --yes: exit %d, want 2 asking for --yes\n%s", r.code, r.stderr)
	}
	r = marina(t, home, nil, "destroy", "--yes")
	if r.code != 0 {
		t.Fatalf("destroy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range []string{etcd, dns, mirror} {
		if out, _ := dockerOK("inspect", name); out != "" {
			t.Errorf("container %s survived destroy", name)
		}
	}
	if out, _ := dockerOK("network", "inspect", network); out != "" {
		t.Errorf("network %s survived destroy", network)
	}
}
