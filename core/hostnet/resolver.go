package hostnet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bcollard/marina/sdk"
)

// ResolverHeader is the first line of every resolver file marina writes;
// marina removes or rewrites only files that start with it.
const ResolverHeader = "# managed by marina"

// DefaultResolverDir is where macOS reads per-domain resolver files.
const DefaultResolverDir = "/etc/resolver"

// The ways a resolver change is (or would be) put in place.
const (
	// MethodResolverFile: a macOS /etc/resolver/<zone> file.
	MethodResolverFile = "resolver-file"
	// MethodResolved: per-link DNS routing in systemd-resolved.
	MethodResolved = "systemd-resolved"
	// MethodManual: marina changed nothing; the user adds the lines shown.
	MethodManual = "manual"
)

// Resolver sends the local DNS zone to marina's DNS server on the user's
// machine.
type Resolver struct {
	// OS is Darwin (resolver file) or Linux (systemd-resolved, or manual
	// instructions).
	OS string
	// Priv runs the changes; its Runner also runs read-only probes
	// (resolvectl queries) without sudo.
	Priv *Privileged
	// Dir is the macOS resolver directory; empty means /etc/resolver.
	Dir string
	// Link is the Linux network interface whose DNS settings route the zone
	// (the docker bridge, br-<id>, for the host driver). Required on Linux
	// when systemd-resolved runs.
	Link string

	// root prefixes the Linux paths probed (/run/systemd/resolve, the
	// snippet files) and lookPath finds resolvectl; tests replace them.
	root     string
	lookPath func(string) (string, error)
}

// ResolverPlan is what Apply would do.
type ResolverPlan struct {
	// Method is MethodResolverFile, MethodResolved or MethodManual.
	Method string `json:"method"`
	// Commands are the privileged commands Apply runs; none when the change
	// is already in place (or Method is manual).
	Commands []Cmd `json:"-"`
	// Manual, set with MethodManual, holds what the user must add (or
	// remove) because marina will not edit that resolver setup itself.
	Manual *ManualDNS `json:"manual,omitempty"`
	// Notes explain a decision, e.g. a file left alone because marina does
	// not own it.
	Notes []string `json:"notes,omitempty"`
}

// ResolverResult is what Apply did.
type ResolverResult struct {
	ResolverPlan
	// Changed: privileged commands ran.
	Changed bool `json:"changed"`
}

