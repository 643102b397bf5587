package main

import (
	"net"
	"runtime"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// enterScratchNetns moves the test's goroutine, locked to its OS thread, into
// a new, empty network namespace (never the host's) for the rest of the test,
// or skips the test when that is not permitted. Do not start subtests or
// goroutines that touch netlink after calling it: they would run elsewhere.
func enterScratchNetns(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("netns.Get: %v", err)
	}
	scratch, err := netns.New() // unshare(CLONE_NEWNET) on this thread
	if err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Skipf("cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		scratch.Close()
		defer orig.Close()
		if err := netns.Set(orig); err != nil {
			// Keep the thread locked: it is destroyed with the goroutine
			// instead of going back to the scheduler in the wrong namespace.
			t.Errorf("restoring network namespace: %v", err)
			return
		}
		runtime.UnlockOSThread()
	})
}

func TestNetlinkRoutes(t *testing.T) {
	enterScratchNetns(t)
	// The node's docker bridge interface, played by a link of the scratch
	// namespace: a veth or a dummy if the kernel has them, else loopback
	// (IPv4 only: the kernel refuses IPv6 gateways on loopback).
	link, ipv6 := scratchLink(t)
	if err := netlink.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	cidrs := []string{"172.18.0.2/16"}
	if ipv6 {
		cidrs = append(cidrs, "fc00:f853:ccd:e793::2/64")
	}
	for _, cidr := range cidrs {
		addr, _ := netlink.ParseAddr(cidr)
		addr.Flags = syscall.IFA_F_NODAD // usable at once
		if err := netlink.AddrAdd(link, addr); err != nil {
			t.Fatal(err)
		}
		// Make sure the prefix is on-link (the kernel adds no prefix route on lo).
		onLink := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: addr.IPNet, Scope: netlink.SCOPE_LINK}
		onLink.Dst.IP = onLink.Dst.IP.Mask(onLink.Dst.Mask)
		if err := netlink.RouteReplace(onLink); err != nil {
			t.Fatal(err)
		}
	}
	// A foreign route that nodenet must never list or touch.
	_, foreign, _ := net.ParseCIDR("10.99.0.0/24")
	if err := netlink.RouteAdd(&netlink.Route{Dst: foreign, Gw: net.ParseIP("172.18.0.50")}); err != nil {
		t.Fatal(err)
	}

	ops := netlinkRoutes{}
	v4 := route("10.244.1.0/24", "172.18.0.3", "worker")
	v6 := route("fd00:10:244:1::/64", "fc00:f853:ccd:e793::3", "worker")
	want := "[10.244.1.0/24 via 172.18.0.4]"
	installs := []Route{v4}
	if ipv6 {
		installs = append(installs, v6)
		want = "[10.244.1.0/24 via 172.18.0.4 fd00:10:244:1::/64 via fc00:f853:ccd:e793::3]"
	}
	for _, r := range installs {
		if err := ops.Replace(r); err != nil {
			t.Fatalf("Replace(%v): %v", r, err)
		}
	}
	// Replace is idempotent and can change the gateway.
	v4b := route("10.244.1.0/24", "172.18.0.4", "worker")
	if err := ops.Replace(v4b); err != nil {
		t.Fatal(err)
	}
	got, err := ops.List()
	if err != nil {
		t.Fatal(err)
	}
	if s := routesString(got); s != want {
		t.Fatalf("List() = %s, want %s", s, want)
	}

	// Adopt + Sync(nil) removes exactly nodenet's routes.
	m := newRouteManager(ops, (&logSink{}).logf)
	if err := m.Adopt(); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := ops.List(); len(got) != 0 {
		t.Errorf("routes left after Sync(nil): %s", routesString(got))
	}
	// Deleting a route that is gone is not an error.
	if err := ops.Delete(v4b); err != nil {
		t.Errorf("Delete of a missing route: %v", err)
	}
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: foreign}, netlink.RT_FILTER_DST)
	if err != nil || len(rs) != 1 {
		t.Errorf("foreign route gone: %v %v", rs, err)
	}
}

func scratchLink(t *testing.T) (link netlink.Link, ipv6 bool) {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nodenet0"}, PeerName: "nodenet1"}
	if err := netlink.LinkAdd(veth); err == nil {
		peer, err := netlink.LinkByName("nodenet1")
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(peer); err != nil {
			t.Fatal(err)
		}
		return veth, true
	}
	dummy := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "nodenet0"}}
	if err := netlink.LinkAdd(dummy); err == nil {
		return dummy, true
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Skipf("no usable link: %v", err)
	}
	t.Log("neither veth nor dummy links are available; testing IPv4 on loopback only")
	return lo, false
}

func routesString(rs []Route) string {
	s := "["
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += r.Dst.String() + " via " + r.Gw.String()
	}
	return s + "]"
}
