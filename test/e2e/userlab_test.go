package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk/dockertest"
)

// A user's lab: marina's defaults (what `make demo` brings up).
const (
	userNetwork   = "kind"
	userServer    = "marina-dns"
	userEtcd      = "marina-dns-etcd"
	userLabConfig = `vm:
  driver: host
images:
  registry: marina-test/registry:v3.1.2
  dnsEtcd: marina-test/etcd:v3.7.3
  dnsServer: marina-test/coredns:v1.15.0
registries:
  mirrors: []
`
)

// besideUserLab makes sure a user's lab is up on this machine while the
// end-to-end tests run, and checks at the end of t that the tests left it
// exactly as it was: its network, containers, volumes, DNS records,
// iptables rules and the user's ~/.marina and ~/.kube, compared field by
// field and byte for byte.
//
// When a lab with marina's default names is already up (after `make demo`,
// say) that lab is the one checked, and it is only read. Otherwise the test
// brings one up with the defaults in a home of its own and destroys it at the
// end, after the comparison. Call it before startLab, so that its check runs
// after the test lab is destroyed (cleanups run last-in first-out).
func besideUserLab(t *testing.T) {
	t.Helper()
	dockertest.Require(t)
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatalf("the user's home directory: %v", err)
	}
	homes := []string{realHome}

	if !dockerExists(t, "container", userServer) && !dockerExists(t, "network", userNetwork) {
		home := t.TempDir()
		cfg := filepath.Join(home, ".marina", "config.yaml")
		if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte(userLabConfig), 0o644); err != nil {
			t.Fatal(err)
		}
		u := &lab{home: home, bin: buildMarina(t), env: labEnv(home, cfg)}
		t.Cleanup(func() {
			if r := u.exec(deleteTimeout+upTimeout, "destroy", "--yes"); r.err != nil {
				t.Errorf("destroying the user's lab the test brought up: %s", r)
			}
		})
		u.run(t, upTimeout, "up", "--progress", "plain")
		homes = append(homes, home)
		t.Logf("no lab of marina's defaults was up: brought one up in %s to run beside", home)
	} else {
		t.Logf("running beside the lab already up on this machine (network %s, container %s); it is only read", userNetwork, userServer)
	}

	before := snapshotUserLab(t, homes)
	t.Logf("the user's lab: %d facts recorded (containers, network, volumes, records, iptables rules, files)", len(before))
	t.Cleanup(func() {
		after := snapshotUserLab(t, homes)
		for _, d := range diffSnapshots(before, after) {
			t.Errorf("the end-to-end tests changed the user's lab: %s", d)
		}
	})
}

// dockerExists reports whether a docker object of kind ("container",
// "network") named name exists.
func dockerExists(t testing.TB, kind, name string) bool {
	t.Helper()
	filter := "name=^" + name + "$"
	var out string
	if kind == "network" {
		out = dockertest.Docker(t, "network", "ls", "-q", "--filter", filter)
		// docker's network name filter matches substrings; check exactly.
		for _, id := range strings.Fields(out) {
			if dockertest.Docker(t, "network", "inspect", "--format", "{{.Name}}", id) == name {
				return true
			}
		}
		return false
	}
	out = dockertest.Docker(t, "ps", "-aq", "--filter", filter)
	return out != ""
}

// labRef names what a snapshot reads of a lab.
type labRef struct {
	network    string   // the bridge network
	containers []string // containers to read wherever they are attached
	etcd       string   // the zone's etcd container, whose records are read
	subnet     string   // iptables rules mentioning this text are read, e.g. "172.30."
	homes      []string // ~/.marina and ~/.kube under each are read
}

// userLabRef is a user's lab with marina's defaults.
func userLabRef(homes []string) labRef {
	return labRef{network: userNetwork, containers: []string{userServer, userEtcd}, etcd: userEtcd, subnet: "172.30.", homes: homes}
}

// snapshotUserLab records everything of the user's lab the tests must not
// touch, as key → value, in a form that compares byte for byte.
func snapshotUserLab(t testing.TB, homes []string) map[string]string {
	t.Helper()
	return snapshotLab(t, userLabRef(homes))
}

