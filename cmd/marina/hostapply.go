package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/sdk"
)

// hostApplier makes the host changes plugins request (today: the resolver
// for the local zone) through core/hostnet, which shows every privileged
// command before it runs and never prompts without a terminal.
type hostApplier struct {
	os   string
	priv *hostnet.Privileged

	mu     sync.Mutex
	manual []string // instructions for changes marina did not make
}

// newHostApplier returns the applier for this machine, or nil on an OS
// where marina makes no host changes.
func newHostApplier(a *app, driver vm.Driver) lab.HostApplier {
	goos := hostOS()
	if goos == "" {
		return nil
	}
	return &hostApplier{os: goos, priv: hostnet.NewPrivileged(a.err)}
}

// hostOS is this machine's OS as core/hostnet names it, or "" for an OS
// where marina makes no host changes.
func hostOS() string {
	switch runtime.GOOS {
	case "darwin":
		return hostnet.Darwin
	case "linux":
		return hostnet.Linux
	}
	return ""
}

func (h *hostApplier) resolver(facts lab.NetworkFacts) *hostnet.Resolver {
	return &hostnet.Resolver{OS: h.os, Priv: h.priv, Link: facts.Bridge}
}

// Plan lists the privileged commands each change needs (none when in place).
func (h *hostApplier) Plan(ctx context.Context, changes []sdk.HostChange, facts lab.NetworkFacts) ([]lifecycle.Change, error) {
	var out []lifecycle.Change
	for _, c := range changes {
		if c.Resolver == nil {
			continue
		}
		p, err := h.resolver(facts).Plan(ctx, *c.Resolver)
		if err != nil {
			return nil, err
		}
		if p.Manual != nil {
			// Repeat the instructions only while they are not followed.
			if st, err := h.resolver(facts).Check(ctx, *c.Resolver); err != nil || !st.InPlace || c.Resolver.Remove {
				h.addManual(p.Manual.String())
			}
			continue
		}
		for _, cmd := range p.Commands {
			out = append(out, lifecycle.Change{Action: "run", Target: cmd.Render(true), Detail: c.Reason})
		}
	}
	return out, nil
}

// Apply makes the changes.
func (h *hostApplier) Apply(ctx context.Context, changes []sdk.HostChange, facts lab.NetworkFacts) error {
	for _, c := range changes {
		if c.Resolver == nil {
			continue
		}
		res, err := h.resolver(facts).Apply(ctx, *c.Resolver)
		if err != nil {
			return fmt.Errorf("resolver for %s: %w", c.Resolver.Domain, err)
		}
		if res.Manual != nil {
			h.addManual(res.Manual.String())
		}
	}
	return nil
}

func (h *hostApplier) addManual(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.manual {
		if m == s {
			return
		}
	}
	h.manual = append(h.manual, s)
}

// Manual returns the instructions for changes marina left to the user.
func (h *hostApplier) Manual() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.manual...)
}

// newRoute returns the host route to the bridge for drivers that need one
// (lima: the bridge lives in the VM), nil otherwise.
func newRoute(a *app, cfg *config.Config, driver vm.Driver) *hostnet.Route {
	if driver.Name() != "lima" {
		return nil
	}
	goos := hostOS()
	if goos == "" {
		goos = hostnet.Linux
	}
	return &hostnet.Route{OS: goos, CIDR: cfg.Network.BridgeCIDR, Priv: hostnet.NewPrivileged(a.err)}
}
