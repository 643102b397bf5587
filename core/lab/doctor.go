package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/vm"
)

// DoctorOptions tunes Doctor.
type DoctorOptions struct {
	// StateDir is ~/.marina, whose free disk space is checked ("" skips).
	StateDir string
	// Timeout bounds each network probe (default 3s).
	Timeout time.Duration
	// Extra checks run after the built-in ones (e.g. plugin checksums).
	Extra []func(ctx context.Context) Check
}

// Doctor runs every check it can and returns them in order. It never stops
// at the first failure: later checks that depend on an earlier one are
// reported as skipped (WARN) with the reason.
func (l *Lab) Doctor(ctx context.Context, opts DoctorOptions) []Check {
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	var out []Check
	add := func(c Check) { out = append(out, c) }

	st, err := l.Status(ctx)
	if err != nil {
		add(Check{Name: "machine", Status: Fail, Detail: err.Error(), Fix: "marina up"})
		out = append(out, l.routeChecks(ctx)...)
		return append(out, runExtra(ctx, opts)...)
	}
	m := st.Machine
	if m.State != vm.Running {
		detail := string(m.State)
		if m.Detail != "" {
			detail += ": " + m.Detail
		}
		add(Check{Name: "machine", Status: Fail, Detail: detail, Fix: "marina up"})
		out = append(out, l.routeChecks(ctx)...)
		add(diskCheck(opts.StateDir))
		return append(out, runExtra(ctx, opts)...)
	}
	add(Check{Name: "machine", Status: OK, Detail: fmt.Sprintf("%s (%s), Docker at %s", m.Name, m.Driver, m.DockerHost)})
	for _, d := range m.Drift {
		fix := "marina destroy && marina up (the VM keeps the settings it was created with)"
		if strings.HasPrefix(d, "vm.cpus:") || strings.HasPrefix(d, "vm.memory:") || strings.HasPrefix(d, "vm.disk:") {
			fix = "marina up --restart (restarts the VM to apply it; a disk only grows)"
		}
		add(Check{Name: "machine config", Status: Warn, Detail: d, Fix: fix})
	}

	if st.Route != nil {
		add(*st.Route)
	}
	// The clusters' subnets too, when they can be listed.
	var clusters []ClusterInfo
	if c, err := l.ClustersOn(m); err == nil {
		if infos, err := l.ListClusters(ctx, c); err == nil {
			clusters = infos
		}
	}
	out = append(out, l.routeChecks(ctx, clusters...)...)
	if c := l.kubeconfigCheck(m); c != nil {
		add(*c)
	}
	if l.Route != nil {
		gs, err := hostnet.CheckGuestNetwork(ctx, hostnet.DriverExec(l.Driver), l.guestNetSpec())
		if err != nil {
			add(Check{Name: "guest network", Status: Fail, Detail: err.Error(), Fix: "marina up"})
		}
		for _, c := range gs.Checks {
			chk := Check{Name: "guest " + c.Name, Status: OK, Detail: c.Detail}
			if !c.OK {
				chk.Status, chk.Fix = Fail, "marina up"
			}
			add(chk)
		}
	}

	n := st.Network
	switch {
	case !n.Present:
		add(Check{Name: "network " + n.Name, Status: Fail, Detail: "missing", Fix: "marina up"})
	case n.Problem != "":
		add(Check{Name: "network " + n.Name, Status: Fail, Detail: n.Problem, Fix: "marina destroy && marina up, or set network.bridgeCIDR to match"})
	default:
		add(Check{Name: "network " + n.Name, Status: OK, Detail: n.Subnet + ", ip-range " + n.IPRange})
	}

	for _, s := range st.Services {
		c := Check{Name: "service " + s.Name, Status: OK, Detail: s.State}
		if !s.Running {
			c.Status, c.Fix = Fail, "marina up (recreates or restarts it)"
		}
		add(c)
	}

	if l.pluginEnabled("localdns") {
		// Probe only a DNS server that runs: a packet to its address with
		// nothing there would go wherever the default route leads.
		running := false
		for _, s := range st.Services {
			running = running || (s.Component == ComponentDNSServer && s.Running && s.IP == l.Config.DNS.ServerIP)
		}
		if running {
			add(dnsCheck(ctx, l.Config.DNS.ServerIP, l.Config.DNS.Zone, opts.Timeout))
		} else {
			add(Check{Name: "dns " + l.Config.DNS.ServerIP, Status: Fail, Detail: "no local DNS server container runs at " + l.Config.DNS.ServerIP, Fix: "marina up"})
		}
	}
	if l.pluginEnabled("registries") {
		for _, s := range st.Services {
			if s.Component != ComponentMirror || !s.Running || s.IP == "" {
				continue
			}
			add(mirrorCheck(ctx, s, l.mirrorPort(s.Name), opts.Timeout))
		}
	}
	if st.Resolver != nil {
		add(*st.Resolver)
	}
	if l.CADir != "" {
		add(l.caCheck(ctx, l.Trust))
	}
	out = append(out, l.proxyChecks(ctx, opts.Timeout)...)
	add(l.extraCAsCheck(time.Now()))
	add(diskCheck(opts.StateDir))
	return append(out, runExtra(ctx, opts)...)
}

