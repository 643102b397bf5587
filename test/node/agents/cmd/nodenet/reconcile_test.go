package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fakeOps is an in-memory routing table holding only nodenet's routes.
type fakeOps struct {
	table   map[netip.Prefix]Route
	failDst map[netip.Prefix]bool // Replace/Delete fail for these
	calls   []string
}

func newFakeOps(existing ...Route) *fakeOps {
	f := &fakeOps{table: map[netip.Prefix]Route{}, failDst: map[netip.Prefix]bool{}}
	for _, r := range existing {
		f.table[r.Dst] = Route{Dst: r.Dst, Gw: r.Gw}
	}
	return f
}

func (f *fakeOps) Replace(r Route) error {
	f.calls = append(f.calls, "replace "+r.Dst.String())
	if f.failDst[r.Dst] {
		return errors.New("boom")
	}
	f.table[r.Dst] = Route{Dst: r.Dst, Gw: r.Gw}
	return nil
}

func (f *fakeOps) Delete(r Route) error {
	f.calls = append(f.calls, "delete "+r.Dst.String())
	if f.failDst[r.Dst] {
		return errors.New("boom")
	}
	delete(f.table, r.Dst)
	return nil
}

func (f *fakeOps) List() ([]Route, error) {
	var out []Route
	for _, r := range f.table {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Route) int { return a.Dst.Compare(b.Dst) })
	return out, nil
}

func (f *fakeOps) String() string {
	rs, _ := f.List()
	var s []string
	for _, r := range rs {
		s = append(s, r.Dst.String()+" via "+r.Gw.String())
	}
	return strings.Join(s, ", ")
}

type logSink struct{ lines []string }

func (l *logSink) logf(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) take() []string { out := l.lines; l.lines = nil; return out }

func TestRouteManagerSync(t *testing.T) {
	ops := newFakeOps()
	var logs logSink
	m := newRouteManager(ops, logs.logf)

	a := route("10.244.1.0/24", "172.18.0.3", "worker")
	b := route("10.244.2.0/24", "172.18.0.4", "worker2")

	// Install two routes.
	if err := m.Sync([]Route{a, b}); err != nil {
		t.Fatal(err)
	}
	if got, want := ops.String(), "10.244.1.0/24 via 172.18.0.3, 10.244.2.0/24 via 172.18.0.4"; got != want {
		t.Fatalf("table = %q, want %q", got, want)
	}
	if got := logs.take(); len(got) != 2 || !strings.HasPrefix(got[0], "route added: 10.244.1.0/24") {
		t.Errorf("logs = %q", got)
	}

	// Nothing changes: routes are re-applied (self-healing) but nothing is logged.
	ops.calls = nil
	delete(ops.table, a.Dst) // someone removed it behind our back
	if err := m.Sync([]Route{a, b}); err != nil {
		t.Fatal(err)
	}
	if got := logs.take(); len(got) != 0 {
		t.Errorf("logs on a no-op sync = %q", got)
	}
	if _, ok := ops.table[a.Dst]; !ok {
		t.Errorf("route %s not repaired", a.Dst)
	}

	// Gateway change.
	a2 := route("10.244.1.0/24", "172.18.0.9", "worker")
	if err := m.Sync([]Route{a2, b}); err != nil {
		t.Fatal(err)
	}
	if got := logs.take(); len(got) != 1 || !strings.HasPrefix(got[0], "route changed: 10.244.1.0/24 via 172.18.0.9") {
		t.Errorf("logs = %q", got)
	}

	// worker2 disappears.
	if err := m.Sync([]Route{a2}); err != nil {
		t.Fatal(err)
	}
	if got, want := ops.String(), "10.244.1.0/24 via 172.18.0.9"; got != want {
		t.Errorf("table = %q, want %q", got, want)
	}
	if got := logs.take(); len(got) != 1 || got[0] != "route removed: 10.244.2.0/24 via 172.18.0.4 (node worker2)" {
		t.Errorf("logs = %q", got)
	}

	// Everything disappears.
	if err := m.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if len(ops.table) != 0 || len(m.installed) != 0 {
		t.Errorf("table = %q, installed = %v; want both empty", ops, m.installed)
	}
}

func TestRouteManagerOnlyDeletesItsOwnRoutes(t *testing.T) {
	ops := newFakeOps()
	m := newRouteManager(ops, (&logSink{}).logf)
	a := route("10.244.1.0/24", "172.18.0.3", "worker")
	if err := m.Sync([]Route{a}); err != nil {
		t.Fatal(err)
	}
	ops.calls = nil
	if err := m.Sync(nil); err != nil {
		t.Fatal(err)
	}
	// Only the route it installed is deleted; nothing else is touched.
	if got := fmt.Sprint(ops.calls); got != "[delete 10.244.1.0/24]" {
		t.Errorf("calls = %v", got)
	}
	ops.calls = nil
	if err := m.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if len(ops.calls) != 0 {
		t.Errorf("calls on an empty sync = %v", ops.calls)
	}
}

func TestRouteManagerErrorsAreRetried(t *testing.T) {
	ops := newFakeOps()
	var logs logSink
	m := newRouteManager(ops, logs.logf)
	a := route("10.244.1.0/24", "172.18.0.3", "worker")
	b := route("10.244.2.0/24", "172.18.0.4", "worker2")

	ops.failDst[a.Dst] = true
	err := m.Sync([]Route{a, b})
	if err == nil || !strings.Contains(err.Error(), "10.244.1.0/24") {
		t.Fatalf("Sync error = %v, want one naming 10.244.1.0/24", err)
	}
	if _, ok := ops.table[b.Dst]; !ok {
		t.Errorf("a failure on one route stopped the others")
	}
	if _, ok := m.installed[a.Dst]; ok {
		t.Errorf("failed route recorded as installed")
	}
	delete(ops.failDst, a.Dst)
	if err := m.Sync([]Route{a, b}); err != nil {
		t.Fatal(err)
	}
	if _, ok := ops.table[a.Dst]; !ok {
		t.Errorf("route not installed on retry")
	}

	// A failed delete is retried too.
	ops.failDst[b.Dst] = true
	if err := m.Sync([]Route{a}); err == nil {
		t.Fatal("Sync succeeded, want the delete error")
	}
	if _, ok := m.installed[b.Dst]; !ok {
		t.Fatal("route forgotten although its deletion failed")
	}
	delete(ops.failDst, b.Dst)
	if err := m.Sync([]Route{a}); err != nil {
		t.Fatal(err)
	}
	if _, ok := ops.table[b.Dst]; ok {
		t.Errorf("stale route not removed on retry")
	}
}

func TestRouteManagerAdopt(t *testing.T) {
	// A previous run left two routes; one is still wanted.
	ops := newFakeOps(
		route("10.244.1.0/24", "172.18.0.3", ""),
		route("10.244.9.0/24", "172.18.0.9", ""),
	)
	var logs logSink
	m := newRouteManager(ops, logs.logf)
	if err := m.Adopt(); err != nil {
		t.Fatal(err)
	}
	if got := logs.take(); len(got) != 2 {
		t.Errorf("adopt logs = %q", got)
	}
	if err := m.Sync([]Route{route("10.244.1.0/24", "172.18.0.3", "worker")}); err != nil {
		t.Fatal(err)
	}
	if got, want := ops.String(), "10.244.1.0/24 via 172.18.0.3"; got != want {
		t.Errorf("table = %q, want %q", got, want)
	}
	if got := logs.take(); fmt.Sprint(got) != "[route removed: 10.244.9.0/24 via 172.18.0.9]" {
		t.Errorf("logs = %q", got)
	}
}
