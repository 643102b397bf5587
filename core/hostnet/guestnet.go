package hostnet

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"strings"
	"sync"
)

// ExecFunc runs argv (never a shell string) as root on the Docker host (the
// VM guest), with stdin (may be nil), and returns its stdout; a non-zero
// exit is an error.
type ExecFunc func(ctx context.Context, argv []string, stdin []byte) ([]byte, error)

// Execer is the part of vm.Driver that EnsureGuestNetwork needs.
type Execer interface {
	Exec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error)
}

// DriverExec adapts a vm.Driver (anything with its Exec method) to ExecFunc.
func DriverExec(d Execer) ExecFunc {
	return func(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
		var in io.Reader
		if stdin != nil {
			in = bytes.NewReader(stdin)
		}
		return d.Exec(ctx, argv, in)
	}
}

// Paths and names of what EnsureGuestNetwork installs in the guest.
const (
	GuestScriptPath  = "/usr/local/sbin/marina-guest-net.sh"
	GuestServiceName = "marina-guest-net.service"
	GuestServicePath = "/etc/systemd/system/" + GuestServiceName
	GuestDropInPath  = "/etc/systemd/system/docker.service.d/50-marina-guest-net.conf"
	// DefaultGuestIface is Lima's vzNAT interface.
	DefaultGuestIface = "lima0"
)

// The comments that mark marina's iptables rules (also in the script).
const (
	tagNoSNAT       = "marina-no-snat"
	tagHostToBridge = "marina-host-to-bridge"
)

//go:embed marina-guest-net.sh
var guestScript []byte

// GuestNetSpec says which traffic EnsureGuestNetwork keeps un-NATed.
type GuestNetSpec struct {
	// BridgeCIDR is the docker bridge network (network.bridgeCIDR).
	BridgeCIDR string
	// GuestIface is the guest's interface on the host-reachable network;
	// empty means lima0. Its own address and prefix give the guest network
	// (never assumed to be a /24).
	GuestIface string
}

// GuestFile is one file EnsureGuestNetwork keeps in the guest.
type GuestFile struct {
	Path    string
	Mode    string // octal, for install -m
	Content []byte
}

// GuestNetResult says what EnsureGuestNetwork found and changed.
type GuestNetResult struct {
	// GuestNet is the guest interface's network, e.g. 192.168.64.0/24.
	GuestNet string `json:"guestNet"`
	// Changes lists what was changed, in order; empty when everything was
	// already in place.
	Changes []string `json:"changes,omitempty"`
}

// GuestCheck is one item of CheckGuestNetwork.
type GuestCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	// Fix is the command that repairs it (when not OK).
	Fix string `json:"fix,omitempty"`
}

// GuestNetStatus is CheckGuestNetwork's report.
type GuestNetStatus struct {
	GuestNet string       `json:"guestNet,omitempty"`
	Checks   []GuestCheck `json:"checks"`
}

// OK is true when every check passed.
func (s GuestNetStatus) OK() bool {
	for _, c := range s.Checks {
		if !c.OK {
			return false
		}
	}
	return len(s.Checks) > 0
}

var ifaceRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`) })

// validate returns the bridge prefix and the interface name.
func (s GuestNetSpec) validate() (netip.Prefix, string, error) {
	pfx, err := parseBridgeCIDR(s.BridgeCIDR)
	if err != nil {
		return netip.Prefix{}, "", err
	}
	iface := s.GuestIface
	if iface == "" {
		iface = DefaultGuestIface
	}
	if !ifaceRE().MatchString(iface) {
		return netip.Prefix{}, "", fmt.Errorf("guest interface %q is not a network interface name (letters, digits, '_', '.', '-'; at most 15)", iface)
	}
	return pfx, iface, nil
}

// GuestFiles renders the files that persist the guest network: the script,
// the systemd oneshot and the docker.service drop-in. No sysctl file: the
// VM's provisioning (core/vm/lima) is the one owner of
// /etc/sysctl.d/99-marina.conf, ip_forward included, and the script sets
// ip_forward again at boot and after every Docker start.
func GuestFiles(spec GuestNetSpec) ([]GuestFile, error) {
	pfx, iface, err := spec.validate()
	if err != nil {
		return nil, err
	}
	execLine := GuestScriptPath + " " + pfx.String() + " " + iface
	service := unitFile{
		Header: []string{"managed by marina: `marina up` rewrites this file."},
		Sections: []unitSection{
			{"Unit", []unitKey{
				{"Description", "marina: keep traffic between the docker bridge and the host un-NATed"},
				{"Wants", "network-online.target"},
				{"After", "docker.service network-online.target"},
				{"Requires", "docker.service"},
			}},
			{"Service", []unitKey{
				{"Type", "oneshot"},
				{"RemainAfterExit", "yes"},
				{"ExecStart", execLine},
			}},
			{"Install", []unitKey{
				{"WantedBy", "multi-user.target"},
			}},
		},
	}
	dropIn := unitFile{
		Header: []string{
			"managed by marina: `marina up` rewrites this file.",
			"Docker re-inserts its MASQUERADE rule first whenever it starts; put marina's",
			"no-SNAT rule back in front. '-': a failure here never fails docker.service.",
		},
		Sections: []unitSection{{"Service", []unitKey{{"ExecStartPost", "-" + execLine}}}},
	}
	svc, err := service.render()
	if err != nil {
		return nil, err
	}
	drop, err := dropIn.render()
	if err != nil {
		return nil, err
	}
	return []GuestFile{
		{Path: GuestScriptPath, Mode: "0755", Content: guestScript},
		{Path: GuestServicePath, Mode: "0644", Content: svc},
		{Path: GuestDropInPath, Mode: "0644", Content: drop},
	}, nil
}

// unitFile is a systemd unit or drop-in, rendered from typed sections.
type unitFile struct {
	Header   []string
	Sections []unitSection
}

type unitSection struct {
	Name string
	Keys []unitKey
}

type unitKey struct{ Key, Value string }

func (u unitFile) render() ([]byte, error) {
	var b bytes.Buffer
	for _, h := range u.Header {
		b.WriteString("# " + h + "\n")
	}
	for i, s := range u.Sections {
		if i > 0 || len(u.Header) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("[" + s.Name + "]\n")
		for _, k := range s.Keys {
			if strings.ContainsAny(k.Value, "\n\r\\%") || strings.ContainsAny(k.Key, "\n\r=[]") {
				return nil, fmt.Errorf("hostnet: unit value %s=%q cannot be written verbatim", k.Key, k.Value)
			}
			b.WriteString(k.Key + "=" + k.Value + "\n")
		}
	}
	return b.Bytes(), nil
}

// rules returns marina's two iptables rules (table, chain, tag, spec,
// must-be-first) for the bridge and guest network.
func rules(bridge, guestNet netip.Prefix, iface string) []guestRule {
	return []guestRule{
		{
			table: "nat", chain: "POSTROUTING", tag: tagNoSNAT, first: true,
			spec: []string{"-s", bridge.String(), "-d", guestNet.String(), "-o", iface, "-m", "comment", "--comment", tagNoSNAT, "-j", "ACCEPT"},
			what: "nat POSTROUTING: no SNAT for " + bridge.String() + " -> " + guestNet.String(),
		},
		{
			table: "filter", chain: "DOCKER-USER", tag: tagHostToBridge,
			spec: []string{"-s", guestNet.String(), "-d", bridge.String(), "-i", iface, "-m", "comment", "--comment", tagHostToBridge, "-j", "ACCEPT"},
			what: "DOCKER-USER: accept " + guestNet.String() + " -> " + bridge.String(),
		},
	}
}

type guestRule struct {
	table, chain, tag string
	spec              []string
	first             bool
	what              string
}

func ipt(args ...string) []string { return append([]string{"iptables", "-w", "5"}, args...) }

// guestNetOf asks the guest for iface's address and returns its network.
func guestNetOf(ctx context.Context, exec ExecFunc, iface string) (netip.Prefix, error) {
	out, err := exec(ctx, []string{"ip", "-o", "-4", "addr", "show", "dev", iface}, nil)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("reading the address of guest interface %s: %w (is the VM's vzNAT network up?)", iface, err)
	}
	p, err := parseIPAddrShow(string(out))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("guest interface %s: %w (is the VM's vzNAT network up?)", iface, err)
	}
	return p.Masked(), nil
}

// parseIPAddrShow reads the first address of `ip -o -4 addr show dev X`:
//
//	3: lima0    inet 192.168.64.3/24 brd 192.168.64.255 scope global dynamic lima0\ ...
func parseIPAddrShow(out string) (netip.Prefix, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				p, err := netip.ParsePrefix(f[i+1])
				if err != nil || !p.Addr().Is4() {
					return netip.Prefix{}, fmt.Errorf("unexpected address %q", f[i+1])
				}
				return p, nil
			}
		}
	}
	return netip.Prefix{}, errors.New("no IPv4 address")
}

// EnsureGuestNetwork makes bridge <-> host traffic un-NATed in the guest and
// keeps it so across Docker restarts and reboots. Every step checks first
// and changes only what differs, so a second run changes nothing. All
// commands are argv run as root through exec.
func EnsureGuestNetwork(ctx context.Context, exec ExecFunc, spec GuestNetSpec) (GuestNetResult, error) {
	bridge, iface, err := spec.validate()
	if err != nil {
		return GuestNetResult{}, err
	}
	files, err := GuestFiles(spec)
	if err != nil {
		return GuestNetResult{}, err
	}
	gnet, err := guestNetOf(ctx, exec, iface)
	if err != nil {
		return GuestNetResult{}, err
	}
	if gnet.Overlaps(bridge) {
		return GuestNetResult{}, fmt.Errorf("the guest network %s (%s) overlaps the bridge CIDR %s: choose a network.bridgeCIDR outside it", gnet, iface, bridge)
	}
	res := GuestNetResult{GuestNet: gnet.String()}
	changed := func(s string) { res.Changes = append(res.Changes, s) }

	// ip_forward now (the provisioning's sysctl file and the script keep it
	// at boot).
	if out, err := exec(ctx, []string{"sysctl", "-n", "net.ipv4.ip_forward"}, nil); err != nil || strings.TrimSpace(string(out)) != "1" {
		if _, err := exec(ctx, []string{"sysctl", "-w", "net.ipv4.ip_forward=1"}, nil); err != nil {
			return res, fmt.Errorf("enabling IP forwarding in the guest: %w", err)
		}
		changed("set net.ipv4.ip_forward=1")
	}

	for _, r := range rules(bridge, gnet, iface) {
		done, err := ensureRule(ctx, exec, r)
		res.Changes = append(res.Changes, done...)
		if err != nil {
			return res, err
		}
	}

	unitsChanged := false
	for _, f := range files {
		cur, err := exec(ctx, []string{"cat", "--", f.Path}, nil)
		if err == nil && bytes.Equal(cur, f.Content) {
			continue
		}
		tmp := f.Path + ".marina-new"
		if _, err := exec(ctx, []string{"install", "-D", "-m", f.Mode, "/dev/stdin", tmp}, f.Content); err != nil {
			return res, fmt.Errorf("writing %s in the guest: %w", f.Path, err)
		}
		if _, err := exec(ctx, []string{"mv", "-f", "--", tmp, f.Path}, nil); err != nil {
			return res, fmt.Errorf("writing %s in the guest: %w", f.Path, err)
		}
		changed("wrote " + f.Path)
		if strings.HasPrefix(f.Path, "/etc/systemd/") {
			unitsChanged = true
		}
	}
	if unitsChanged {
		if _, err := exec(ctx, []string{"systemctl", "daemon-reload"}, nil); err != nil {
			return res, fmt.Errorf("reloading systemd in the guest: %w", err)
		}
		changed("reloaded systemd")
	}
	if out, err := exec(ctx, []string{"systemctl", "is-enabled", GuestServiceName}, nil); err != nil || strings.TrimSpace(string(out)) != "enabled" {
		if _, err := exec(ctx, []string{"systemctl", "enable", GuestServiceName}, nil); err != nil {
			return res, fmt.Errorf("enabling %s in the guest: %w", GuestServiceName, err)
		}
		changed("enabled " + GuestServiceName)
	}
	return res, nil
}

// ensureRule removes marina's stale copies of r (another bridge or guest
// network), then checks r with -C and inserts it only when missing; a rule
// that must be first and is not is moved back to the top.
func ensureRule(ctx context.Context, exec ExecFunc, r guestRule) ([]string, error) {
	var changes []string
	lines, err := listRules(ctx, exec, r.table, r.chain)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if l.tag == r.tag && !sameRule(l.spec, r.spec) {
			if _, err := exec(ctx, ipt(append([]string{"-t", r.table, "-D", r.chain}, l.spec...)...), nil); err != nil {
				return changes, fmt.Errorf("deleting marina's stale rule %q from %s %s: %w", strings.Join(l.spec, " "), r.table, r.chain, err)
			}
			changes = append(changes, fmt.Sprintf("deleted stale rule from %s %s: %s", r.table, r.chain, strings.Join(l.spec, " ")))
		}
	}
	check := ipt(append([]string{"-t", r.table, "-C", r.chain}, r.spec...)...)
	if _, err := exec(ctx, check, nil); err == nil {
		if !r.first {
			return changes, nil
		}
		lines, err := listRules(ctx, exec, r.table, r.chain)
		if err != nil {
			return changes, err
		}
		if len(lines) > 0 && lines[0].tag == r.tag {
			return changes, nil
		}
		if _, err := exec(ctx, ipt(append([]string{"-t", r.table, "-D", r.chain}, r.spec...)...), nil); err != nil {
			return changes, fmt.Errorf("moving the rule %s: %w", r.what, err)
		}
		if _, err := exec(ctx, ipt(append([]string{"-t", r.table, "-I", r.chain, "1"}, r.spec...)...), nil); err != nil {
			return changes, fmt.Errorf("moving the rule %s: %w", r.what, err)
		}
		return append(changes, "moved to the top: "+r.what), nil
	}
	if _, err := exec(ctx, ipt(append([]string{"-t", r.table, "-I", r.chain, "1"}, r.spec...)...), nil); err != nil {
		return changes, fmt.Errorf("inserting the rule %s: %w", r.what, err)
	}
	return append(changes, "inserted "+r.what), nil
}

// ruleLine is one rule from `iptables -S`.
type ruleLine struct {
	spec []string // after "-A CHAIN"
	tag  string   // its --comment value, if any
}

// listRules reads `iptables -t T -S CHAIN`.
func listRules(ctx context.Context, exec ExecFunc, table, chain string) ([]ruleLine, error) {
	out, err := exec(ctx, ipt("-t", table, "-S", chain), nil)
	if err != nil {
		hint := ""
		if chain == "DOCKER-USER" {
			hint = " (is Docker running with iptables enabled?)"
		}
		return nil, fmt.Errorf("listing iptables %s %s in the guest%s: %w", table, chain, hint, err)
	}
	var rl []ruleLine
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || f[1] != chain {
			continue
		}
		l := ruleLine{spec: f[2:]}
		for i := 0; i+1 < len(l.spec); i++ {
			if l.spec[i] == "--comment" {
				l.tag = strings.Trim(l.spec[i+1], `"`)
			}
		}
		rl = append(rl, l)
	}
	return rl, nil
}