// routeChecks reports the host routes over the lab: the bridge CIDR, and
// the service and pod subnets of the clusters that exist (when they can
// be listed).
func (l *Lab) routeChecks(ctx context.Context, clusters ...ClusterInfo) []Check {
	slots := map[string]int{}
	for _, c := range clusters {
		slots[c.Name] = c.Slot
	}
	rep, err := l.RouteOverlaps(ctx, slots)
	if err != nil {
		return []Check{{Name: "host routes", Status: Warn, Detail: "not checked: " + err.Error()}}
	}
	return rep.Checks(l.Config.Network.BridgeCIDR)
}

func runExtra(ctx context.Context, opts DoctorOptions) []Check {
	var out []Check
	for _, f := range opts.Extra {
		out = append(out, f(ctx))
	}
	return out
}

// pluginEnabled reports whether the config enables plugin name.
func (l *Lab) pluginEnabled(name string) bool {
	p, ok := l.Config.Plugins[name]
	return ok && p.Enabled
}

// mirrorPort returns the configured port of mirror name (0 if unknown).
func (l *Lab) mirrorPort(name string) int {
	for _, m := range l.Config.Registries.Mirrors {
		if m.Name == name {
			return m.Port
		}
	}
	return 0
}

// dnsCheck asks the local DNS server for a name in the zone: any answer,
// NXDOMAIN included, means it serves; a timeout or refusal means not.
func dnsCheck(ctx context.Context, server, zone string, timeout time.Duration) Check {
	name := "dns " + server
	_, err := LookupVia(ctx, server, "marina-doctor-probe."+zone, timeout)
	var dnsErr *net.DNSError
	if err == nil || (errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
		return Check{Name: name, Status: OK, Detail: "answers for " + zone}
	}
	return Check{Name: name, Status: Fail, Detail: "no answer for " + zone + ": " + err.Error(),
		Fix: "marina up (restarts the local DNS containers); if they run, check the route to the bridge"}
}

// LookupVia resolves name's addresses by asking server (port 53) only,
// bypassing this machine's resolver, within timeout.
func LookupVia(ctx context.Context, server, name string, timeout time.Duration) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		return d.DialContext(ctx, network, net.JoinHostPort(server, "53"))
	}}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.LookupHost(qctx, name)
}

// mirrorCheck asks a registry mirror for its API root.
func mirrorCheck(ctx context.Context, s ServiceStatus, port int, timeout time.Duration) Check {
	name := "mirror " + s.Name
	if port == 0 {
		return Check{Name: name, Status: Warn, Detail: "not in the config's registries.mirrors", Fix: "marina up (removes mirrors that are no longer configured)"}
	}
	u := "http://" + net.JoinHostPort(s.IP, strconv.Itoa(port)) + "/v2/"
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err == nil {
		var resp *http.Response
		resp, err = http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return Check{Name: name, Status: OK, Detail: u}
			}
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
		}
	}
	return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: "marina up (recreates a broken mirror); docker logs " + s.Name}
}

// diskCheck warns when the disk holding dir has less than 5 GiB free.
func diskCheck(dir string) Check {
	if dir == "" {
		return Check{Name: "disk space", Status: OK, Detail: "not checked"}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return Check{Name: "disk space", Status: Warn, Detail: err.Error()}
	}
	free := uint64(fs.Bavail) * uint64(fs.Bsize)
	const min = 5 << 30
	detail := fmt.Sprintf("%.1f GiB free on the disk of %s", float64(free)/(1<<30), dir)
	if free < min {
		return Check{Name: "disk space", Status: Warn, Detail: detail, Fix: "free disk space, or marina registry clean-cache"}
	}
	return Check{Name: "disk space", Status: OK, Detail: detail}
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}
