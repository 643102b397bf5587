package slot

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func rng(first, last string) Range {
	return Range{netip.MustParseAddr(first), netip.MustParseAddr(last)}
}

// badBridges are bridges every function taking one must refuse.
var badBridges = []struct {
	name   string
	bridge netip.Prefix
	want   string
}{
	{"zero", netip.Prefix{}, "not a valid prefix"},
	{"ipv6", pfx("fd00::/16"), "fd00::/16 is not IPv4"},
	{"slash 24", pfx("172.30.0.0/24"), "172.30.0.0/24 is a /24"},
	{"slash 8", pfx("10.0.0.0/8"), "10.0.0.0/8 is a /8"},
	{"host bits", pfx("172.30.1.0/16"), "172.30.1.0/16 has host bits set; expected 172.30.0.0/16"},
}

func TestDerive(t *testing.T) {
	tests := []struct {
		n      int
		bridge netip.Prefix
		want   Resources
	}{
		{1, defaultBridge, Resources{1, 7001, pfx("10.1.0.0/16"), pfx("10.11.0.0/16"),
			[]Range{rng("172.30.1.1", "172.30.1.7"), rng("172.30.1.16", "172.30.1.254")}}},
		{9, defaultBridge, Resources{9, 7009, pfx("10.9.0.0/16"), pfx("10.19.0.0/16"),
			[]Range{rng("172.30.9.1", "172.30.9.7"), rng("172.30.9.16", "172.30.9.254")}}},
		{10, defaultBridge, Resources{10, 7010, pfx("10.10.0.0/16"), pfx("10.110.0.0/16"),
			[]Range{rng("172.30.10.1", "172.30.10.7"), rng("172.30.10.16", "172.30.10.254")}}},
		{11, defaultBridge, Resources{11, 7011, pfx("10.11.0.0/16"), pfx("10.111.0.0/16"),
			[]Range{rng("172.30.11.1", "172.30.11.7"), rng("172.30.11.16", "172.30.11.254")}}},
		{99, defaultBridge, Resources{99, 7099, pfx("10.99.0.0/16"), pfx("10.199.0.0/16"),
			[]Range{rng("172.30.99.1", "172.30.99.7"), rng("172.30.99.16", "172.30.99.254")}}},
		{42, pfx("192.168.0.0/16"), Resources{42, 7042, pfx("10.42.0.0/16"), pfx("10.142.0.0/16"),
			[]Range{rng("192.168.42.1", "192.168.42.7"), rng("192.168.42.16", "192.168.42.254")}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d on %s", tt.n, tt.bridge), func(t *testing.T) {
			got, err := Derive(tt.n, tt.bridge)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Derive(%d, %s)\n got %+v\nwant %+v", tt.n, tt.bridge, got, tt.want)
			}
		})
	}
}

func TestDeriveErrors(t *testing.T) {
	for _, n := range []int{0, 100, -1, 7000} {
		_, err := Derive(n, defaultBridge)
		if !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Derive(%d): got %v, want ErrOutOfRange", n, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("got %d;", n)) || !strings.Contains(msg, "between 1 and 99") {
			t.Errorf("Derive(%d): message %q should name the value and the valid range", n, msg)
		}
	}
	for _, tt := range badBridges {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Derive(1, tt.bridge)
			if err == nil {
				t.Fatalf("Derive(1, %s) accepted a bad bridge", tt.bridge)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "IPv4 /16") && tt.name != "host bits" {
				t.Errorf("got %q, want it to contain %q and say an IPv4 /16 is expected", err, tt.want)
			}
		})
	}
}

// TestDeriveMatchesModel checks every slot on every test bridge against
// the tests' own model, so the table above is not the only evidence.
func TestDeriveMatchesModel(t *testing.T) {
	for _, bridge := range testBridges {
		for n := 1; n <= 99; n++ {
			r, err := Derive(n, bridge)
			if err != nil {
				t.Fatalf("Derive(%d, %s): %v", n, bridge, err)
			}
			m := modelOf(n, bridge)
			var pools []span
			for _, p := range r.Pools {
				pools = append(pools, span{u32(p.First), u32(p.Last)})
			}
			if r.Slot != n || r.APIPort != m.port || r.ServiceSubnet != m.svc || r.PodSubnet != m.pod || !slices.Equal(pools, m.pools) {
				t.Errorf("Derive(%d, %s) = %+v, model says %+v", n, bridge, r, m)
			}
		}
	}
}