// sameRule compares the addresses and interfaces of two rule specs, the
// parts marina's rules vary in.
func sameRule(a, b []string) bool {
	pick := func(s []string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(s); i++ {
			switch s[i] {
			case "-s", "-d", "-i", "-o":
				m[s[i]] = s[i+1]
			}
		}
		return m
	}
	pa, pb := pick(a), pick(b)
	if len(pa) != len(pb) {
		return false
	}
	for k, v := range pa {
		if pb[k] != v {
			return false
		}
	}
	return true
}

// CheckGuestNetwork reports, without changing anything, whether everything
// EnsureGuestNetwork maintains is in place (for status and doctor).
func CheckGuestNetwork(ctx context.Context, exec ExecFunc, spec GuestNetSpec) (GuestNetStatus, error) {
	bridge, iface, err := spec.validate()
	if err != nil {
		return GuestNetStatus{}, err
	}
	files, err := GuestFiles(spec)
	if err != nil {
		return GuestNetStatus{}, err
	}
	const fix = "marina up"
	var st GuestNetStatus
	add := func(c GuestCheck) {
		if c.OK {
			c.Fix = ""
		} else if c.Fix == "" {
			c.Fix = fix
		}
		st.Checks = append(st.Checks, c)
	}
	gnet, err := guestNetOf(ctx, exec, iface)
	if err != nil {
		add(GuestCheck{Name: "guest network (" + iface + ")", Detail: err.Error(), Fix: "marina up (or restart the VM: marina down && marina up)"})
		return st, nil
	}
	st.GuestNet = gnet.String()
	add(GuestCheck{Name: "guest network (" + iface + ")", OK: true, Detail: gnet.String()})

	out, err := exec(ctx, []string{"sysctl", "-n", "net.ipv4.ip_forward"}, nil)
	v := strings.TrimSpace(string(out))
	add(GuestCheck{Name: "ip_forward", OK: err == nil && v == "1", Detail: "net.ipv4.ip_forward=" + v})

	for _, r := range rules(bridge, gnet, iface) {
		c := GuestCheck{Name: r.what, Fix: fix + " (or, in the VM: sudo systemctl restart " + GuestServiceName + ")"}
		_, cerr := exec(ctx, ipt(append([]string{"-t", r.table, "-C", r.chain}, r.spec...)...), nil)
		switch {
		case cerr != nil:
			c.Detail = "missing"
		case r.first:
			lines, err := listRules(ctx, exec, r.table, r.chain)
			if err != nil {
				c.Detail = err.Error()
				break
			}
			if len(lines) > 0 && lines[0].tag == r.tag {
				c.OK, c.Detail = true, "present, first in "+r.chain
			} else {
				c.Detail = "present but not first in " + r.chain + ": a rule before it (Docker's MASQUERADE) takes precedence"
			}
		default:
			c.OK, c.Detail = true, "present"
		}
		add(c)
	}
	for _, f := range files {
		cur, err := exec(ctx, []string{"cat", "--", f.Path}, nil)
		c := GuestCheck{Name: f.Path}
		switch {
		case err != nil:
			c.Detail = "missing"
		case !bytes.Equal(cur, f.Content):
			c.Detail = "differs from what marina installs"
		default:
			c.OK, c.Detail = true, "up to date"
		}
		add(c)
	}
	out, err = exec(ctx, []string{"systemctl", "is-enabled", GuestServiceName}, nil)
	v = strings.TrimSpace(string(out))
	add(GuestCheck{Name: GuestServiceName + " enabled", OK: err == nil && v == "enabled", Detail: v})
	return st, nil
}
