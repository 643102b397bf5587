package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// routeOps is the kernel side of route management. Only routes tagged as
// nodenet's (see netlink.go) are ever listed or deleted.
type routeOps interface {
	// Replace installs r, replacing any route to the same destination.
	Replace(r Route) error
	// Delete removes r; deleting a route that is already gone is not an error.
	Delete(r Route) error
	// List returns the routes nodenet installed (tagged with its protocol),
	// possibly by an earlier run of the agent.
	List() ([]Route, error)
}

// routeManager keeps the kernel's routes to other nodes' pod CIDRs in line
// with the desired set, and remembers what it installed so that it only ever
// deletes its own routes.
type routeManager struct {
	ops       routeOps
	installed map[netip.Prefix]Route
	logf      func(format string, args ...any)
}

func newRouteManager(ops routeOps, logf func(string, ...any)) *routeManager {
	return &routeManager{ops: ops, installed: map[netip.Prefix]Route{}, logf: logf}
}

// Adopt takes ownership of the routes a previous run of the agent left
// behind, so that they are removed if they are no longer desired.
func (m *routeManager) Adopt() error {
	routes, err := m.ops.List()
	if err != nil {
		return err
	}
	for _, r := range routes {
		if _, ok := m.installed[r.Dst]; ok {
			continue
		}
		m.installed[r.Dst] = r
		m.logf("route adopted: %s via %s (left by a previous run)", r.Dst, r.Gw)
	}
	return nil
}

// Sync makes the installed routes match desired. Every desired route is
// (re)applied on each call, which also repairs routes removed behind the
// agent's back; only changes are logged. Routes the agent installed that are
// no longer desired are deleted. Failures are returned together and the
// affected routes are retried on the next call.
func (m *routeManager) Sync(desired []Route) error {
	var errs []error
	want := make(map[netip.Prefix]bool, len(desired))
	for _, r := range desired {
		want[r.Dst] = true
		if err := m.ops.Replace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s (node %s): %w", r.Dst, r.Gw, r.Node, err))
			continue
		}
		prev, had := m.installed[r.Dst]
		m.installed[r.Dst] = r
		switch {
		case !had:
			m.logf("route added: %s via %s (node %s)", r.Dst, r.Gw, r.Node)
		case prev.Gw != r.Gw:
			m.logf("route changed: %s via %s (node %s), was via %s", r.Dst, r.Gw, r.Node, prev.Gw)
		}
	}

	stale := make([]netip.Prefix, 0)
	for dst := range m.installed {
		if !want[dst] {
			stale = append(stale, dst)
		}
	}
	slices.SortFunc(stale, netip.Prefix.Compare)
	for _, dst := range stale {
		r := m.installed[dst]
		if err := m.ops.Delete(r); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s via %s: %w", r.Dst, r.Gw, err))
			continue
		}
		delete(m.installed, dst)
		if r.Node != "" {
			m.logf("route removed: %s via %s (node %s)", r.Dst, r.Gw, r.Node)
		} else {
			m.logf("route removed: %s via %s", r.Dst, r.Gw)
		}
	}
	return errors.Join(errs...)
}
