package hostnet

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"
)

const (
	darwinGet = "/sbin/route -n get -net 172.30.0.0/16"
	linuxShow = "ip -4 route show exact 172.30.0.0/16"
	vmIP      = "192.168.64.3"
)

func readRouteFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "route", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRoute drives Check, Ensure and Remove for both OSes against the
// outputs route(8) and ip(8) really print, recording every command run.
func TestRoute(t *testing.T) {
	notInTable := reply{fail: true, stderr: "route: writing to routing socket: not in table"}
	for _, tc := range []struct {
		name       string
		os         string
		lookup     reply
		want       RouteState
		wantEnsure []string // commands after the lookup
		wantRemove []string
	}{
		{
			name: "darwin: route to the VM in place", os: Darwin,
			lookup: reply{out: readRouteFixture(t, "darwin-match.txt")},
			want:   RouteState{Present: true, Gateway: vmIP, Interface: "bridge100", Correct: true},
			// Nothing to do: no privileged command at all.
			wantEnsure: nil,
			wantRemove: []string{"/sbin/route -n delete -net 172.30.0.0/16"},
		},
		{
			name: "darwin: only the default route covers the CIDR (G4)", os: Darwin,
			lookup:     reply{out: readRouteFixture(t, "darwin-default-only.txt")},
			want:       RouteState{},
			wantEnsure: []string{"/sbin/route -n add -net 172.30.0.0/16 192.168.64.3"},
			wantRemove: nil,
		},
		{
			name: "darwin: a VPN's wider route covers the CIDR", os: Darwin,
			lookup:     reply{out: readRouteFixture(t, "darwin-vpn-wider.txt")},
			want:       RouteState{},
			wantEnsure: []string{"/sbin/route -n add -net 172.30.0.0/16 192.168.64.3"},
		},
		{
			name: "darwin: route points at another gateway", os: Darwin,
			lookup: reply{out: readRouteFixture(t, "darwin-wrong-gateway.txt")},
			want:   RouteState{Present: true, Gateway: "192.168.64.7", Interface: "bridge100"},
			wantEnsure: []string{
				"/sbin/route -n delete -net 172.30.0.0/16",
				"/sbin/route -n add -net 172.30.0.0/16 192.168.64.3",
			},
			wantRemove: []string{"/sbin/route -n delete -net 172.30.0.0/16"},
		},
		{
			name: "darwin: no route at all (no default route either)", os: Darwin,
			lookup:     notInTable,
			want:       RouteState{},
			wantEnsure: []string{"/sbin/route -n add -net 172.30.0.0/16 192.168.64.3"},
		},
		{
			name: "linux: route via the VM in place", os: Linux,
			lookup:     reply{out: "172.30.0.0/16 via 192.168.64.3 dev virbr0 \n"},
			want:       RouteState{Present: true, Gateway: vmIP, Interface: "virbr0", Correct: true},
			wantRemove: []string{"ip route del 172.30.0.0/16 via 192.168.64.3"},
		},
		{
			name: "linux: no route", os: Linux,
			lookup:     reply{out: ""},
			want:       RouteState{},
			wantEnsure: []string{"ip route replace 172.30.0.0/16 via 192.168.64.3"},
		},
		{
			name: "linux: route via another gateway", os: Linux,
			lookup:     reply{out: "172.30.0.0/16 via 192.168.5.15 dev eth0 proto static metric 100 \n"},
			want:       RouteState{Present: true, Gateway: "192.168.5.15", Interface: "eth0"},
			wantEnsure: []string{"ip route replace 172.30.0.0/16 via 192.168.64.3"},
			wantRemove: []string{"ip route del 172.30.0.0/16 via 192.168.5.15"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lookup := darwinGet
			if tc.os == Linux {
				lookup = linuxShow
			}
			newRoute := func() (*Route, *fakeRunner) {
				f := &fakeRunner{replies: map[string]reply{lookup: tc.lookup}}
				return &Route{OS: tc.os, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: f, IsRoot: true, Out: &bytes.Buffer{}}}, f
			}
			r, f := newRoute()
			st, err := r.Check(ctx, vmIP)
			if err != nil {
				t.Fatal(err)
			}
			st.Detail = ""
			if st != tc.want {
				t.Errorf("Check = %+v, want %+v", st, tc.want)
			}
			if got := f.argvs(); len(got) != 1 || got[0] != lookup {
				t.Errorf("Check ran %q, want only %q", got, lookup)
			}

			r, f = newRoute()
			changed, err := r.Ensure(ctx, vmIP)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.argvs()[1:]; strings.Join(got, "\n") != strings.Join(tc.wantEnsure, "\n") || changed != (len(tc.wantEnsure) > 0) {
				t.Errorf("Ensure ran %q (changed %v), want %q", got, changed, tc.wantEnsure)
			}

			r, f = newRoute()
			changed, err = r.Remove(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.argvs()[1:]; strings.Join(got, "\n") != strings.Join(tc.wantRemove, "\n") || changed != (len(tc.wantRemove) > 0) {
				t.Errorf("Remove ran %q (changed %v), want %q", got, changed, tc.wantRemove)
			}
		})
	}
}

