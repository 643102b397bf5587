package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/core/lifecycle"
)

// CAScope is what the lab's CA may sign for: the config's zone and bridge.
func CAScope(l *Lab) (labca.Scope, error) {
	bridge, err := netip.ParsePrefix(l.Config.Network.BridgeCIDR)
	if err != nil {
		return labca.Scope{}, fmt.Errorf("network.bridgeCIDR %q: %w", l.Config.Network.BridgeCIDR, err)
	}
	return labca.Scope{Lab: l.Config.VM.Name, Zone: l.Config.DNS.Zone, Bridge: bridge}, nil
}

// stepLabCA makes the lab's CA once (CADir; "" skips the step). A CA whose
// name constraints no longer cover the lab (network.bridgeCIDR or dns.zone
// changed) is left as it is, with a warning: rotating it changes what this
// machine trusts, so it is the user's command.
func (l *Lab) stepLabCA() lifecycle.Step {
	return lifecycle.NewStep("Lab CA",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			s, err := CAScope(l)
			if err != nil {
				return nil, err
			}
			ca, err := labca.Load(l.CADir)
			switch {
			case errors.Is(err, labca.ErrNoCA):
				return []lifecycle.Change{{Action: "create", Target: "lab CA " + l.CADir, Detail: fmt.Sprintf("ECDSA P-256, valid only for %s and %s", s.Zone, s.Bridge)}}, nil
			case err != nil:
				return nil, err
			}
			if m := ca.Mismatch(s); m != "" {
				l.addWarning(m + ": certificates for the lab's names will not verify; marina trust rotate makes a new CA")
			}
			return nil, nil
		},
		func(ctx context.Context, _ lifecycle.Reporter, _ []lifecycle.Change) error {
			s, err := CAScope(l)
			if err != nil {
				return err
			}
			_, _, err = labca.Ensure(l.CADir, s, time.Now())
			return err
		})
}

// caCheck is doctor's check of the lab CA: present, covering the lab,
// and trusted by this machine (trust may be nil: not checked).
func (l *Lab) caCheck(ctx context.Context, trust *hostnet.HostTrust) Check {
	c := Check{Name: "lab CA"}
	ca, err := labca.Load(l.CADir)
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, err.Error(), "marina up"
		if !errors.Is(err, labca.ErrNoCA) {
			c.Fix = "marina trust rotate"
		}
		return c
	}
	s, err := CAScope(l)
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		return c
	}
	if m := ca.Mismatch(s); m != "" {
		c.Status, c.Detail, c.Fix = Warn, m, "marina trust rotate"
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("%s, valid only for %s and %s until %s", ca.CertPath(), s.Zone, s.Bridge, ca.Cert.NotAfter.Format("2006-01-02"))
	if trust == nil {
		return c
	}
	st, err := trust.Check(ctx, ca.CertPath(), ca.CertPEM, ca.SHA1())
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, c.Detail+"; whether this machine trusts it is unknown: "+err.Error()
	case !st.Trusted:
		c.Status, c.Detail, c.Fix = Warn, c.Detail+"; this machine does not trust it ("+st.Detail+"): HTTPS by name warns in browsers and curl", "marina trust install"
	default:
		c.Detail += "; trusted by this machine (" + st.Detail + ")"
	}
	return c
}
