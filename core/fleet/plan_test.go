package fleet

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"
)

func loadFleet(t testing.TB, name string) *Fleet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "manifests", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(f, testCtx); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPlanGolden renders the plan of full.yaml against several live states;
// the tables are compared with testdata/plan/<name>.golden (-update rewrites
// them after a deliberate change).
func TestPlanGolden(t *testing.T) {
	stray := LiveCluster{Slot: 2, Complete: true} // not in the manifest
	tests := []struct {
		name string
		live map[string]LiveCluster
		opts PlanOptions
	}{
		// Nothing live: east keeps its pinned 3, the others take 1, 2, 4 in
		// manifest order.
		{"fresh", nil, PlanOptions{}},
		// --max-parallel wins over spec.maxParallel.
		{"fresh-max-parallel", nil, PlanOptions{MaxParallel: 7}},
		// hub is a complete member (skip), east was left half-created in its
		// pinned slot (recreate, same slot), west belongs to another fleet
		// (skip + warning without --adopt), a stray cluster holds slot 2, a
		// former member no longer in the manifest holds slot 4 (warned).
		{"rerun", map[string]LiveCluster{
			"hub":    {Slot: 1, Complete: true, Fleet: "demo"},
			"east":   {Slot: 3, Complete: false, Fleet: "demo"},
			"west":   {Slot: 5, Complete: true, Fleet: "other"},
			"stray":  stray,
			"former": {Slot: 4, Complete: true, Fleet: "demo"},
		}, PlanOptions{}},
		// The same with --adopt: west is adopted.
		{"rerun-adopt", map[string]LiveCluster{
			"hub":   {Slot: 1, Complete: true, Fleet: "demo"},
			"east":  {Slot: 3, Complete: false, Fleet: "demo"},
			"west":  {Slot: 5, Complete: true, Fleet: "other"},
			"stray": stray,
		}, PlanOptions{Adopt: true}},
		// A half-created cluster without a readable slot or label, a member
		// whose live slot differs from its pin, and a live cluster whose slot
		// is unknown (warned: its resources are not reserved).
		{"odd-live", map[string]LiveCluster{
			"hub":   {Slot: 0, Complete: false},
			"east":  {Slot: 6, Complete: true, Fleet: "demo"},
			"ghost": {Slot: 0, Complete: true},
		}, PlanOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Plan(loadFleet(t, "full.yaml"), LiveState{Clusters: tt.live}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := p.Table(&buf); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/plan/"+tt.name+".golden", buf.Bytes())
		})
	}
}

