package fleet

import (
	"reflect"
	"testing"
)

func TestCompare(t *testing.T) {
	const manifest = "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\n" +
		"spec:\n  clusters:\n  - {name: hub, num: 1}\n  - {name: east, num: 3}\n  - west\n  - solo\n  - other\n  - half\n"
	for _, tc := range []struct {
		name string
		live map[string]LiveCluster
		want Drift
	}{
		{"empty lab: everything missing", nil, Drift{Missing: []string{"east", "half", "hub", "other", "solo", "west"}}},
		{"in sync", map[string]LiveCluster{
			"hub": {Slot: 1, Complete: true, Fleet: "demo"}, "east": {Slot: 3, Complete: true, Fleet: "demo"},
			"west": {Slot: 2, Complete: true, Fleet: "demo"}, "solo": {Slot: 4, Complete: true, Fleet: "demo"},
			"other": {Slot: 5, Complete: true, Fleet: "demo"}, "half": {Slot: 6, Complete: true, Fleet: "demo"},
			"unrelated": {Slot: 7, Complete: true, Fleet: "else"}, "loose": {Slot: 8, Complete: true},
		}, Drift{}},
		{"every kind of drift", map[string]LiveCluster{
			"hub":   {Slot: 1, Complete: true, Fleet: "demo"},
			"east":  {Slot: 4, Complete: true, Fleet: "demo"},
			"solo":  {Slot: 5, Complete: true},
			"other": {Slot: 6, Complete: true, Fleet: "else"},
			"half":  {Slot: 7, Fleet: "demo"},
			"old":   {Slot: 8, Complete: true, Fleet: "demo"},
			"older": {Slot: 9, Fleet: "demo"},
		}, Drift{
			Missing:       []string{"west"},
			Incomplete:    []string{"half"},
			NotMembers:    []Outsider{{Name: "other", Fleet: "else"}, {Name: "solo"}},
			NotInManifest: []string{"old", "older"},
			SlotMismatch:  []SlotMismatch{{Name: "east", Slot: 4, Num: 3}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(parseOrFatal(t, manifest), LiveState{Clusters: tc.live})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Compare =\n%+v\nwant\n%+v", got, tc.want)
			}
			if got.InSync() != reflect.DeepEqual(tc.want, Drift{}) {
				t.Fatalf("InSync = %v for %+v", got.InSync(), got)
			}
		})
	}
}
