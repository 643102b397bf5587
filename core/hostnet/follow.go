package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// DefaultFollowInterval is how often a [Follower] looks at the VM's address
// and the route: one `ip addr` in the VM and one route lookup on the host.
const DefaultFollowInterval = 5 * time.Second

// Follower keeps the route to the bridge pointing at the VM's current
// address between runs of `marina up`: after sleep/wake or a network change
// the VM's lima0 address can change, or macOS can drop the route with the
// interface. It runs in the VM's host agent, where nobody can answer a
// password prompt, so it only ever runs `sudo -n` (never prompting); when
// sudo refuses, it logs once that `marina sudoers --install` allows it.
//
// It follows a route it has seen in place: until the route is correct for
// the VM's address once (`marina up` sets it), it changes nothing, so it
// never races `marina up` to create it.
type Follower struct {
	// Route returns the route to keep, or nil while there is none to keep
	// (asked before every look, so `marina up` and `marina down
	// --remove-route` can start and stop the following). Its Priv.Runner
	// runs the lookups and the changes; Priv.IsRoot means no sudo.
	Route func() *Route
	// Addr returns the VM's current address (lima0).
	Addr func(ctx context.Context) (netip.Addr, error)
	// Interval between looks; 0 means DefaultFollowInterval.
	Interval time.Duration
	// Logf receives what the follower did or could not do; nil discards.
	Logf func(format string, args ...any)

	// tick, when set, replaces the interval's ticker (tests).
	tick <-chan time.Time
	// looked, when set, is called after every look (tests).
	looked func()

	cidr       string
	armed      bool
	failedFor  string // addr|state of the last failed change, not retried
	lastLog    string
	sudoHinted bool
}

// Run looks at once, then every Interval, until ctx is done.
func (f *Follower) Run(ctx context.Context) {
	tick := f.tick
	if tick == nil {
		iv := f.Interval
		if iv <= 0 {
			iv = DefaultFollowInterval
		}
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	for {
		f.look(ctx)
		if f.looked != nil {
			f.looked()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

func (f *Follower) logf(format string, args ...any) {
	if f.Logf != nil {
		f.Logf(format, args...)
	}
}

// logChange logs msg unless it is the message logged last: a VM that is
// booting, or a lookup that keeps failing, is reported once, not every look.
func (f *Follower) logChange(msg string) {
	if msg == f.lastLog {
		return
	}
	f.lastLog = msg
	f.logf("%s", msg)
}

// look is one round: read the address, check the route, fix it when it
// was in place before and no longer points at the address.
func (f *Follower) look(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	r := f.Route()
	if r == nil {
		if f.armed {
			f.logf("route following stopped: marina no longer keeps a route to the VM")
		}
		f.armed, f.cidr, f.failedFor = false, "", ""
		return
	}
	if r.CIDR != f.cidr {
		f.armed, f.cidr, f.failedFor = false, r.CIDR, ""
	}
	addr, err := f.Addr(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.logChange(fmt.Sprintf("route %s: cannot read the VM's address (route left as it is): %v", r.CIDR, err))
		}
		return
	}
	st, cmds, err := r.Plan(ctx, addr.String())
	if err != nil {
		if ctx.Err() == nil {
			f.logChange(fmt.Sprintf("route %s: %v", r.CIDR, err))
		}
		return
	}
	if len(cmds) == 0 {
		if !f.armed {
			f.logf("route %s via %s is in place; following the VM's address", r.CIDR, addr)
		}
		f.armed, f.failedFor = true, ""
		f.lastLog = ""
		return
	}
	if !f.armed {
		return // `marina up` has not set it (for this CIDR) yet
	}
	key := addr.String() + "|" + st.Gateway + "|" + st.Detail
	if key == f.failedFor {
		return // tried and failed for exactly this; try again on a change
	}
	was := "missing"
	if st.Present {
		was = "via " + st.Gateway
	}
	f.logf("route %s is %s, the VM is at %s: running %s", r.CIDR, was, addr, renderCmds(cmds, !r.Priv.IsRoot))
	for _, c := range cmds {
		// Privileged's argv without a terminal: sudo -n, never a prompt.
		if _, err := r.Priv.Runner.Run(ctx, nonInteractive(r.Priv).argv(c.Argv), c.Stdin); err != nil {
			if ctx.Err() != nil {
				return
			}
			f.failedFor = key
			if sudoRefused(err) {
				if !f.sudoHinted {
					f.sudoHinted = true
					f.logf("route %s: sudo needs a password, so the route cannot follow the VM's address by itself: "+
						"`marina sudoers --install` allows exactly these route commands without one; until then `marina up` fixes the route (%v)", r.CIDR, err)
				}
				return
			}
			f.logf("route %s: %v", r.CIDR, err)
			return
		}
	}
	f.failedFor, f.lastLog = "", ""
	f.logf("route %s now via %s", r.CIDR, addr)
}

func renderCmds(cmds []Cmd, sudo bool) string {
	s := make([]string, len(cmds))
	for i, c := range cmds {
		s[i] = c.Render(sudo)
	}
	return strings.Join(s, "; ")
}

// sudoRefused tells sudo's own refusal (a password is required, the user
// may not run the command) from the command's failure: sudo's messages
// come before it runs anything and name sudo or the sudoers policy.
func sudoRefused(err error) bool {
	var ce *CommandError
	if !errors.As(err, &ce) || len(ce.Argv) == 0 || ce.Argv[0] != "sudo" {
		return false
	}
	s := ce.Stderr
	return strings.HasPrefix(s, "sudo:") || strings.Contains(s, "a password is required") ||
		strings.Contains(s, "is not allowed to execute") || strings.Contains(s, "not in the sudoers file") ||
		strings.Contains(s, "may not run sudo")
}
