package slot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Conflict reports whether slots a and b share any resource: the API port,
// or any address of their service subnets, pod subnets and MetalLB pools
// (across kinds too: a pod subnet against a service subnet). reason names
// the first shared resource of each slot, e.g. "pod subnet 10.11.0.0/16 of
// slot 1 equals service subnet 10.11.0.0/16 of slot 11".
func Conflict(a, b Resources) (reason string, conflict bool) {
	return footprintConflict(footprintOf(a), footprintOf(b))
}

// footprint is a slot's resources with its address blocks worked out once,
// since Allocate compares each slot with many others.
type footprint struct {
	Resources
	blocks []block
}

func footprintOf(r Resources) footprint { return footprint{r, r.blocks()} }

func footprintConflict(a, b footprint) (reason string, conflict bool) {
	if a.APIPort == b.APIPort {
		return fmt.Sprintf("API port %d of slot %d equals API port %d of slot %d", a.APIPort, a.Slot, b.APIPort, b.Slot), true
	}
	for _, x := range a.blocks {
		for _, y := range b.blocks {
			if x.r.Overlaps(y.r) {
				return describe(x, a.Slot, y, fmt.Sprintf("slot %d", b.Slot)), true
			}
		}
	}
	return "", false
}

// BridgeConflict reports whether the service or pod subnet of r overlaps
// the bridge, which would make the cluster's internal addresses shadow the
// bridge's containers (a bridge 10.5.0.0/16 rules out slot 5).
// A bridge that is not a valid IPv4 prefix overlaps nothing.
func BridgeConflict(r Resources, bridge netip.Prefix) (reason string, conflict bool) {
	if !bridge.IsValid() || !bridge.Addr().Is4() {
		return "", false
	}
	br := block{kind: "the bridge", pfx: bridge.Masked(), r: prefixRange(bridge)}
	for _, x := range r.subnets(nil) { // the pools are inside the bridge by construction
		if x.r.Overlaps(br.r) {
			return describe(x, r.Slot, br, ""), true
		}
	}
	return "", false
}

// block is one address block of a slot: a subnet (pfx set) or a pool.
type block struct {
	kind string
	pfx  netip.Prefix
	r    Range
}

func (b block) String() string {
	if b.pfx.IsValid() {
		return b.pfx.String()
	}
	return b.r.String()
}

// subnets appends the slot's service and pod subnet blocks to bs, leaving
// out any that is not a valid IPv4 prefix (a zero Resources has none).
func (r Resources) subnets(bs []block) []block {
	for _, s := range [...]struct {
		kind string
		p    netip.Prefix
	}{{"service subnet", r.ServiceSubnet}, {"pod subnet", r.PodSubnet}} {
		if s.p.IsValid() && s.p.Addr().Is4() {
			bs = append(bs, block{kind: s.kind, pfx: s.p.Masked(), r: prefixRange(s.p)})
		}
	}
	return bs
}

// blocks returns every address block of the slot: subnets, then pools.
func (r Resources) blocks() []block {
	bs := r.subnets(make([]block, 0, 2+len(r.Pools)))
	for _, p := range r.Pools {
		bs = append(bs, block{kind: "MetalLB pool", r: p})
	}
	return bs
}

// describe writes "<kind> <text> of slot <n> equals|overlaps <kind> <text>[ of <owner>]".
func describe(x block, n int, y block, owner string) string {
	verb := "overlaps"
	if x.r == y.r {
		verb = "equals"
	}
	s := fmt.Sprintf("%s %s of slot %d %s %s %s", x.kind, x, n, verb, y.kind, y)
	if owner != "" {
		s += " of " + owner
	}
	return s
}

// prefixRange returns the first and last address of a valid IPv4 prefix.
func prefixRange(p netip.Prefix) Range {
	p = p.Masked()
	a := p.Addr().As4()
	last := binary.BigEndian.Uint32(a[:]) | uint32(uint64(1)<<(32-p.Bits())-1)
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], last)
	return Range{p.Addr(), netip.AddrFrom4(l)}
}

