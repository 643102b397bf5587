package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bcollard/marina/core/fleet"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kubetest"
)

// fleetE2ESubnet is this test's docker network: outside 172.16.0.0/12,
// where the other packages' tests take theirs, so that they never collide.
const fleetE2ESubnet = "10.231.0.0/16"

// TestFleetCommandsUsage: bad command lines exit 2 before anything is
// read or changed (no lab runs here).
func TestFleetCommandsUsage(t *testing.T) {
	home := t.TempDir()
	env := []string{"MARINA_VM_DRIVER=host"}
	manifest := filepath.Join(home, "fleet.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\nspec: {clusters: [hub]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(home, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\nspec: {clusterz: [hub]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-o", "xml"}, `--output "xml" is not supported`},
		{[]string{"list", "extra"}, "unknown command"},
		{[]string{"describe"}, "name the fleet"},
		{[]string{"describe", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"describe", "Not_A_Label"}, "not a DNS label"},
		{[]string{"describe", "other", "-f", manifest}, `is fleet "demo", not "other"`},
		{[]string{"describe", "-f", bad}, "clusterz"},
		{[]string{"describe", "-f", filepath.Join(home, "none.yaml")}, "none.yaml"},
		{[]string{"label", "demo"}, "at least one -l"},
		{[]string{"label", "demo", "-l", "marina.dev/fleet=other"}, "marina fleet adopt"},
		{[]string{"label", "demo", "-l", "marina.dev/slot-"}, "reserved"},
		{[]string{"label", "demo", "-l", "bad key=x"}, "bad key"},
		{[]string{"label", "demo", "-l", "novalue"}, "use key=value"},
		{[]string{"label", "-l", "a=b"}, "accepts 1 arg"},
		{[]string{"delete", "demo"}, "pass --yes"},
		{[]string{"delete", "-f", manifest}, "pass --yes"},
		{[]string{"adopt", "demo"}, "name the fleet and the clusters"},
		{[]string{"adopt"}, "name the fleet and the clusters"},
		{[]string{"adopt", "demo", "Bad_Cluster"}, "Bad_Cluster"},
		{[]string{"adopt", "-f", manifest, "demo", "hub"}, "name no clusters"},
		{[]string{"adopt", "BAD", "hub"}, "not a DNS label"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := marina(t, home, env, append([]string{"fleet"}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want 2 with %q\nstdout: %s\nstderr: %s", r.code, tc.want, r.stdout, r.stderr)
			}
		})
	}
}

