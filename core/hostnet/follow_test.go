package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRoutes is the host's routing table for one CIDR, as route(8) (macOS)
// or ip(8) (Linux) show and change it, behind sudo -n. Only this boundary
// is faked: the Follower and Route run as they do in the host agent.
type fakeRoutes struct {
	mu     sync.Mutex
	os     string
	gw     string // "" = no route for the CIDR
	refuse bool   // sudo -n asks for a password
	root   bool   // the process is root: changes need no sudo
	argvs  []string
}

func (f *fakeRoutes) set(gw string) { f.mu.Lock(); f.gw = gw; f.mu.Unlock() }

func (f *fakeRoutes) setRefuse(b bool) { f.mu.Lock(); f.refuse = b; f.mu.Unlock() }

func (f *fakeRoutes) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.argvs
	f.argvs = nil
	return a
}

func (f *fakeRoutes) Run(_ context.Context, argv []string, _ []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := QuoteArgv(argv)
	f.argvs = append(f.argvs, s)
	fail := func(stderr string) ([]byte, error) {
		return nil, &CommandError{Argv: slices.Clone(argv), Stderr: stderr, Err: errors.New("exit status 1")}
	}
	root := argv
	if len(argv) > 3 && QuoteArgv(argv[:3]) == "sudo -n --" {
		if f.refuse {
			return fail("sudo: a password is required")
		}
		root = argv[3:]
	}
	cmd := QuoteArgv(root)
	switch {
	case cmd == darwinGet:
		if f.gw == "" {
			return fail("route: writing to routing socket: not in table")
		}
		return []byte(fmt.Sprintf("   route to: 172.30.0.0\ndestination: 172.30.0.0\n       mask: 255.255.0.0\n    gateway: %s\n  interface: bridge100\n", f.gw)), nil
	case cmd == linuxShow:
		if f.gw == "" {
			return nil, nil
		}
		return []byte("172.30.0.0/16 via " + f.gw + " dev virbr0 \n"), nil
	case len(root) == len(argv) && !f.root:
		return fail("must be root")
	case cmd == "/sbin/route -n delete -net 172.30.0.0/16":
		if f.gw == "" {
			return fail("route: writing to routing socket: not in table")
		}
		f.gw = ""
		return []byte("delete net 172.30.0.0\n"), nil
	case strings.HasPrefix(cmd, "/sbin/route -n add -net 172.30.0.0/16 ") && len(root) == 6:
		if f.gw != "" {
			return fail("route: writing to routing socket: File exists")
		}
		f.gw = root[5]
		return []byte("add net 172.30.0.0: gateway " + f.gw + "\n"), nil
	case strings.HasPrefix(cmd, "ip route replace 172.30.0.0/16 via ") && len(root) == 6:
		f.gw = root[5]
		return nil, nil
	}
	return fail("fakeRoutes: unexpected command " + s)
}

// followHarness runs a Follower whose every look is driven by the test:
// the test starts a look (the ticker is a channel it sends on), hands it
// the VM's address, and waits for the look to report back. Between looks
// the follower waits on the ticker, so the test changes the routing table
// or the route to keep without racing it, never sleeps, and every loop is
// bounded by its own sends.
type followHarness struct {
	t      *testing.T
	routes *fakeRoutes
	route  atomic.Pointer[Route]
	tick   chan time.Time
	addrs  chan any // netip.Addr or error
	done   chan struct{}
	cancel context.CancelFunc
	ended  chan struct{}
	looks  int

	mu   sync.Mutex
	logs []string
}