func TestRangeString(t *testing.T) {
	if got, want := rng("172.30.1.1", "172.30.1.7").String(), "172.30.1.1-172.30.1.7"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestKubeconfigPath(t *testing.T) {
	got := KubeconfigPath("/Users/ada", "dev")
	if want := filepath.Join("/Users/ada", ".kube", "marina", "dev.kubeconfig"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLabels(t *testing.T) {
	tests := []struct {
		name, region, zone   string
		wantRegion, wantZone string
	}{
		{"defaults", "", "", "europe-west7", "europe-west7-b"},
		{"region only", "us-east1", "", "us-east1", "us-east1-b"},
		{"zone only", "", "z9", "europe-west7", "z9"},
		{"both", "r", "z", "r", "z"},
	}
	r, err := Derive(7, defaultBridge)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string]string{
				"topology.kubernetes.io/region": tt.wantRegion,
				"topology.kubernetes.io/zone":   tt.wantZone,
				"app.kubernetes.io/managed-by":  "marina",
				"marina.dev/slot":               "7",
			}
			if got := r.Labels(tt.region, tt.zone); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestDockerIPRange proves that docker's dynamic range lies inside the
// bridge and misses the gateway, the DNS addresses and every pool of every
// slot, on every test bridge.
func TestDockerIPRange(t *testing.T) {
	for _, bridge := range testBridges {
		got, err := DockerIPRange(bridge)
		if err != nil {
			t.Fatal(err)
		}
		b := bridge.Addr().As4()
		if want := netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], 128, 0}), 18); got != want {
			t.Errorf("DockerIPRange(%s) = %s, want %s", bridge, got, want)
		}
		dyn, br := prefixSpan(got), prefixSpan(bridge)
		if dyn.lo < br.lo || dyn.hi > br.hi {
			t.Errorf("%s is not inside bridge %s", got, bridge)
		}
		for _, last := range [][2]byte{{0, 1}, {255, 52}, {255, 53}} {
			ip := netip.AddrFrom4([4]byte{b[0], b[1], last[0], last[1]})
			if got.Contains(ip) {
				t.Errorf("%s contains reserved address %s", got, ip)
			}
		}
		for n := 1; n <= 99; n++ {
			for _, p := range modelOf(n, bridge).pools {
				if p.meets(dyn) {
					t.Errorf("%s meets pool %v of slot %d", got, p, n)
				}
			}
		}
	}
	for _, tt := range badBridges {
		if _, err := DockerIPRange(tt.bridge); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// names reports whether reason names slot n as a whole word.
func names(reason string, n int) bool {
	return regexp.MustCompile(fmt.Sprintf(`\bslot %d\b`, n)).MatchString(reason)
}

// TestConflictAllPairs checks Conflict on every pair of slots on every test
// bridge against the model, both ways: no reported conflict means really
// disjoint, and a reported conflict means something is really shared.
func TestConflictAllPairs(t *testing.T) {
	for _, bridge := range testBridges {
		rs := make([]Resources, 100)
		for n := 1; n <= 99; n++ {
			var err error
			if rs[n], err = Derive(n, bridge); err != nil {
				t.Fatal(err)
			}
		}
		var pairs [][2]int
		for i := 1; i <= 99; i++ {
			for j := 1; j <= 99; j++ {
				reason, bad := Conflict(rs[i], rs[j])
				shared := clash(modelOf(i, bridge), modelOf(j, bridge))
				switch {
				case !bad && shared != "":
					t.Errorf("%s: Conflict(%d, %d) found nothing, but they share %s", bridge, i, j, shared)
				case bad && shared == "":
					t.Errorf("%s: Conflict(%d, %d) = %q, but they share nothing", bridge, i, j, reason)
				case bad && !(names(reason, i) && names(reason, j)):
					t.Errorf("%s: Conflict(%d, %d) = %q, should name both slots", bridge, i, j, reason)
				}
				if bad && i < j {
					pairs = append(pairs, [2]int{i, j})
				}
			}
		}
		if bridge == defaultBridge {
			var want [][2]int
			for n := 1; n <= 9; n++ {
				want = append(want, [2]int{n, 10 + n})
			}
			if !slices.Equal(pairs, want) {
				t.Errorf("conflicting pairs on the default bridge: got %v, want %v", pairs, want)
			}
		}
	}
	got, _ := Conflict(mustDerive(t, 1, defaultBridge), mustDerive(t, 11, defaultBridge))
	if want := "pod subnet 10.11.0.0/16 of slot 1 equals service subnet 10.11.0.0/16 of slot 11"; got != want {
		t.Errorf("Conflict(1, 11) = %q, want %q", got, want)
	}
}

// TestConflictHandBuilt covers overlaps that never occur between derived
// slots on a valid bridge, so the exhaustive test above cannot see them.
func TestConflictHandBuilt(t *testing.T) {
	one := mustDerive(t, 1, defaultBridge)
	two := mustDerive(t, 2, defaultBridge)
	with := func(r Resources, f func(*Resources)) Resources { f(&r); return r }
	tests := []struct {
		name string
		a, b Resources
		want string
	}{
		{"same slot", one, one, "API port 7001 of slot 1 equals API port 7001 of slot 1"},
		{"second pools", one, with(two, func(r *Resources) { r.Pools = []Range{r.Pools[0], rng("172.30.1.200", "172.30.1.210")} }),
			"MetalLB pool 172.30.1.16-172.30.1.254 of slot 1 overlaps MetalLB pool 172.30.1.200-172.30.1.210 of slot 2"},
		{"pool in a subnet", one, with(two, func(r *Resources) { r.Pools = []Range{rng("10.1.3.1", "10.1.3.7")} }),
			"service subnet 10.1.0.0/16 of slot 1 overlaps MetalLB pool 10.1.3.1-10.1.3.7 of slot 2"},
		{"wider subnet", one, with(two, func(r *Resources) { r.PodSubnet = pfx("10.0.0.0/8") }),
			"service subnet 10.1.0.0/16 of slot 1 overlaps pod subnet 10.0.0.0/8 of slot 2"},
		{"disjoint", one, two, ""},
		{"zero values", Resources{Slot: 3, APIPort: 1}, Resources{Slot: 4, APIPort: 2}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := Conflict(tt.a, tt.b)
			if got != tt.want || bad != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", got, bad, tt.want)
			}
		})
	}
}