// TestFleetRender: the text tables, and -o json / -o yaml that parse back
// to what was rendered.
func TestFleetRender(t *testing.T) {
	fleets := []lab.FleetInfo{
		{Name: "demo", Clusters: []string{"east", "hub"}, Complete: 1, Nodes: 3, Ready: 2, Slots: []int{1, 2}},
		{Name: "edge", Clusters: []string{"x"}, Complete: 1, Nodes: 1, Ready: 1, Slots: []int{7}},
	}
	desc := fleetDescription{Name: "demo",
		Members: []lab.ClusterInfo{
			{Name: "east", Slot: 2, APIPort: 7002, Nodes: 2, Ready: 1, Version: "v1.37.2", Fleet: "demo", Complete: true},
			{Name: "hub", Slot: 1, APIPort: 7001, Nodes: 1, Ready: 1, Fleet: "demo"},
		},
		Manifest: &fleetComparison{Source: "fleet.yaml", Drift: fleet.Drift{
			Missing: []string{"west"}, NotMembers: []fleet.Outsider{{Name: "solo"}, {Name: "other", Fleet: "else"}},
			NotInManifest: []string{"old"}, SlotMismatch: []fleet.SlotMismatch{{Name: "east", Slot: 2, Num: 3}}, Incomplete: []string{"half"},
		}},
	}
	for _, tc := range []struct {
		name   string
		render func(w io.Writer, format string) error
		into   func() any // nil: text only
		want   any
		text   []string
	}{
		{"list", func(w io.Writer, f string) error { return writeFleetList(w, f, fleets) },
			func() any { return &[]lab.FleetInfo{} }, &fleets,
			[]string{"FLEET  CLUSTERS  COMPLETE  READY  SLOTS", "demo   2         1         2/3    1,2", "edge   1         1         1/1    7"}},
		{"empty list", func(w io.Writer, f string) error { return writeFleetList(w, f, nil) },
			func() any { return &[]lab.FleetInfo{} }, &[]lab.FleetInfo{}, []string{"No fleets."}},
		{"describe", func(w io.Writer, f string) error { return writeFleetDescription(w, f, desc, "fleet.yaml") },
			func() any { return &fleetDescription{} }, &desc, []string{
				"Fleet demo: 2 clusters (1 complete), 2/3 nodes ready",
				"east  2     7002  2      1      v1.37.2  complete",
				"hub   1     7001  1      1      -        incomplete",
				"west: missing from the lab (marina fleet create -f fleet.yaml creates it)",
				"half: half-created",
				"solo: exists but is in no fleet (marina fleet adopt demo solo)",
				"other: exists but belongs to fleet else (marina fleet adopt demo other --force)",
				"old: a member the manifest does not list",
				"east: runs in slot 2, the manifest pins num 3",
			}},
		{"describe in sync", func(w io.Writer, f string) error {
			d := fleetDescription{Name: "demo", Members: desc.Members, Manifest: &fleetComparison{Source: "fleet.yaml", InSync: true}}
			return writeFleetDescription(w, f, d, "fleet.yaml")
		}, nil, nil, []string{"Compared with fleet.yaml: in sync."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			render := func(format string) string {
				var b bytes.Buffer
				if err := tc.render(&b, format); err != nil {
					t.Fatal(err)
				}
				return b.String()
			}
			text := render("text")
			for _, w := range tc.text {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
			if tc.into == nil {
				return
			}
			for _, format := range []string{"json", "yaml"} {
				out := render(format)
				got := tc.into()
				if err := decodeStructured(format, out, got); err != nil {
					t.Fatalf("-o %s does not parse: %v\n%s", format, err, out)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("-o %s parses back to %+v, want %+v\n%s", format, got, tc.want, out)
				}
			}
		})
	}
}

// decodeStructured parses -o json or -o yaml output into v (YAML through
// JSON, so that the json field names apply).
func decodeStructured(format, out string, v any) error {
	data := []byte(out)
	if format == "yaml" {
		var y any
		if err := yaml.Unmarshal(data, &y); err != nil {
			return err
		}
		var err error
		if data, err = json.Marshal(y); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// fakeCluster is a cluster as marina sees it on the host driver: a kind
// control-plane container on the lab's network (created, never started, so
// it holds no port) whose API port is 7000+slot, and a kubeconfig that
// reaches a real kube-apiserver standing in for its control plane.
type fakeCluster struct {
	name      string
	container string
	srv       *kubetest.Cluster
}

func newFakeCluster(t *testing.T, home, network, name string, n int, fleetName string) *fakeCluster {
	t.Helper()
	srv := kubetest.Start(t)
	ctx := context.Background()
	cs := srv.Clientset(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-control-plane", Labels: map[string]string{}}}
	if fleetName != "" {
		node.Labels[lab.LabelFleet] = fleetName
	}
	node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lab.MarkerConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"complete": "true", "slot": fmt.Sprint(n), "fleet": fleetName}}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".kube", "marina")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".kubeconfig"), srv.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	container := name + "-control-plane"
	args := []string{"create", "--name", container, "--network", network,
		"--label", "io.x-k8s.kind.role=control-plane", "--label", "io.x-k8s.kind.cluster=" + name,
		"-p", fmt.Sprintf("127.0.0.1:%d:6443", 7000+n)}
	args = append(args, dockertest.LabelArgs(t)...)
	dockertest.Docker(t, append(args, dockertest.Image(t, "registry"))...)
	dockertest.Cleanup(t, []string{container}, nil)
	return &fakeCluster{name: name, container: container, srv: srv}
}

func (f *fakeCluster) exists(t *testing.T) bool {
	t.Helper()
	out, _ := dockerOK("ps", "-a", "-q", "--filter", "name=^"+f.container+"$")
	return out != ""
}

