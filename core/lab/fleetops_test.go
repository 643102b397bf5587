package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bcollard/marina/core/fleet"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/sdk/kubetest"
)

// recordingProvider records the order of deletes and fails those asked to.
type recordingProvider struct {
	*apiProvider
	mu      sync.Mutex
	deletes []string
	fail    map[string]error
}

func (r *recordingProvider) Delete(ctx context.Context, name string) error {
	r.mu.Lock()
	r.deletes = append(r.deletes, name)
	err := r.fail[name]
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.apiProvider.Delete(ctx, name)
}

func (r *recordingProvider) deleted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deletes)
}

// registerNodes creates the Node objects the kubelets of cluster would
// register, with the labels of marina's kind config for them; every node
// but the last worker reports Ready.
func registerNodes(t *testing.T, p *apiProvider, cluster string) {
	t.Helper()
	p.mu.Lock()
	cfg := p.configs[cluster]
	p.mu.Unlock()
	cs, err := clientsetFor(p.mustKubeconfig(t, cluster))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	workers := 0
	for i, n := range cfg.Nodes {
		name := cluster + "-control-plane"
		if n.Role == "worker" {
			workers++
			name = cluster + "-worker"
			if workers > 1 {
				name += string(rune('0' + workers))
			}
		}
		node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: n.Labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ready := corev1.ConditionTrue
		if n.Role == "worker" && i == len(cfg.Nodes)-1 {
			ready = corev1.ConditionFalse
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// nodeLabel returns the value of key on every node of cluster, by node.
func nodeLabel(t *testing.T, p *apiProvider, cluster, key string) map[string]string {
	t.Helper()
	cs, err := clientsetFor(p.mustKubeconfig(t, cluster))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[key]
	}
	return out
}

// markerFleet returns the marker's fleet key of cluster, and whether the
// marker exists.
func markerFleet(t *testing.T, p *apiProvider, cluster string) (string, bool) {
	t.Helper()
	cs, err := clientsetFor(p.mustKubeconfig(t, cluster))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), MarkerConfigMap, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	return cm.Data["fleet"], true
}

// wantMembership checks what the API server of cluster holds: the fleet on
// every node and in the marker.
func wantMembership(t *testing.T, p *apiProvider, cluster, want string) {
	t.Helper()
	for node, got := range nodeLabel(t, p, cluster, LabelFleet) {
		if got != want {
			t.Fatalf("node %s: %s=%q, want %q", node, LabelFleet, got, want)
		}
	}
	if got, ok := markerFleet(t, p, cluster); !ok || got != want {
		t.Fatalf("cluster %s: marker fleet = %q (exists %v), want %q", cluster, got, ok, want)
	}
}

func mustParse(t *testing.T, manifest string) *fleet.Fleet {
	t.Helper()
	f, err := fleet.Parse([]byte(manifest), "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFleetOperations (tier 3): three clusters, each a real kube-apiserver
// (hub and east created as members of fleet demo, solo in none), with the
// nodes their kubelets would register. Listing, describing against a
// manifest, labelling, adopting (and its refusals) and deleting in
// dependency order are checked against what the API servers hold.
func TestFleetOperations(t *testing.T) {
	kubetest.RequireAssets(t)
	home := t.TempDir()
	p := newAPIProvider(t)
	rp := &recordingProvider{apiProvider: p, fail: map[string]error{}}
	l, c := labFor(t, p, home, "")
	c.Provider = rp
	ctx := context.Background()
	for _, s := range []ClusterSpec{{Name: "hub", Fleet: "demo"}, {Name: "east", Fleet: "demo", Workers: 1}, {Name: "solo"}} {
		if _, err := l.CreateCluster(ctx, c, s, lifecycle.Options{}); err != nil {
			t.Fatal(err)
		}
		registerNodes(t, p, s.Name)
	}
	// The fleet label reaches the nodes through the kind config.
	if got := nodeLabel(t, p, "east", LabelFleet); !reflect.DeepEqual(got, map[string]string{"east-control-plane": "demo", "east-worker": "demo"}) {
		t.Fatalf("east's nodes: %v", got)
	}

	// list
	infos, err := l.ListClusters(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []FleetInfo{{Name: "demo", Clusters: []string{"east", "hub"}, Complete: 2, Nodes: 3, Ready: 2, Slots: []int{1, 2}}}
	if got := Fleets(infos); !reflect.DeepEqual(got, want) {
		t.Fatalf("Fleets = %+v, want %+v", got, want)
	}

	// describe
	members, all, err := l.FleetMembers(ctx, c, "demo")
	if err != nil || len(members) != 2 || members[0].Name != "east" || members[1].Name != "hub" || len(all) != 3 {
		t.Fatalf("FleetMembers(demo) = %+v, %v", members, err)
	}
	if members[0].Slot != 2 || members[0].Nodes != 2 || members[0].Ready != 1 || !members[0].Complete {
		t.Fatalf("east = %+v", members[0])
	}
	var nf *NoFleetError
	if _, _, err := l.FleetMembers(ctx, c, "deme"); !errors.As(err, &nf) || !strings.Contains(err.Error(), `did you mean "demo"`) || !strings.Contains(err.Error(), "marina fleet list") {
		t.Fatalf("FleetMembers(deme): %v", err)
	}
	manifest := mustParse(t, "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\n"+
		"spec:\n  clusters:\n  - {name: hub, num: 1}\n  - {name: east, num: 3}\n  - west\n  - solo\n")
	wantDrift := fleet.Drift{Missing: []string{"west"}, NotMembers: []fleet.Outsider{{Name: "solo"}}, SlotMismatch: []fleet.SlotMismatch{{Name: "east", Slot: 2, Num: 3}}}
	if got := fleet.Compare(manifest, LiveState(all)); !reflect.DeepEqual(got, wantDrift) {
		t.Fatalf("Compare = %+v, want %+v", got, wantDrift)
	}

	// label: every node of every member, nothing else.
	done, err := l.LabelFleetNodes(ctx, c, "demo", map[string]string{"example.com/tier": "gold"})
	if err != nil || !slices.Equal(done, []string{"east", "hub"}) {
		t.Fatalf("LabelFleetNodes: %v, %v", done, err)
	}
	for cluster, want := range map[string]string{"hub": "gold", "east": "gold", "solo": ""} {
		for node, got := range nodeLabel(t, p, cluster, "example.com/tier") {
			if got != want {
				t.Fatalf("after fleet label: node %s: example.com/tier=%q, want %q", node, got, want)
			}
		}
	}
	if _, err := l.LabelFleetNodes(ctx, c, "demo", map[string]string{"example.com/tier": "-"}); err != nil {
		t.Fatal(err)
	}
	for node, got := range nodeLabel(t, p, "east", "example.com/tier") {
		if got != "" {
			t.Fatalf("after removal: node %s: example.com/tier=%q", node, got)
		}
	}
	for _, refused := range []map[string]string{{LabelFleet: "other", "example.com/a": "b"}, {"marina.dev/slot": "9"}} {
		if _, err := l.LabelFleetNodes(ctx, c, "demo", refused); err == nil || !strings.Contains(err.Error(), "marina.dev") {
			t.Fatalf("LabelFleetNodes(%v) = %v, want a refusal", refused, err)
		}
	}
	if got := nodeLabel(t, p, "hub", "example.com/a"); got["hub-control-plane"] != "" {
		t.Fatalf("a refused fleet label changed nodes: %v", got)
	}
	wantMembership(t, p, "hub", "demo")

	// adopt: refusals change nothing.
	solo, err := clientsetFor(p.mustKubeconfig(t, "solo"))
	if err != nil {
		t.Fatal(err)
	}
	marker, err := solo.CoreV1().ConfigMaps("kube-system").Get(ctx, MarkerConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := solo.CoreV1().ConfigMaps("kube-system").Delete(ctx, MarkerConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AdoptClusters(ctx, c, "demo", []string{"solo"}, AdoptOptions{}); err == nil || !strings.Contains(err.Error(), "half-created cluster") {
		t.Fatalf("adopting a half-created cluster: %v", err)
	}
	if err := l.SetFleet(ctx, c, "solo", "demo"); err == nil || !strings.Contains(err.Error(), "half-created") {
		t.Fatalf("SetFleet on a half-created cluster: %v", err)
	}
	if got := nodeLabel(t, p, "solo", LabelFleet); got["solo-control-plane"] != "" {
		t.Fatalf("a refused adopt labelled solo: %v", got)
	}
	marker.ResourceVersion = ""
	if _, err := solo.CoreV1().ConfigMaps("kube-system").Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fleet string
		names []string
		want  string
	}{
		{"other", []string{"hub"}, "belongs to fleet demo; move it with --force"},
		{"demo", []string{"solo", "nosuch"}, "no cluster named nosuch"},
		{"demo", []string{"solo", "hubb"}, "did you mean hub?"},
	} {
		if res, err := l.AdoptClusters(ctx, c, tc.fleet, tc.names, AdoptOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) || res != nil {
			t.Fatalf("AdoptClusters(%s, %v) = %v, %v; want an error with %q", tc.fleet, tc.names, res, err, tc.want)
		}
	}
	wantMembership(t, p, "hub", "demo")
	wantMembership(t, p, "solo", "")

	// adopt: node labels and marker.
	res, err := l.AdoptClusters(ctx, c, "demo", []string{"solo", "hub", "solo"}, AdoptOptions{})
	if err != nil || !reflect.DeepEqual(res, []AdoptResult{{Name: "solo", Outcome: AdoptAdopted}, {Name: "hub", Outcome: AdoptMember}}) {
		t.Fatalf("adopt solo, hub: %+v, %v", res, err)
	}
	wantMembership(t, p, "solo", "demo")
	res, err = l.AdoptClusters(ctx, c, "other", []string{"solo"}, AdoptOptions{Force: true})
	if err != nil || !reflect.DeepEqual(res, []AdoptResult{{Name: "solo", Outcome: AdoptMoved, From: "demo"}}) {
		t.Fatalf("adopt --force: %+v, %v", res, err)
	}
	wantMembership(t, p, "solo", "other")
	if infos, err = l.ListClusters(ctx, c); err != nil || len(Fleets(infos)) != 2 {
		t.Fatalf("fleets after the move: %+v, %v", Fleets(infos), err)
	}
	if err := l.SetFleet(ctx, c, "solo", ""); err != nil {
		t.Fatal(err)
	}
	wantMembership(t, p, "solo", "")
	res, err = l.AdoptClusters(ctx, c, "demo", []string{"west", "solo"}, AdoptOptions{SkipMissing: true})
	if err != nil || !reflect.DeepEqual(res, []AdoptResult{{Name: "west", Outcome: AdoptMissing}, {Name: "solo", Outcome: AdoptAdopted}}) {
		t.Fatalf("adopt with SkipMissing: %+v, %v", res, err)
	}
	wantMembership(t, p, "solo", "demo")

	// delete: dependents first; a member whose dependent could not be
	// deleted is kept.
	chain := mustParse(t, "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\n"+
		"spec:\n  clusters:\n  - hub\n  - {name: east, dependsOn: [hub]}\n  - {name: solo, dependsOn: [east]}\n")
	d, err := l.PlanFleetDelete(ctx, c, "demo", chain)
	if err != nil || !slices.Equal(d.Order, []string{"solo", "east", "hub"}) {
		t.Fatalf("PlanFleetDelete = %+v, %v", d, err)
	}
	rp.mu.Lock()
	rp.fail["east"] = errors.New("east's nodes are busy")
	rp.mu.Unlock()
	deleted, err := l.DeleteFleet(ctx, c, d, lifecycle.Options{})
	if err == nil || !strings.Contains(err.Error(), "cluster east: ") || !strings.Contains(err.Error(), "east's nodes are busy") ||
		!strings.Contains(err.Error(), "cluster hub: kept, because east") {
		t.Fatalf("DeleteFleet with east failing: %v", err)
	}
	if !slices.Equal(deleted, []string{"solo"}) || !slices.Equal(rp.deleted(), []string{"solo", "east"}) {
		t.Fatalf("deleted %v, provider deletes %v; want solo deleted, then east tried, hub kept", deleted, rp.deleted())
	}
	if _, err := os.Stat(filepath.Join(home, ".kube", "marina", "solo.kubeconfig")); !os.IsNotExist(err) {
		t.Fatalf("solo's kubeconfig after delete: %v", err)
	}
	wantMembership(t, p, "hub", "demo") // its API server still runs
	rp.mu.Lock()
	delete(rp.fail, "east")
	rp.mu.Unlock()
	d, err = l.PlanFleetDelete(ctx, c, "demo", nil)
	if err != nil || !slices.Equal(d.Order, []string{"hub", "east"}) {
		t.Fatalf("PlanFleetDelete without a manifest = %+v, %v", d, err)
	}
	if deleted, err := l.DeleteFleet(ctx, c, d, lifecycle.Options{}); err != nil || !slices.Equal(deleted, []string{"hub", "east"}) {
		t.Fatalf("DeleteFleet: %v, %v", deleted, err)
	}
	if names, _ := p.List(ctx); len(names) != 0 {
		t.Fatalf("clusters left: %v", names)
	}
	if _, _, err := l.FleetMembers(ctx, c, "demo"); !errors.As(err, &nf) {
		t.Fatalf("FleetMembers after delete: %v", err)
	}
}