func TestBridgeConflict(t *testing.T) {
	for _, bridge := range testBridges {
		for n := 1; n <= 99; n++ {
			reason, bad := BridgeConflict(mustDerive(t, n, bridge), bridge)
			if want := hitsBridge(modelOf(n, bridge), bridge); bad != want {
				t.Errorf("BridgeConflict(%d, %s) = %v (%q), model says %v", n, bridge, bad, reason, want)
			}
		}
	}
	tests := []struct {
		n      int
		bridge string
		want   string
	}{
		{5, "10.5.0.0/16", "service subnet 10.5.0.0/16 of slot 5 equals the bridge 10.5.0.0/16"},
		{5, "10.15.0.0/16", "pod subnet 10.15.0.0/16 of slot 5 equals the bridge 10.15.0.0/16"},
		{15, "10.15.0.0/16", "service subnet 10.15.0.0/16 of slot 15 equals the bridge 10.15.0.0/16"},
	}
	for _, tt := range tests {
		if got, _ := BridgeConflict(mustDerive(t, tt.n, pfx(tt.bridge)), pfx(tt.bridge)); got != tt.want {
			t.Errorf("BridgeConflict(%d, %s) = %q, want %q", tt.n, tt.bridge, got, tt.want)
		}
	}
	if _, bad := BridgeConflict(mustDerive(t, 1, defaultBridge), netip.Prefix{}); bad {
		t.Error("an invalid bridge must overlap nothing")
	}
}