// snapshotLab records everything of lab ref, as key → value.
func snapshotLab(t testing.TB, ref labRef) map[string]string {
	t.Helper()
	snap := map[string]string{}

	// The network: identity, addressing, options and who is attached.
	var containers []string
	netID := ""
	if dockerExists(t, "network", ref.network) {
		info := dockertest.Docker(t, "network", "inspect", "--format",
			"{{.Id}} {{json .IPAM}} {{json .Options}} {{json .Labels}} {{.Driver}} {{.Internal}}", ref.network)
		netID, _, _ = strings.Cut(info, " ")
		snap["network "+ref.network] = info
		attached := dockertest.Docker(t, "network", "inspect", "--format", "{{range $id, $c := .Containers}}{{$id}} {{end}}", ref.network)
		containers = strings.Fields(attached)
		sort.Strings(containers)
		snap["network "+ref.network+" endpoints"] = strings.Join(containers, " ")
	}
	// Every container on it, and the DNS pair wherever they are: identity,
	// state since when, restarts, what runs, ports, addresses; and the
	// volumes they mount (the line after the facts).
	for _, name := range ref.containers {
		if dockerExists(t, "container", name) {
			containers = append(containers, name)
		}
	}
	seen := map[string]bool{}
	var vols []string
	for _, c := range containers {
		out := dockertest.Docker(t, "inspect", "--format",
			"{{.Id}} {{.Name}} {{.Created}} {{.State.Status}} {{.State.StartedAt}} {{.RestartCount}} {{.Config.Image}} "+
				"{{json .Config.Cmd}} {{json .Config.Env}} {{json .Config.Labels}} {{json .HostConfig.PortBindings}} {{json .Mounts}} "+
				"{{range $n, $e := .NetworkSettings.Networks}}{{$n}}={{$e.IPAddress}} {{end}}"+
				"\n"+`{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}`, c)
		info, mounted, _ := strings.Cut(out, "\n")
		id, _, _ := strings.Cut(info, " ")
		if seen[id] {
			continue
		}
		seen[id] = true
		snap["container "+id] = strings.TrimSpace(info)
		vols = append(vols, strings.Fields(mounted)...)
	}
	// The DNS records in the user's zone etcd (the tests' ExternalDNS and
	// marina write only to the test lab's).
	if ref.etcd != "" && dockertest.Docker(t, "ps", "-q", "--filter", "name=^"+ref.etcd+"$") != "" {
		snap["etcd records"] = dockertest.Docker(t, "exec", ref.etcd, "etcdctl", "get", "--prefix", "/")
	}
	sort.Strings(vols)
	for _, v := range vols {
		snap["volume "+v] = dockertest.Docker(t, "volume", "inspect", "--format", "{{.CreatedAt}} {{json .Labels}} {{.Mountpoint}}", v)
	}
	// iptables rules that mention the lab's bridge (br-<first 12 of the
	// network id>) or its subnet.
	if rules, err := iptablesRules(); err == nil {
		bridgeIf := ""
		if len(netID) >= 12 {
			bridgeIf = "br-" + netID[:12]
		}
		var mine []string
		for _, r := range rules {
			if strings.Contains(r, ref.subnet) || (bridgeIf != "" && strings.Contains(r, bridgeIf)) {
				mine = append(mine, r)
			}
		}
		sort.Strings(mine)
		snap["iptables"] = strings.Join(mine, "\n")
	}
	// The user's files: ~/.marina and ~/.kube, byte for byte.
	for _, home := range ref.homes {
		for _, dir := range []string{".marina", ".kube"} {
			root := filepath.Join(home, dir)
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) && p == root {
						return fs.SkipDir
					}
					return err
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				v := info.Mode().String()
				if info.Mode().IsRegular() {
					b, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					sum := sha256.Sum256(b)
					v += " " + hex.EncodeToString(sum[:])
				} else if info.Mode()&fs.ModeSymlink != 0 {
					target, _ := os.Readlink(p)
					v += " -> " + target
				}
				snap["file "+p] = v
				return nil
			})
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("reading %s: %v", root, err)
			}
		}
	}
	return snap
}

// iptablesRules is `iptables-save` of this machine, one rule per line,
// without counters and comments.
func iptablesRules() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iptables-save").Output()
	if err != nil {
		return nil, err
	}
	var rules []string
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if strings.HasPrefix(line, "-A ") {
			rules = append(rules, line)
		}
	}
	return rules, nil
}