// membership returns the fleet on the cluster's node and in its marker.
func (f *fakeCluster) membership(t *testing.T) (node, marker string) {
	t.Helper()
	cs := f.srv.Clientset(t)
	n, err := cs.CoreV1().Nodes().Get(context.Background(), f.name+"-control-plane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), lab.MarkerConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[lab.LabelFleet], cm.Data["fleet"]
}

// TestFleetCommandsEndToEnd (tiers 2 and 3): the marina binary on the host
// driver, against a real Docker engine holding the clusters' control-plane
// containers and real API servers standing in for their control planes:
// list, describe (and against a manifest), label, adopt, and delete (refused
// without a terminal and --yes, then done, dependents first).
func TestFleetCommandsEndToEnd(t *testing.T) {
	dockertest.Require(t)
	kubetest.RequireAssets(t)
	net := dockertest.Network(t, fleetE2ESubnet)
	home := t.TempDir()
	cfg := `vm: {name: fleet-e2e, driver: host}
network:
  name: ` + net.Name + `
  bridgeCIDR: ` + fleetE2ESubnet + `
dns: {etcdIP: 10.231.255.52, serverIP: 10.231.255.53}
plugins:
  localdns: {enabled: false}
  metallb: {enabled: false}
  coredns: {enabled: false}
  externaldns: {enabled: false}
  registries: {enabled: false}
`
	if err := os.MkdirAll(filepath.Join(home, ".marina"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".marina", "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Unique cluster names: kind deletes node containers by cluster name.
	p := fmt.Sprintf("f%d-", os.Getpid())
	hub := newFakeCluster(t, home, net.Name, p+"hub", 1, "demo")
	east := newFakeCluster(t, home, net.Name, p+"east", 2, "demo")
	solo := newFakeCluster(t, home, net.Name, p+"solo", 3, "")
	run := func(want int, args ...string) result {
		t.Helper()
		r := marina(t, home, nil, append([]string{"fleet"}, args...)...)
		t.Logf("marina fleet %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		if r.code != want {
			t.Fatalf("marina fleet %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}

	// list
	var fleets []lab.FleetInfo
	for _, format := range []string{"json", "yaml"} {
		r := run(0, "list", "-o", format)
		fleets = nil
		if err := decodeStructured(format, r.stdout, &fleets); err != nil {
			t.Fatalf("list -o %s: %v\n%s", format, err, r.stdout)
		}
		want := []lab.FleetInfo{{Name: "demo", Clusters: []string{east.name, hub.name}, Complete: 2, Nodes: 2, Ready: 2, Slots: []int{1, 2}}}
		if !reflect.DeepEqual(fleets, want) {
			t.Fatalf("list -o %s = %+v, want %+v", format, fleets, want)
		}
	}
	if r := run(0, "list"); !strings.Contains(r.stdout, "demo   2         2         2/2    1,2") {
		t.Fatalf("list:\n%s", r.stdout)
	}

	// describe, and against a manifest
	manifest := filepath.Join(home, "fleet.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: marina.dev/v1alpha1
kind: Fleet
metadata: {name: demo}
spec:
  clusters:
  - `+hub.name+`
  - {name: `+east.name+`, num: 5, dependsOn: [`+hub.name+`]}
  - {name: `+solo.name+`, dependsOn: [`+east.name+`]}
  - {name: `+p+`west, dependsOn: [`+hub.name+`]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(0, "describe", "-f", manifest, "-o", "json")
	var desc fleetDescription
	if err := decodeStructured("json", r.stdout, &desc); err != nil {
		t.Fatalf("describe -o json: %v\n%s", err, r.stdout)
	}
	if len(desc.Members) != 2 || desc.Members[0].Name != east.name || desc.Members[0].APIPort != 7002 || !desc.Members[0].Complete || desc.Manifest == nil {
		t.Fatalf("describe: %+v", desc)
	}
	wantDrift := fleet.Drift{Missing: []string{p + "west"}, NotMembers: []fleet.Outsider{{Name: solo.name}}, SlotMismatch: []fleet.SlotMismatch{{Name: east.name, Slot: 2, Num: 5}}}
	if !reflect.DeepEqual(desc.Manifest.Drift, wantDrift) || desc.Manifest.InSync {
		t.Fatalf("describe -f: %+v, want %+v", desc.Manifest, wantDrift)
	}
	r = run(0, "describe", "demo")
	if !strings.Contains(r.stdout, "Fleet demo: 2 clusters (2 complete), 2/2 nodes ready") {
		t.Fatalf("describe:\n%s", r.stdout)
	}
	var row []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == hub.name {
			row = f
		}
	}
	if want := []string{hub.name, "1", "7001", "1", "1", "-", "complete"}; !reflect.DeepEqual(row, want) {
		t.Fatalf("describe: row %q, want %q\n%s", row, want, r.stdout)
	}
	if r := run(1, "describe", "deme"); !strings.Contains(r.stderr, `did you mean "demo"`) || !strings.Contains(r.stderr, "marina fleet list") {
		t.Fatalf("describe of an unknown fleet: %s", r.stderr)
	}

	// label: every member's nodes, nothing else.
	run(0, "label", "demo", "-l", "example.com/tier=gold")
	for _, fc := range []*fakeCluster{hub, east, solo} {
		n, err := fc.srv.Clientset(t).CoreV1().Nodes().Get(context.Background(), fc.name+"-control-plane", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "", false: "gold"}[fc == solo]; n.Labels["example.com/tier"] != want {
			t.Fatalf("%s: example.com/tier=%q, want %q", fc.name, n.Labels["example.com/tier"], want)
		}
	}

	// adopt
	if r := run(1, "adopt", "other", hub.name); !strings.Contains(r.stderr, "--force") {
		t.Fatalf("adopting another fleet's cluster: %s", r.stderr)
	}
	if node, marker := hub.membership(t); node != "demo" || marker != "demo" {
		t.Fatalf("a refused adopt moved %s: node %q, marker %q", hub.name, node, marker)
	}
	r = run(0, "adopt", "-f", manifest)
	for _, w := range []string{solo.name + ": adopted into fleet demo", hub.name + ": already a member", p + "west: not in the lab"} {
		if !strings.Contains(r.stdout, w) {
			t.Fatalf("adopt -f lacks %q:\n%s", w, r.stdout)
		}
	}
	if node, marker := solo.membership(t); node != "demo" || marker != "demo" {
		t.Fatalf("after adopt, %s: node %q, marker %q", solo.name, node, marker)
	}

	// delete: without a terminal and --yes, nothing happens.
	r = run(2, "delete", "demo")
	if !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("delete without --yes: %s", r.stderr)
	}
	for _, fc := range []*fakeCluster{hub, east, solo} {
		if !fc.exists(t) {
			t.Fatalf("delete without --yes removed %s", fc.name)
		}
	}
	if r := run(0, "delete", "-f", manifest, "--dry-run"); !strings.Contains(r.stdout, "in this order: "+solo.name+", "+east.name+", "+hub.name) {
		t.Fatalf("delete --dry-run:\n%s", r.stdout)
	}
	r = run(0, "delete", "-f", manifest, "--yes", "--progress", "plain")
	if !strings.Contains(r.stdout, "deleted 3 of 3") {
		t.Fatalf("delete:\n%s\n%s", r.stdout, r.stderr)
	}
	// Dependents first: solo, east, hub, as the progress lines show.
	iSolo, iEast, iHub := strings.Index(r.stdout, "Delete cluster "+solo.name), strings.Index(r.stdout, "Delete cluster "+east.name), strings.Index(r.stdout, "Delete cluster "+hub.name)
	if iSolo < 0 || iSolo > iEast || iEast > iHub {
		t.Fatalf("delete order (solo %d, east %d, hub %d):\n%s", iSolo, iEast, iHub, r.stdout)
	}
	for _, fc := range []*fakeCluster{hub, east, solo} {
		if fc.exists(t) {
			t.Fatalf("%s's node container is still there", fc.name)
		}
		if _, err := os.Stat(filepath.Join(home, ".kube", "marina", fc.name+".kubeconfig")); !os.IsNotExist(err) {
			t.Fatalf("%s's kubeconfig: %v", fc.name, err)
		}
	}
	if r := run(0, "list"); !strings.Contains(r.stdout, "No fleets.") {
		t.Fatalf("list after delete:\n%s", r.stdout)
	}
}
