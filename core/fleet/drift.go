package fleet

import "sort"

// Drift is how the live clusters differ from a fleet's manifest: what
// `marina fleet describe NAME -f FILE` reports. Every list is in name order.
type Drift struct {
	// Missing are clusters of the manifest that do not exist in the lab
	// (fleet create -f makes them).
	Missing []string `json:"missing,omitempty"`
	// Incomplete are clusters of the manifest left half-created by a failed
	// run: they are not counted as existing (fleet create -f recreates them).
	Incomplete []string `json:"incomplete,omitempty"`
	// NotMembers are complete clusters of the manifest that belong to
	// another fleet or to none (fleet adopt makes them members).
	NotMembers []Outsider `json:"notMembers,omitempty"`
	// NotInManifest are members of the fleet that the manifest does not
	// list (fleet create leaves them alone).
	NotInManifest []string `json:"notInManifest,omitempty"`
	// SlotMismatch are members that run in another slot than the num the
	// manifest pins (fleet create keeps the live slot).
	SlotMismatch []SlotMismatch `json:"slotMismatch,omitempty"`
}

// Outsider is a cluster of the manifest outside the fleet.
type Outsider struct {
	Name string `json:"name"`
	// Fleet is the fleet it belongs to; "" for none.
	Fleet string `json:"fleet,omitempty"`
}

// SlotMismatch is a member whose live slot is not its pinned num.
type SlotMismatch struct {
	Name string `json:"name"`
	// Slot is the live slot (0 when unknown); Num the manifest's.
	Slot int `json:"slot"`
	Num  int `json:"num"`
}

// InSync reports whether the lab matches the manifest.
func (d Drift) InSync() bool {
	return len(d.Missing) == 0 && len(d.Incomplete) == 0 && len(d.NotMembers) == 0 &&
		len(d.NotInManifest) == 0 && len(d.SlotMismatch) == 0
}

// Compare returns how live differs from f, for the fleet f names
// (metadata.name). A member is a live cluster whose Fleet is that name.
func Compare(f *Fleet, live LiveState) Drift {
	var d Drift
	if f == nil {
		return d
	}
	name := f.Metadata.Name
	listed := map[string]bool{}
	for _, c := range f.Clusters() {
		if listed[c.Name] {
			continue
		}
		listed[c.Name] = true
		l, ok := live.Clusters[c.Name]
		switch {
		case !ok:
			d.Missing = append(d.Missing, c.Name)
		case !l.Complete:
			d.Incomplete = append(d.Incomplete, c.Name)
		case l.Fleet != name:
			d.NotMembers = append(d.NotMembers, Outsider{Name: c.Name, Fleet: l.Fleet})
		case c.Num != 0 && l.Slot != c.Num:
			d.SlotMismatch = append(d.SlotMismatch, SlotMismatch{Name: c.Name, Slot: l.Slot, Num: c.Num})
		}
	}
	for _, n := range sortedKeys(live.Clusters) {
		if live.Clusters[n].Fleet == name && name != "" && !listed[n] {
			d.NotInManifest = append(d.NotInManifest, n)
		}
	}
	sort.Strings(d.Missing)
	sort.Strings(d.Incomplete)
	sort.Slice(d.NotMembers, func(i, j int) bool { return d.NotMembers[i].Name < d.NotMembers[j].Name })
	sort.Slice(d.SlotMismatch, func(i, j int) bool { return d.SlotMismatch[i].Name < d.SlotMismatch[j].Name })
	return d
}