// TestPlanSlots checks slot decisions directly (beyond the golden tables).
func TestPlanSlots(t *testing.T) {
	f := parseOrFatal(t, head+`spec:
  clusters:
  - a
  - {name: b, num: 1}
  - c
  - d
`)
	tests := []struct {
		name string
		live map[string]LiveCluster
		busy map[int]string
		want map[string]int
	}{
		// b's pin is honoured first; a and c fill around it and around slot
		// 11, which slot 1 excludes.
		{"pins first", nil, nil, map[string]int{"a": 2, "b": 1, "c": 3, "d": 4}},
		// A live cluster in slot 2 and a half-created d in slot 9: d keeps 9.
		{"around live", map[string]LiveCluster{"x": {Slot: 2, Complete: true}, "d": {Slot: 9}}, nil, map[string]int{"a": 3, "b": 1, "c": 4, "d": 9}},
		// A half-created c in slot 3 keeps it; its slot is not given to a.
		{"recreate keeps slot", map[string]LiveCluster{"c": {Slot: 3}}, nil, map[string]int{"a": 2, "b": 1, "c": 3, "d": 4}},
		// Live 2, 3, 4 and the pinned 1 push the others up to 5, 6, 7.
		{"skips conflicts", map[string]LiveCluster{"x": {Slot: 2, Complete: true}, "y": {Slot: 3, Complete: true}, "z": {Slot: 4, Complete: true}}, nil, map[string]int{"a": 5, "b": 1, "c": 6, "d": 7}},
		// Another lab's clusters hold the API ports of slots 2 and 4.
		{"skips busy API ports", nil, map[int]string{7002: "container x", 7004: "container y"}, map[string]int{"a": 3, "b": 1, "c": 5, "d": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Plan(f, LiveState{Clusters: tt.live}, PlanOptions{BusyPorts: tt.busy})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range p.Clusters {
				if c.Slot != tt.want[c.Name] {
					t.Errorf("%s: slot %d, want %d", c.Name, c.Slot, tt.want[c.Name])
				}
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		live map[string]LiveCluster
		opts PlanOptions
		want []want
	}{
		{"pin taken by a live cluster", head + "spec:\n  clusters:\n  - {name: a, num: 2}\n", map[string]LiveCluster{"x": {Slot: 2, Complete: true}}, PlanOptions{}, []want{
			{"spec.clusters[0].num", 6, 20, "cluster a: cluster slot 2 is not available: slot 2 is already used by a live cluster; pin slot 1 instead (the lowest free one), or leave the slot unset"}}},
		{"pin conflicts with a live slot", head + "spec:\n  clusters:\n  - {name: a, num: 11}\n", map[string]LiveCluster{"x": {Slot: 1, Complete: true}}, PlanOptions{}, []want{
			{"spec.clusters[0].num", 6, 20, "service subnet 10.11.0.0/16 of slot 11 equals pod subnet 10.11.0.0/16 of slot 1"}}},
		{"pin against a half-created cluster of another name", head + "spec:\n  clusters:\n  - {name: a, num: 4}\n  - b\n", map[string]LiveCluster{"b": {Slot: 4}}, PlanOptions{}, []want{
			{"spec.clusters[0].num", 6, 20, "slot 4 is already used by a live cluster"}}},
		{"half-created by another fleet", head + "spec:\n  clusters: [a]\n", map[string]LiveCluster{"a": {Slot: 1, Fleet: "other"}}, PlanOptions{}, []want{
			{"spec.clusters[0].name", 5, 14, `cluster "a" exists half-created by fleet "other"; delete it (marina cluster delete a) or re-run with --adopt to recreate it as a member of "f"`}}},
		{"cycle", head + "spec:\n  clusters:\n  - {name: a, dependsOn: [b]}\n  - {name: b, dependsOn: [a]}\n", nil, PlanOptions{}, []want{
			{"spec.clusters[1].dependsOn[0]", 7, 27, "dependency cycle a -> b -> a"}}},
		{"bad bridge", head + "spec:\n  clusters: [a]\n", nil, PlanOptions{Bridge: netip.MustParsePrefix("fd00::/16")}, []want{
			{"(document)", 0, 0, "bridge CIDR fd00::/16 is not IPv4"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Plan(parseOrFatal(t, tt.yaml), LiveState{Clusters: tt.live}, tt.opts)
			if p != nil {
				t.Error("Plan returned a plan with an error")
			}
			if tt.name == "bad bridge" {
				if err == nil || !strings.Contains(err.Error(), tt.want[0].msg) {
					t.Fatalf("got %v", err)
				}
				return
			}
			checkProblems(t, err, tt.want)
			if !strings.HasPrefix(err.Error(), "cannot plan fleet fleet.yaml") {
				t.Errorf("error text: %v", err)
			}
		})
	}
}

// TestPlanExhausted: with every slot taken, each entry that needs one says
// so, and the error wraps nothing that could be mistaken for success.
func TestPlanExhausted(t *testing.T) {
	live := map[string]LiveCluster{}
	for n := 1; n <= 99; n++ {
		if n >= 11 && n <= 19 {
			continue // blocked by 1..9
		}
		live[string(rune('a'+n%26))+strings.Repeat("x", n)] = LiveCluster{Slot: n, Complete: true}
	}
	_, err := Plan(parseOrFatal(t, head+"spec:\n  clusters: [p, q]\n"), LiveState{Clusters: live}, PlanOptions{})
	var fe *Error
	if !errors.As(err, &fe) || len(fe.Problems) != 2 {
		t.Fatalf("got %v", err)
	}
	for i, p := range fe.Problems {
		if !strings.Contains(p.Message, "no free cluster slot") || !strings.Contains(p.Message, "delete a cluster first") {
			t.Errorf("problem %d: %s", i, p)
		}
	}
}