// ResolverStatus says whether the zone resolves through marina's server.
type ResolverStatus struct {
	// InPlace: the change is in effect (or, for a manual setup, one of the
	// snippet files marina suggested carries the lines).
	InPlace bool   `json:"inPlace"`
	Method  string `json:"method"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix is what to run when not in place.
	Fix string `json:"fix,omitempty"`
	// Manual holds the instructions for a setup marina does not change
	// itself (Linux without systemd-resolved) while they are not followed.
	Manual *ManualDNS `json:"manual,omitempty"`
}

// ManualDNS is the set of alternatives offered when marina will not change
// the Linux host's resolver itself.
type ManualDNS struct {
	Zone        string       `json:"zone"`
	Nameservers []string     `json:"nameservers"`
	Remove      bool         `json:"remove,omitempty"`
	Snippets    []DNSSnippet `json:"snippets"`
}

// DNSSnippet is one file to create (or delete) for one common resolver setup.
type DNSSnippet struct {
	// Setup names the resolver setup it applies to.
	Setup string `json:"setup"`
	// Path is the file to create.
	Path string `json:"path"`
	// Content is the file's content.
	Content string `json:"content"`
	// Then is the command that makes the setup read the file.
	Then string `json:"then"`
}

// String renders the instructions for a terminal, as commands ready to
// paste.
func (m *ManualDNS) String() string {
	var b strings.Builder
	if m.Remove {
		to := "marina's DNS server"
		if len(m.Nameservers) > 0 {
			to = strings.Join(m.Nameservers, ", ")
		}
		fmt.Fprintf(&b, "marina did not change this machine's DNS setup. If you routed %s to %s yourself, undo it for your setup:\n", m.Zone, to)
		for _, s := range m.Snippets {
			fmt.Fprintf(&b, "\n# %s\n%s\n%s\n", s.Setup, Cmd{Argv: []string{"rm", "-f", s.Path}}.Render(true), s.Then)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "marina did not change this machine's DNS setup (no systemd-resolved found) and never edits /etc/resolv.conf.\n"+
		"To resolve %s through %s, add the file for your setup:\n", m.Zone, strings.Join(m.Nameservers, ", "))
	for _, s := range m.Snippets {
		fmt.Fprintf(&b, "\n# %s: %s\n%s\n%s\n%s\n", s.Setup, s.Path,
			Cmd{Argv: []string{"mkdir", "-p", filepath.Dir(s.Path)}}.Render(true),
			Cmd{Argv: []string{"tee", s.Path}, Stdin: []byte(s.Content)}.Render(true),
			s.Then)
	}
	return b.String()
}

// Plan validates change and returns what Apply would do, without changing
// anything.
func (r *Resolver) Plan(ctx context.Context, change sdk.ResolverChange) (ResolverPlan, error) {
	zone, servers, err := validateResolverChange(change)
	if err != nil {
		return ResolverPlan{}, err
	}
	if r.Priv == nil || r.Priv.Runner == nil {
		return ResolverPlan{}, errors.New("hostnet: Resolver.Priv (with a Runner) is required")
	}
	switch r.OS {
	case Darwin:
		return r.planDarwin(zone, servers, change.Remove)
	case Linux:
		return r.planLinux(ctx, zone, servers, change.Remove)
	}
	return ResolverPlan{}, fmt.Errorf("hostnet: resolver OS %q is not %q or %q", r.OS, Darwin, Linux)
}

// Apply puts change in place (or undoes it when change.Remove), running
// privileged commands only when something differs. On Linux without
// systemd-resolved it changes nothing and returns the lines to add in
// Manual.
func (r *Resolver) Apply(ctx context.Context, change sdk.ResolverChange) (ResolverResult, error) {
	p, err := r.Plan(ctx, change)
	if err != nil || len(p.Commands) == 0 {
		return ResolverResult{ResolverPlan: p}, err
	}
	reason := fmt.Sprintf("resolve %s through %s", change.Domain, strings.Join(change.Nameservers, ", "))
	if change.Remove {
		reason = fmt.Sprintf("stop resolving %s through marina's DNS server", change.Domain)
	}
	if err := r.Priv.Do(ctx, reason, p.Commands...); err != nil {
		return ResolverResult{ResolverPlan: p}, err
	}
	return ResolverResult{ResolverPlan: p, Changed: true}, nil
}

// Check reports whether change is in effect, for status and doctor. With
// change.Remove it still checks the forward change (Remove is ignored).
func (r *Resolver) Check(ctx context.Context, change sdk.ResolverChange) (ResolverStatus, error) {
	change.Remove = false
	zone, servers, err := validateResolverChange(change)
	if err != nil {
		return ResolverStatus{}, err
	}
	switch r.OS {
	case Darwin:
		path := r.darwinPath(zone)
		want := ResolverFileContent(zone, servers)
		got, err := os.ReadFile(path)
		st := ResolverStatus{Method: MethodResolverFile, Fix: "run `marina up`"}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			st.Detail = path + " does not exist"
		case err != nil:
			return ResolverStatus{}, fmt.Errorf("reading %s: %w", path, err)
		case bytes.Equal(got, want):
			st.InPlace, st.Detail, st.Fix = true, path+" sends "+zone+" to "+strings.Join(servers, ", "), ""
		case !hasResolverHeader(got):
			st.Detail = path + " exists but was not written by marina"
			st.Fix = "move " + path + " away, then run `marina up`"
		default:
			st.Detail = path + " is marina's but differs from the expected content"
		}
		return st, nil
	case Linux:
		if r.Priv == nil || r.Priv.Runner == nil {
			return ResolverStatus{}, errors.New("hostnet: Resolver.Priv (with a Runner) is required")
		}
		if r.resolvedRunning(ctx) {
			if err := validateLink(r.Link); err != nil {
				return ResolverStatus{}, err
			}
			st := ResolverStatus{Method: MethodResolved, Fix: "run `marina up`"}
			cur, err := r.linkDNS(ctx)
			if err != nil {
				st.Detail = err.Error()
				return st, nil
			}
			if cur.matches(zone, servers) {
				st.InPlace, st.Fix = true, ""
			}
			st.Detail = cur.String()
			return st, nil
		}
		m := manualDNS(zone, servers, false)
		for _, s := range m.Snippets {
			got, err := os.ReadFile(filepath.Join(r.root, s.Path))
			if err == nil && bytes.Contains(got, []byte(strings.TrimSpace(lastLine(s.Content)))) {
				return ResolverStatus{InPlace: true, Method: MethodManual, Detail: s.Path + " routes " + zone}, nil
			}
		}
		return ResolverStatus{Method: MethodManual, Detail: "no systemd-resolved and none of marina's suggested snippet files routes " + zone,
			Fix: "add the file for your resolver setup (instructions below)", Manual: m}, nil
	}
	return ResolverStatus{}, fmt.Errorf("hostnet: resolver OS %q is not %q or %q", r.OS, Darwin, Linux)
}

// ResolverFileContent is the exact macOS resolver file marina writes for
// zone: its header, then one `nameserver` line per server.
func ResolverFileContent(zone string, servers []string) []byte {
	var b bytes.Buffer
	b.WriteString(ResolverHeader + "\n")
	fmt.Fprintf(&b, "# %s: marina up writes this file, marina destroy removes it.\n", zone)
	for _, s := range servers {
		b.WriteString("nameserver " + s + "\n")
	}
	return b.Bytes()
}

func (r *Resolver) darwinPath(zone string) string {
	dir := r.Dir
	if dir == "" {
		dir = DefaultResolverDir
	}
	return filepath.Join(dir, zone)
}

func (r *Resolver) planDarwin(zone string, servers []string, remove bool) (ResolverPlan, error) {
	p := ResolverPlan{Method: MethodResolverFile}
	path := r.darwinPath(zone)
	got, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return p, fmt.Errorf("reading %s: %w", path, err)
	}
	if remove {
		switch {
		case !exists:
		case !hasResolverHeader(got):
			p.Notes = append(p.Notes, path+" was left in place: it does not start with "+Quote(ResolverHeader)+", so marina did not write it")
		default:
			p.Commands = []Cmd{{Argv: []string{"rm", "-f", "--", path}}}
		}
		return p, nil
	}
	want := ResolverFileContent(zone, servers)
	if exists && bytes.Equal(got, want) {
		return p, nil
	}
	if exists && !hasResolverHeader(got) {
		return p, fmt.Errorf("%s exists and was not written by marina (it does not start with %q); "+
			"marina will not overwrite it: move it away, or set dns.zone to another zone", path, ResolverHeader)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		p.Commands = append(p.Commands, Cmd{Argv: []string{"mkdir", "-p", "-m", "0755", dir}})
	}
	p.Commands = append(p.Commands,
		Cmd{Argv: []string{"tee", path}, Stdin: want},
		Cmd{Argv: []string{"chmod", "0644", path}},
	)
	return p, nil
}

func (r *Resolver) planLinux(ctx context.Context, zone string, servers []string, remove bool) (ResolverPlan, error) {
	if !r.resolvedRunning(ctx) {
		return ResolverPlan{Method: MethodManual, Manual: manualDNS(zone, servers, remove)}, nil
	}
	p := ResolverPlan{Method: MethodResolved}
	if err := validateLink(r.Link); err != nil {
		return p, err
	}
	cur, err := r.linkDNS(ctx)
	if remove {
		if err != nil {
			// The link is gone (e.g. the docker network was removed), and
			// its DNS settings with it.
			p.Notes = append(p.Notes, err.Error())
			return p, nil
		}
		if cur.routes(zone) {
			p.Commands = []Cmd{{Argv: []string{"resolvectl", "revert", r.Link}}}
		}
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("%w: the link must exist before its DNS can be set (is the docker network up?)", err)
	}
	if cur.matches(zone, servers) {
		return p, nil
	}
	// A link with only a ~routing domain is not a default route for other
	// names, so this sends only the zone to these servers.
	p.Commands = []Cmd{
		{Argv: append([]string{"resolvectl", "dns", r.Link}, servers...)},
		{Argv: []string{"resolvectl", "domain", r.Link, "~" + zone}},
	}
	return p, nil
}

// resolvedRunning: resolvectl is on PATH, /run/systemd/resolve exists and
// `resolvectl status` answers.
func (r *Resolver) resolvedRunning(ctx context.Context) bool {
	look := r.lookPath
	if look == nil {
		look = exec.LookPath
	}
	if _, err := look("resolvectl"); err != nil {
		return false
	}
	if fi, err := os.Stat(filepath.Join(r.root, "/run/systemd/resolve")); err != nil || !fi.IsDir() {
		return false
	}
	_, err := r.Priv.Runner.Run(ctx, []string{"resolvectl", "status"}, nil)
	return err == nil
}

// linkSettings are a link's DNS servers and domains in systemd-resolved.
type linkSettings struct {
	link    string
	servers []string
	domains []string
}

func (l linkSettings) String() string {
	return fmt.Sprintf("link %s: DNS [%s], domains [%s]", l.link, strings.Join(l.servers, " "), strings.Join(l.domains, " "))
}

func (l linkSettings) routes(zone string) bool {
	for _, d := range l.domains {
		if strings.EqualFold(strings.TrimSuffix(d, "."), "~"+zone) {
			return true
		}
	}
	return false
}

func (l linkSettings) matches(zone string, servers []string) bool {
	if !l.routes(zone) || len(l.servers) != len(servers) {
		return false
	}
	for i, s := range servers {
		a, err1 := netip.ParseAddr(s)
		b, err2 := netip.ParseAddr(l.servers[i])
		if err1 != nil || err2 != nil || a != b {
			return false
		}
	}
	return true
}

// linkDNS asks systemd-resolved for the link's servers and domains.
func (r *Resolver) linkDNS(ctx context.Context) (linkSettings, error) {
	ls := linkSettings{link: r.Link}
	out, err := r.Priv.Runner.Run(ctx, []string{"resolvectl", "dns", r.Link}, nil)
	if err != nil {
		return ls, fmt.Errorf("reading the DNS servers of link %s: %w", r.Link, err)
	}
	for _, f := range resolvectlValues(string(out)) {
		// Servers may print as addr%ifindex#name; keep the address.
		f, _, _ = strings.Cut(f, "#")
		f, _, _ = strings.Cut(f, "%")
		ls.servers = append(ls.servers, f)
	}
	out, err = r.Priv.Runner.Run(ctx, []string{"resolvectl", "domain", r.Link}, nil)
	if err != nil {
		return ls, fmt.Errorf("reading the DNS domains of link %s: %w", r.Link, err)
	}
	ls.domains = resolvectlValues(string(out))
	return ls, nil
}

// resolvectlValues reads "Link 7 (br-0123456789ab): v1 v2" (values may be
// absent, and may continue on indented lines).
func resolvectlValues(out string) []string {
	var vals []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Link ") || strings.HasPrefix(line, "Global") {
			if _, rest, ok := strings.Cut(line, "):"); ok {
				line = rest
			} else if _, rest, ok := strings.Cut(line, ":"); ok {
				line = rest
			}
		}
		vals = append(vals, strings.Fields(line)...)
	}
	return vals
}

// manualDNS lists the files that route zone to servers in the common Linux
// resolver setups marina does not edit itself.
func manualDNS(zone string, servers []string, remove bool) *ManualDNS {
	var resolved, dnsmasq strings.Builder
	resolved.WriteString("[Resolve]\n")
	resolved.WriteString("DNS=" + strings.Join(servers, " ") + "\n")
	resolved.WriteString("Domains=~" + zone + "\n")
	for _, s := range servers {
		dnsmasq.WriteString("server=/" + zone + "/" + s + "\n")
	}
	return &ManualDNS{
		Zone: zone, Nameservers: servers, Remove: remove,
		Snippets: []DNSSnippet{
			{Setup: "systemd-resolved", Path: "/etc/systemd/resolved.conf.d/marina.conf", Content: resolved.String(), Then: "sudo systemctl restart systemd-resolved"},
			{Setup: "dnsmasq", Path: "/etc/dnsmasq.d/marina.conf", Content: dnsmasq.String(), Then: "sudo systemctl restart dnsmasq"},
			{Setup: "NetworkManager with dns=dnsmasq", Path: "/etc/NetworkManager/dnsmasq.d/marina.conf", Content: dnsmasq.String(), Then: "sudo systemctl reload NetworkManager"},
		},
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func hasResolverHeader(b []byte) bool {
	first, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.HasPrefix(string(first), ResolverHeader)
}

// validateResolverChange checks the zone and nameservers before anything
// runs; the error names the field.
func validateResolverChange(c sdk.ResolverChange) (string, []string, error) {
	zone, err := ValidateZone(c.Domain)
	if err != nil {
		return "", nil, err
	}
	if len(c.Nameservers) == 0 && !c.Remove {
		return "", nil, fmt.Errorf("resolver nameservers for %s: none given; want at least one IP address", zone)
	}
	servers := make([]string, len(c.Nameservers))
	for i, s := range c.Nameservers {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			hint := ""
			if _, perr := netip.ParseAddrPort(s); perr == nil {
				hint = " (a port cannot be given: resolvers are asked on port 53)"
			}
			return "", nil, fmt.Errorf("resolver nameservers[%d] %q is not an IP address%s", i, s, hint)
		}
		servers[i] = a.Unmap().String()
	}
	return zone, servers, nil
}

// ValidateZone checks that zone is a DNS name usable as a file name under
// /etc/resolver and as a routing domain: dot-separated labels of letters,
// digits and inner hyphens, each 1-63 characters, 253 in all. A trailing
// dot is dropped and the name is lower-cased.
func ValidateZone(zone string) (string, error) {
	z := strings.ToLower(strings.TrimSuffix(zone, "."))
	if z == "" {
		return "", errors.New("resolver domain (dns.zone) is empty")
	}
	if len(z) > 253 {
		return "", fmt.Errorf("resolver domain (dns.zone) %q is longer than 253 characters", zone)
	}
	for _, l := range strings.Split(z, ".") {
		if l == "" {
			return "", fmt.Errorf("resolver domain (dns.zone) %q has an empty label", zone)
		}
		if len(l) > 63 {
			return "", fmt.Errorf("resolver domain (dns.zone) %q has a label longer than 63 characters", zone)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("resolver domain (dns.zone) %q has a label starting or ending with '-'", zone)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", fmt.Errorf("resolver domain (dns.zone) %q contains %q: use letters, digits, '-' and '.'", zone, r)
			}
		}
	}
	return z, nil
}

// validateLink checks a Linux interface name.
func validateLink(link string) error {
	if link == "" {
		return errors.New("resolver link is empty: systemd-resolved routes the zone on a network interface (the docker bridge, br-<id>)")
	}
	if len(link) > 15 || link[0] == '-' || link == "." || link == ".." || strings.ContainsAny(link, "/ \t\n:") {
		return fmt.Errorf("resolver link %q is not a network interface name", link)
	}
	return nil
}