// ConflictError is returned by Allocate when the pinned slot cannot be used.
type ConflictError struct {
	Slot   int    // the slot asked for
	With   int    // the live slot it collides with (Slot itself if already live); 0 for the bridge or a busy API port
	Reason string // which resource is shared, as a sentence
	Next   int    // the lowest slot that is free, 0 if none is
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("cluster slot %d is not available: %s", e.Slot, e.Reason)
	if e.Next == 0 {
		return s + "; no slot is free, delete a cluster first"
	}
	return s + fmt.Sprintf("; pin slot %d instead (the lowest free one), or leave the slot unset", e.Next)
}

// Allocate picks the slot for a new cluster on bridge, given the slots of
// the live clusters and the API host ports something else holds on the
// Docker host (busy: port -> holder, e.g. a cluster of another lab on the
// same engine). With pinned == 0 it returns the lowest slot that shares
// nothing with any live slot nor with the bridge and whose API port is not
// busy, or an error wrapping ErrExhausted. With pinned in 1..99 it returns
// pinned if that slot is free, else a *ConflictError naming the live slot
// (or the bridge, or the port's holder) and the shared resource, and
// suggesting the lowest free slot. Live slots outside 1..99 and a pinned
// slot outside 0..99 give an error wrapping ErrOutOfRange.
func Allocate(bridge netip.Prefix, live []int, busy map[int]string, pinned int) (int, error) {
	if err := checkBridge(bridge); err != nil {
		return 0, err
	}
	taken := make([]footprint, 0, len(live))
	for _, n := range live {
		r, err := Derive(n, bridge)
		if err != nil {
			return 0, fmt.Errorf("a live cluster carries slot %d (label %s): %w; fix or delete that cluster first", n, LabelSlot, err)
		}
		taken = append(taken, footprintOf(r))
	}
	lowest := 0
	for n := Min; n <= Max && lowest == 0; n++ {
		if check(n, bridge, taken, busy) == nil {
			lowest = n
		}
	}
	if pinned == 0 {
		if lowest == 0 {
			return 0, fmt.Errorf("%w on bridge %s: %d live clusters use or block all slots %d..%d; delete a cluster first", ErrExhausted, bridge, len(live), Min, Max)
		}
		return lowest, nil
	}
	if pinned < Min || pinned > Max {
		return 0, fmt.Errorf("pinned %w: got %d; use a slot between %d and %d, or none to take the lowest free one", ErrOutOfRange, pinned, Min, Max)
	}
	if err := check(pinned, bridge, taken, busy); err != nil {
		err.Next = lowest
		return 0, err
	}
	return pinned, nil
}

// check returns why slot n cannot join the live slots, or nil.
func check(n int, bridge netip.Prefix, taken []footprint, busy map[int]string) *ConflictError {
	r, err := Derive(n, bridge)
	if err != nil { // unreachable: n and bridge were checked by the caller
		return &ConflictError{Slot: n, Reason: err.Error()}
	}
	if reason, bad := BridgeConflict(r, bridge); bad {
		return &ConflictError{Slot: n, Reason: reason}
	}
	if holder, ok := busy[r.APIPort]; ok {
		return &ConflictError{Slot: n, Reason: fmt.Sprintf("its API port %d is taken on the Docker host by %s", r.APIPort, holder)}
	}
	f := footprintOf(r)
	for _, t := range taken {
		if t.Slot == n {
			return &ConflictError{Slot: n, With: n, Reason: fmt.Sprintf("slot %d is already used by a live cluster", n)}
		}
		if reason, bad := footprintConflict(f, t); bad {
			return &ConflictError{Slot: n, With: t.Slot, Reason: reason}
		}
	}
	return nil
}

// MaxConcurrent returns how many clusters can be live at once on bridge
// when slots are taken lowest-free from an empty start: 90 on the default
// bridge, because slots n and 10+n (n in 1..9) exclude each other. Since
// the conflicts between slots pair them off one-to-one, no other choice of
// slots fits more.
func MaxConcurrent(bridge netip.Prefix) (int, error) {
	if err := checkBridge(bridge); err != nil {
		return 0, err
	}
	var live []int
	for range Max {
		n, err := Allocate(bridge, live, nil, 0)
		if errors.Is(err, ErrExhausted) {
			break
		}
		if err != nil {
			return 0, err
		}
		live = append(live, n)
	}
	return len(live), nil
}