// diffSnapshots lists, key by key, what differs between two snapshots.
func diffSnapshots(before, after map[string]string) []string {
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var diffs []string
	for _, k := range sorted {
		b, inB := before[k]
		a, inA := after[k]
		switch {
		case inB && !inA:
			diffs = append(diffs, k+" is gone (was "+b+")")
		case !inB && inA:
			diffs = append(diffs, k+" appeared: "+a)
		case a != b:
			j, _ := json.Marshal(map[string]string{"before": b, "after": a})
			diffs = append(diffs, k+" changed: "+string(j))
		}
	}
	return diffs
}

// TestDiffSnapshots: the comparison behind besideUserLab reports a changed,
// a removed and an added entry, and nothing for equal snapshots.
func TestDiffSnapshots(t *testing.T) {
	before := map[string]string{"container a": "a running 2026-01-01", "file x": "-rw-r--r-- 01", "volume v": "t"}
	if d := diffSnapshots(before, before); len(d) != 0 {
		t.Fatalf("equal snapshots differ: %v", d)
	}
	after := map[string]string{"container a": "a running 2026-01-02", "file x": "-rw-r--r-- 01", "network n": "id"}
	d := diffSnapshots(before, after)
	want := []string{"container a changed", "network n appeared", "volume v is gone"}
	if len(d) != len(want) {
		t.Fatalf("diff = %q; want %d entries", d, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(d[i], w) {
			t.Errorf("diff[%d] = %q; want it to start with %q", i, d[i], w)
		}
	}
}

// TestSnapshotSeesChanges (tier 2): the snapshot behind besideUserLab notices
// what the end-to-end tests must not do to a user's lab — a container
// restarted or replaced, a record written, a file changed — on a stand-in lab
// of this test's own (a network, an etcd container, a home), never the user's.
func TestSnapshotSeesChanges(t *testing.T) {
	dockertest.Require(t)
	n := dockertest.Network(t, "172.28.0.0/16")
	etcd := fmt.Sprintf("marina-e2e-snapshot-%d", os.Getpid()) // a name, as a lab's containers have
	dockertest.Run(t, "--name", etcd, "--network", n.Name, "--ip", "172.28.255.52", dockertest.Image(t, "etcd"),
		"--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://172.28.255.52:2379")
	dockertest.WaitFor(t, time.Minute, 200*time.Millisecond, "etcd to answer", func() error {
		_, err := dockerOut("exec", etcd, "etcdctl", "endpoint", "health")
		return err
	})
	home := t.TempDir()
	kube := filepath.Join(home, ".kube", "config")
	if err := os.MkdirAll(filepath.Dir(kube), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kube, []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := labRef{network: n.Name, containers: []string{etcd}, etcd: etcd, subnet: "172.28.", homes: []string{home}}

	before := snapshotLab(t, ref)
	if d := diffSnapshots(before, snapshotLab(t, ref)); len(d) != 0 {
		t.Fatalf("two snapshots of an untouched lab differ: %v", d)
	}
	for _, want := range []string{"network " + n.Name, "etcd records", "file " + kube} {
		if _, ok := before[want]; !ok {
			t.Errorf("the snapshot has no %q: %v", want, before)
		}
	}
	if rules := before["iptables"]; !strings.Contains(rules, "172.28.0.0/16") || !strings.Contains(rules, "br-"+n.ID[:12]) {
		t.Errorf("the snapshot's iptables rules lack the lab's subnet or bridge br-%s:\n%s", n.ID[:12], rules)
	}

	dockertest.Exec(t, etcd, "etcdctl", "put", "/skydns/internal/demo/x", `{"host":"172.28.1.16"}`)
	if err := os.WriteFile(kube, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dockertest.Docker(t, "restart", "-t", "1", etcd)
	dockertest.WaitFor(t, time.Minute, 200*time.Millisecond, "etcd to answer again", func() error {
		_, err := dockerOut("exec", etcd, "etcdctl", "endpoint", "health")
		return err
	})
	diffs := strings.Join(diffSnapshots(before, snapshotLab(t, ref)), "\n")
	for _, want := range []string{"etcd records changed", "file " + kube + " changed", "container "} {
		if !strings.Contains(diffs, want) {
			t.Errorf("the snapshot missed a change (%q):\n%s", want, diffs)
		}
	}
}

// dockerOut runs docker, bounded, and returns its output or an error.
func dockerOut(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockertest.CommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