func mustDerive(t testing.TB, n int, bridge netip.Prefix) Resources {
	t.Helper()
	r, err := Derive(n, bridge)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func seq(from, to int) []int {
	var s []int
	for n := from; n <= to; n++ {
		s = append(s, n)
	}
	return s
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		name    string
		bridge  string
		live    []int
		pinned  int
		want    int
		wantErr []string // substrings of the error; nil means success
		// busy are API host ports another lab's clusters hold on the
		// same Docker engine.
		busy map[int]string
	}{
		{"empty", "172.30.0.0/16", nil, 0, 1, nil, nil},
		{"next", "172.30.0.0/16", []int{1, 3}, 0, 2, nil, nil},
		{"after 1..9", "172.30.0.0/16", seq(1, 9), 0, 10, nil, nil},
		{"skips 11..19", "172.30.0.0/16", seq(1, 10), 0, 20, nil, nil},
		{"lowest after a free", "172.30.0.0/16", []int{2, 3, 11}, 0, 4, nil, nil},
		{"pinned free", "172.30.0.0/16", []int{1}, 42, 42, nil, nil},
		{"pinned 11 over 1", "172.30.0.0/16", []int{1}, 11, 0, []string{
			"cluster slot 11 is not available: service subnet 10.11.0.0/16 of slot 11 equals pod subnet 10.11.0.0/16 of slot 1",
			"pin slot 2 instead"}, nil},
		{"pinned 1 over 11", "172.30.0.0/16", []int{11}, 1, 0, []string{"pod subnet 10.11.0.0/16 of slot 1 equals service subnet 10.11.0.0/16 of slot 11", "pin slot 2"}, nil},
		{"pinned taken", "172.30.0.0/16", []int{1, 5}, 5, 0, []string{"slot 5 is already used by a live cluster", "pin slot 2"}, nil},
		{"pinned 0 too low", "172.30.0.0/16", nil, -1, 0, []string{"got -1", "between 1 and 99"}, nil},
		{"pinned 100", "172.30.0.0/16", nil, 100, 0, []string{"got 100", "between 1 and 99"}, nil},
		{"live 0", "172.30.0.0/16", []int{3, 0}, 0, 0, []string{"live cluster carries slot 0", "marina.dev/slot", "fix or delete"}, nil},
		{"live 100", "172.30.0.0/16", []int{100}, 4, 0, []string{"live cluster carries slot 100"}, nil},
		{"bridge skips 5", "10.5.0.0/16", seq(1, 4), 0, 6, nil, nil},
		{"bridge frees 15", "10.5.0.0/16", []int{1, 2, 3, 4, 6, 7, 8, 9, 10}, 0, 15, nil, nil},
		{"bridge refuses 5", "10.5.0.0/16", nil, 5, 0, []string{"slot 5 is not available: service subnet 10.5.0.0/16 of slot 5 equals the bridge 10.5.0.0/16", "pin slot 1"}, nil},
		{"other bridge", "192.168.0.0/16", []int{1}, 0, 2, nil, nil},
		{"skips a busy port", "172.30.0.0/16", nil, 0, 2, nil, map[int]string{7001: "container dev-control-plane"}},
		{"skips busy and live", "172.30.0.0/16", []int{2}, 0, 4, nil, map[int]string{7001: "x", 7003: "y"}},
		{"a busy port off the slots changes nothing", "172.30.0.0/16", nil, 0, 1, nil, map[int]string{7000: "x", 7100: "y", 6443: "z"}},
		{"pinned on a busy port names the holder", "172.30.0.0/16", nil, 5, 0, []string{
			"cluster slot 5 is not available: its API port 7005 is taken on the Docker host by container dev-control-plane (kind cluster dev, network kind)",
			"pin slot 1 instead"}, map[int]string{7005: "container dev-control-plane (kind cluster dev, network kind)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Allocate(pfx(tt.bridge), tt.live, tt.busy, tt.pinned)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Fatalf("got %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got slot %d, want an error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nshould contain %q", err, w)
				}
			}
		})
	}
}