func TestRouteDetail(t *testing.T) {
	pfx := netip.MustParsePrefix("172.30.0.0/16")
	for file, want := range map[string]string{
		"darwin-default-only.txt":  "only the default route (via 192.168.1.1, en0) covers 172.30.0.0/16",
		"darwin-vpn-wider.txt":     "only the route to 172.16.0.0/12 (via 10.8.0.1, utun4) covers 172.30.0.0/16",
		"darwin-wrong-gateway.txt": "172.30.0.0/16 via 192.168.64.7, bridge100",
	} {
		if got := parseDarwinRouteGet(readRouteFixture(t, file), pfx).Detail; got != want {
			t.Errorf("%s: Detail = %q, want %q", file, got, want)
		}
	}
}

// TestRouteEnsureAnnouncement pins what the user sees before sudo asks.
func TestRouteEnsureAnnouncement(t *testing.T) {
	var out bytes.Buffer
	f := &fakeRunner{replies: map[string]reply{darwinGet: {out: readRouteFixture(t, "darwin-wrong-gateway.txt")}}, out: &out}
	r := &Route{OS: Darwin, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: f, Interactive: true, Out: &out}}
	if _, err := r.Ensure(context.Background(), vmIP); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/route-ensure-darwin.golden", out.Bytes())
}

func TestRouteRefusals(t *testing.T) {
	ctx := context.Background()
	direct := &fakeRunner{replies: map[string]reply{linuxShow: {out: "172.30.0.0/16 dev br-0123456789ab proto kernel scope link src 172.30.0.1 \n"}}}
	for _, tc := range []struct {
		name string
		r    *Route
		gw   string
		want string
	}{
		{"bad CIDR", &Route{OS: Darwin, CIDR: "172.30.0.0", Priv: &Privileged{Runner: &fakeRunner{}}}, vmIP, "bridge CIDR \"172.30.0.0\" (network.bridgeCIDR) is not a CIDR"},
		{"host bits set", &Route{OS: Darwin, CIDR: "172.30.1.0/16", Priv: &Privileged{Runner: &fakeRunner{}}}, vmIP, "use 172.30.0.0/16"},
		{"IPv6 CIDR", &Route{OS: Darwin, CIDR: "fd00::/64", Priv: &Privileged{Runner: &fakeRunner{}}}, vmIP, "is not IPv4"},
		{"gateway not an IP", &Route{OS: Darwin, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: &fakeRunner{}}}, "lima0", "route gateway \"lima0\" (the VM's lima0 address) is not an IPv4 address"},
		{"gateway inside the bridge", &Route{OS: Darwin, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: &fakeRunner{}}}, "172.30.0.9", "lies inside the bridge CIDR"},
		{"empty gateway", &Route{OS: Darwin, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: &fakeRunner{}}}, "", "is the VM running?"},
		{"unknown OS", &Route{OS: "windows", CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: &fakeRunner{}}}, vmIP, "route OS \"windows\""},
		{"directly connected bridge", &Route{OS: Linux, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: direct, IsRoot: true}}, vmIP, "is directly connected on this machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.r.Ensure(ctx, tc.gw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if f, ok := tc.r.Priv.Runner.(*fakeRunner); ok {
				for _, a := range f.argvs() {
					if !strings.Contains(a, " get ") && !strings.Contains(a, " show ") {
						t.Errorf("ran %q despite the error", a)
					}
				}
			}
		})
	}
	// A directly connected network is not marina's route: Remove leaves it.
	r := &Route{OS: Linux, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: direct, IsRoot: true}}
	if changed, err := r.Remove(ctx); err != nil || changed {
		t.Fatalf("Remove of a connected route: %v, %v", changed, err)
	}
}

func FuzzParseDarwinRouteGet(f *testing.F) {
	for _, n := range []string{"darwin-match.txt", "darwin-default-only.txt", "darwin-wrong-gateway.txt", "darwin-vpn-wider.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "route", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	pfx := netip.MustParsePrefix("172.30.0.0/16")
	f.Fuzz(func(t *testing.T, out string) {
		st := parseDarwinRouteGet(out, pfx)
		if st.Present && !strings.Contains(out, "destination") {
			t.Fatalf("present without a destination line: %q", out)
		}
		if st.Gateway != "" {
			if _, err := netip.ParseAddr(st.Gateway); err != nil {
				t.Fatalf("gateway %q is not an address", st.Gateway)
			}
		}
		lst := parseLinuxRouteShow(out, pfx)
		if lst.Present && !strings.Contains(out, "172.30.") {
			t.Fatalf("linux: present without the prefix: %q", out)
		}
	})
}