func startFollower(t *testing.T, routes *fakeRoutes, r *Route) *followHarness {
	t.Helper()
	h := &followHarness{t: t, routes: routes, tick: make(chan time.Time), addrs: make(chan any),
		done: make(chan struct{}), ended: make(chan struct{})}
	h.route.Store(r)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	f := &Follower{
		Route: h.route.Load,
		Addr: func(ctx context.Context) (netip.Addr, error) {
			select {
			case v := <-h.addrs:
				if err, ok := v.(error); ok {
					return netip.Addr{}, err
				}
				return v.(netip.Addr), nil
			case <-ctx.Done():
				return netip.Addr{}, ctx.Err()
			}
		},
		Logf: func(format string, args ...any) {
			h.mu.Lock()
			h.logs = append(h.logs, fmt.Sprintf(format, args...))
			h.mu.Unlock()
		},
		tick: h.tick,
		looked: func() {
			select {
			case h.done <- struct{}{}:
			case <-ctx.Done():
			}
		},
	}
	go func() { defer close(h.ended); f.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// begin starts the next look (the first one starts with Run).
func (h *followHarness) begin() {
	if h.looks > 0 {
		h.tick <- time.Time{}
	}
	h.looks++
}

// look runs one look that reads addr (an address string or an error) and
// returns the commands it ran.
func (h *followHarness) look(addr any) []string {
	h.t.Helper()
	if s, ok := addr.(string); ok {
		addr = netip.MustParseAddr(s)
	}
	h.begin()
	h.addrs <- addr
	<-h.done
	return h.routes.take()
}

// lookNoRoute runs one look that has no route to keep (it reads no
// address).
func (h *followHarness) lookNoRoute() []string {
	h.begin()
	<-h.done
	return h.routes.take()
}

func (h *followHarness) stop() {
	h.cancel()
	<-h.ended
}

func (h *followHarness) logged(substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.logs {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func wantArgv(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s ran\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func darwinFollowRoute(r Runner, root bool) *Route {
	return &Route{OS: Darwin, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: r, IsRoot: root}}
}

// TestFollowerMovesTheRoute: in place via A, then the VM comes back at B
// (sleep/wake): the route is deleted and added via B with sudo -n; a route
// macOS dropped is added again; an unchanged one is only looked at.
func TestFollowerMovesTheRoute(t *testing.T) {
	routes := &fakeRoutes{os: Darwin, gw: "192.168.64.3"}
	h := startFollower(t, routes, darwinFollowRoute(routes, false))
	wantArgv(t, "in place", h.look("192.168.64.3"), darwinGet)
	wantArgv(t, "address changed", h.look("192.168.64.9"), darwinGet,
		"sudo -n -- /sbin/route -n delete -net 172.30.0.0/16",
		"sudo -n -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.9")
	wantArgv(t, "followed", h.look("192.168.64.9"), darwinGet)
	routes.set("") // the interface went away with the route
	wantArgv(t, "route dropped", h.look("192.168.64.9"), darwinGet,
		"sudo -n -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.9")
	if routes.gw != "192.168.64.9" {
		t.Errorf("route via %q", routes.gw)
	}
	if h.logged("now via 192.168.64.9") != 2 || h.logged("is via 192.168.64.3, the VM is at 192.168.64.9: running sudo /sbin/route") != 1 {
		t.Errorf("logs: %q", h.logs)
	}
}

// TestFollowerWaitsForUp: a route marina up has not set (missing, or via
// an old address from an earlier boot) is not touched: up fixes it and
// the follower follows from then on.
func TestFollowerWaitsForUp(t *testing.T) {
	routes := &fakeRoutes{os: Darwin}
	h := startFollower(t, routes, darwinFollowRoute(routes, false))
	wantArgv(t, "missing before up", h.look("192.168.64.3"), darwinGet)
	routes.set("192.168.64.7")
	wantArgv(t, "stale before up", h.look("192.168.64.3"), darwinGet)
	routes.set("192.168.64.3") // marina up
	wantArgv(t, "after up", h.look("192.168.64.3"), darwinGet)
	wantArgv(t, "then moved", h.look("192.168.64.4"), darwinGet,
		"sudo -n -- /sbin/route -n delete -net 172.30.0.0/16",
		"sudo -n -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.4")
}

// TestFollowerSudoRefused: sudo -n refuses: the hint to install the
// sudoers drop-in is logged once, the same change is not retried every
// look, and the follower keeps watching; a new address is tried again, and
// once the drop-in allows it the route follows.
func TestFollowerSudoRefused(t *testing.T) {
	routes := &fakeRoutes{os: Darwin, gw: "192.168.64.3"}
	h := startFollower(t, routes, darwinFollowRoute(routes, false))
	h.look("192.168.64.3")
	routes.setRefuse(true)
	wantArgv(t, "refused", h.look("192.168.64.9"), darwinGet, "sudo -n -- /sbin/route -n delete -net 172.30.0.0/16")
	wantArgv(t, "same again", h.look("192.168.64.9"), darwinGet)
	wantArgv(t, "new address", h.look("192.168.64.10"), darwinGet, "sudo -n -- /sbin/route -n delete -net 172.30.0.0/16")
	if n := h.logged("`marina sudoers --install`"); n != 1 {
		t.Errorf("the sudoers hint was logged %d times, want once: %q", n, h.logs)
	}
	routes.setRefuse(false) // marina sudoers --install
	wantArgv(t, "allowed", h.look("192.168.64.11"), darwinGet,
		"sudo -n -- /sbin/route -n delete -net 172.30.0.0/16",
		"sudo -n -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.11")
}

// TestFollowerAsRootAndOnLinux: no sudo when root; ip route replace on a
// Linux host.
func TestFollowerAsRootAndOnLinux(t *testing.T) {
	routes := &fakeRoutes{os: Darwin, gw: "192.168.64.3", root: true}
	h := startFollower(t, routes, darwinFollowRoute(routes, true))
	h.look("192.168.64.3")
	wantArgv(t, "root", h.look("192.168.64.5"), darwinGet,
		"/sbin/route -n delete -net 172.30.0.0/16", "/sbin/route -n add -net 172.30.0.0/16 192.168.64.5")
	h.stop()

	lroutes := &fakeRoutes{os: Linux, gw: "192.168.5.15"}
	lh := startFollower(t, lroutes, &Route{OS: Linux, CIDR: "172.30.0.0/16", Priv: &Privileged{Runner: lroutes}})
	lh.look("192.168.5.15")
	wantArgv(t, "linux", lh.look("192.168.5.16"), linuxShow, "sudo -n -- ip route replace 172.30.0.0/16 via 192.168.5.16")
}

// TestFollowerNoRouteAndAddressErrors: without a route to keep nothing is
// looked up; an address that cannot be read is logged once and changes
// nothing; a new CIDR must be seen in place before it is followed.
func TestFollowerNoRouteAndAddressErrors(t *testing.T) {
	routes := &fakeRoutes{os: Darwin, gw: "192.168.64.3"}
	r := darwinFollowRoute(routes, false)
	h := startFollower(t, routes, nil)
	wantArgv(t, "no route", h.lookNoRoute())
	h.route.Store(r) // marina up
	wantArgv(t, "booting", h.look(errors.New("ssh: connection refused")))
	wantArgv(t, "booting", h.look(errors.New("ssh: connection refused")))
	if n := h.logged("cannot read the VM's address"); n != 1 {
		t.Errorf("address error logged %d times: %q", n, h.logs)
	}
	wantArgv(t, "in place", h.look("192.168.64.3"), darwinGet)
	// down --remove-route: following stops, and the route is not re-added.
	h.route.Store(nil)
	routes.set("")
	wantArgv(t, "stopped", h.lookNoRoute())
	h.route.Store(r)
	if h.logged("route following stopped") != 1 {
		t.Errorf("logs: %q", h.logs)
	}
	wantArgv(t, "not re-armed by a missing route", h.look("192.168.64.3"), darwinGet)
}

// TestSudoRefused tells sudo's refusals from the command's own failure.
func TestSudoRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&CommandError{Argv: []string{"sudo", "-n", "--", "x"}, Stderr: "sudo: a password is required"}, true},
		{&CommandError{Argv: []string{"sudo", "-n", "--", "x"}, Stderr: "Sorry, user alice is not allowed to execute '/sbin/route -n add' as root on mac."}, true},
		{&CommandError{Argv: []string{"sudo", "-n", "--", "x"}, Stderr: "route: writing to routing socket: File exists"}, false},
		{&CommandError{Argv: []string{"/sbin/route"}, Stderr: "sudo: a password is required"}, false},
		{errors.New("sudo: a password is required"), false},
	} {
		if got := sudoRefused(tc.err); got != tc.want {
			t.Errorf("sudoRefused(%v) = %v", tc.err, got)
		}
	}
}