func TestAllocateErrorTypes(t *testing.T) {
	_, err := Allocate(defaultBridge, []int{1}, nil, 11)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got %T %v, want *ConflictError", err, err)
	}
	if *ce != (ConflictError{Slot: 11, With: 1, Reason: ce.Reason, Next: 2}) || !names(ce.Reason, 1) || !names(ce.Reason, 11) {
		t.Errorf("got %+v", *ce)
	}

	_, err = Allocate(pfx("10.5.0.0/16"), nil, nil, 5)
	if !errors.As(err, &ce) || ce.With != 0 || ce.Slot != 5 || ce.Next != 1 {
		t.Errorf("bridge conflict: got %#v", err)
	}

	for _, c := range []struct {
		live   []int
		pinned int
	}{{nil, 100}, {nil, -3}, {[]int{0}, 0}, {[]int{1, 250}, 7}} {
		if _, err := Allocate(defaultBridge, c.live, nil, c.pinned); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("live %v pinned %d: got %v, want ErrOutOfRange", c.live, c.pinned, err)
		}
	}
	for _, tt := range badBridges {
		if _, err := Allocate(tt.bridge, nil, nil, 0); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// TestExhaustion fills every bridge lowest-first and checks what is left.
func TestExhaustion(t *testing.T) {
	for _, bridge := range testBridges {
		var live []int
		var err error
		for range 100 { // at most 99 can succeed
			var n int
			if n, err = Allocate(bridge, live, nil, 0); err != nil {
				break
			}
			live = append(live, n)
		}
		if !errors.Is(err, ErrExhausted) {
			t.Fatalf("%s: after %d slots got %v, want ErrExhausted", bridge, len(live), err)
		}
		if !strings.Contains(err.Error(), "delete a cluster first") {
			t.Errorf("exhaustion error %q should say how to get a slot", err)
		}
		if v := invariant(bridge, live); v != "" {
			t.Errorf("%s: full live set broken: %s", bridge, v)
		}
		for n := 1; n <= 99; n++ {
			if usable(n, bridge, live) {
				t.Errorf("%s: exhausted, yet slot %d is usable next to %v", bridge, n, live)
			}
		}
		var ce *ConflictError
		if _, err := Allocate(bridge, live, nil, 99); !errors.As(err, &ce) || ce.Next != 0 || !strings.Contains(err.Error(), "no slot is free") {
			t.Errorf("%s: pinning on a full bridge: got %v", bridge, err)
		}
	}
}

// TestMaxConcurrent checks the count against a bound computed from the
// model: usable slots minus the pairs of them that exclude each other, valid
// because (checked here) every slot excludes at most one other.
func TestMaxConcurrent(t *testing.T) {
	for _, bridge := range testBridges {
		got, err := MaxConcurrent(bridge)
		if err != nil {
			t.Fatal(err)
		}
		usableSlots, pairs := 0, 0
		for i := 1; i <= 99; i++ {
			if hitsBridge(modelOf(i, bridge), bridge) {
				continue
			}
			usableSlots++
			partners := 0
			for j := 1; j <= 99; j++ {
				if j != i && !hitsBridge(modelOf(j, bridge), bridge) && clash(modelOf(i, bridge), modelOf(j, bridge)) != "" {
					partners++
					if j > i {
						pairs++
					}
				}
			}
			if partners > 1 {
				t.Fatalf("%s: slot %d excludes %d others; the bound below does not hold", bridge, i, partners)
			}
		}
		if want := usableSlots - pairs; got != want {
			t.Errorf("MaxConcurrent(%s) = %d, want %d", bridge, got, want)
		}
	}
	if got, _ := MaxConcurrent(defaultBridge); got != 90 {
		t.Errorf("default bridge: got %d, want 90 (99 slots minus the 9 pairs n/10+n)", got)
	}
	if _, err := MaxConcurrent(netip.Prefix{}); err == nil {
		t.Error("MaxConcurrent accepted an invalid bridge")
	}
}

// step runs one allocation request and checks the answer against the
// model; it returns the new live set.
func step(t testing.TB, bridge netip.Prefix, live []int, pinned int) []int {
	t.Helper()
	n, err := Allocate(bridge, live, nil, pinned)
	var ce *ConflictError
	switch {
	case err == nil:
		if pinned != 0 && n != pinned {
			t.Fatalf("pinned %d, got %d", pinned, n)
		}
		if !usable(n, bridge, live) {
			t.Fatalf("%s: got slot %d, which clashes with %v", bridge, n, live)
		}
		if pinned == 0 {
			for m := 1; m < n; m++ {
				if usable(m, bridge, live) {
					t.Fatalf("%s: got slot %d, but lower slot %d is usable next to %v", bridge, n, m, live)
				}
			}
		}
		live = append(live, n)
	case errors.Is(err, ErrExhausted) && pinned == 0:
		for m := 1; m <= 99; m++ {
			if usable(m, bridge, live) {
				t.Fatalf("%s: exhausted, but slot %d is usable next to %v", bridge, m, live)
			}
		}
	case errors.As(err, &ce) && pinned != 0:
		if usable(pinned, bridge, live) {
			t.Fatalf("%s: pinned %d refused (%v), but it is usable next to %v", bridge, pinned, err, live)
		}
		if ce.With != 0 && (!slices.Contains(live, ce.With) || !names(ce.Reason, ce.With) || !names(ce.Reason, pinned)) {
			t.Fatalf("%s: refusal %+v does not name a live slot and the pinned one", bridge, *ce)
		}
		if ce.Next != 0 && !usable(ce.Next, bridge, live) {
			t.Fatalf("%s: suggested slot %d is not usable next to %v", bridge, ce.Next, live)
		}
	default:
		t.Fatalf("%s: live %v pinned %d: unexpected error %v", bridge, live, pinned, err)
	}
	if v := invariant(bridge, live); v != "" {
		t.Fatalf("%s: after pinned=%d live=%v: %s", bridge, pinned, live, v)
	}
	return live
}

// TestAllocateProperty runs random sequences of lowest-free allocations,
// pinned allocations and frees, checking the live set after every step.
// Allocations outnumber frees, so every run also reaches exhaustion.
func TestAllocateProperty(t *testing.T) {
	for _, seed := range []uint64{1, 7, 1234, 20240601} {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		bridge := testBridges[int(seed)%len(testBridges)]
		var live []int
		exhausted := 0
		for range 300 {
			switch op := r.IntN(10); {
			case op < 6:
				before := len(live)
				if live = step(t, bridge, live, 0); len(live) == before {
					exhausted++
				}
			case op < 8:
				live = step(t, bridge, live, 1+r.IntN(99))
			case len(live) > 0:
				i := r.IntN(len(live))
				live = slices.Delete(live, i, i+1)
			}
		}
		if exhausted == 0 {
			t.Errorf("seed %d on %s never filled the bridge; raise the step count", seed, bridge)
		}
	}
}

// FuzzAllocate builds a live set from the fuzz bytes through the allocator
// and checks the invariant after every step. Byte 0 picks the bridge; each
// further byte b frees a live slot (b >= 200), takes the lowest free slot
// (b%100 == 0) or pins slot b%100. At most 128 steps run.
func FuzzAllocate(f *testing.F) {
	f.Add([]byte{0, 1, 11, 0, 0, 21})
	f.Add([]byte{2, 5, 15, 0, 0, 0})
	f.Add([]byte{3, 15, 5, 0, 250, 0, 0})
	f.Add(append([]byte{1}, make([]byte, 120)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		bridge := testBridges[int(data[0])%len(testBridges)]
		var live []int
		for i, b := range data[1:min(len(data), 129)] {
			if b >= 200 {
				if len(live) > 0 {
					j := (int(b) + i) % len(live)
					live = slices.Delete(live, j, j+1)
				}
				continue
			}
			live = step(t, bridge, live, int(b)%100)
		}
	})
}

func TestRangeContains(t *testing.T) {
	r := rng("172.30.1.1", "172.30.1.7")
	for addr, want := range map[string]bool{"172.30.1.0": false, "172.30.1.1": true, "172.30.1.4": true, "172.30.1.7": true, "172.30.1.8": false, "172.30.2.1": false} {
		if got := r.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s in %s = %v, want %v", addr, r, got, want)
		}
	}
}
