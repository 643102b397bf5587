package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"

	units "github.com/docker/go-units"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk"
)

var (
	minVMMemory  = int64(2 << 30)
	minVMDisk    = int64(10 << 30)
	validDrivers = []string{"auto", "lima", "host"}
)

// API host ports are 7000+N for every slot (see core/slot).
const apiPortFirst, apiPortLast = slot.APIPortBase + slot.Min, slot.APIPortBase + slot.Max

// Validate checks a decoded configuration and returns every problem found.
func Validate(c *Config) []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, clipArgs(args)...)})
	}

	// vm
	if !isDNSLabel(c.VM.Name) {
		add("vm.name", "%q is not a valid VM name: use lower-case letters, digits and '-', at most 63 characters", c.VM.Name)
	}
	if !contains(validDrivers, c.VM.Driver) {
		add("vm.driver", "%q is not a driver; use one of %s", c.VM.Driver, strings.Join(validDrivers, ", "))
	}
	if c.VM.CPUs < 1 {
		add("vm.cpus", "must be at least 1, got %d", c.VM.CPUs)
	}
	checkSize(add, "vm.memory", c.VM.Memory, minVMMemory)
	checkSize(add, "vm.disk", c.VM.Disk, minVMDisk)
	if c.VM.StartTimeout <= 0 {
		add("vm.startTimeout", "must be a positive duration such as 10m, got %s", c.VM.StartTimeout)
	}

	// network
	if !isDNSLabel(c.Network.Name) {
		add("network.name", "%q is not a valid network name; use lower-case letters, digits and '-' (default %s)", c.Network.Name, DefaultNetworkName)
	}
	bridge, bridgeOK := checkBridge(add, c.Network.BridgeCIDR)

	// dns
	if err := checkDomain(c.DNS.Zone); err != nil {
		add("dns.zone", "%v", err)
	}
	dnsIPs := map[string]string{}
	for _, x := range []struct{ path, val string }{{"dns.etcdIP", c.DNS.EtcdIP}, {"dns.serverIP", c.DNS.ServerIP}} {
		ip, err := netip.ParseAddr(x.val)
		if err != nil || !ip.Is4() {
			add(x.path, "%q is not an IPv4 address", x.val)
			continue
		}
		if other, dup := dnsIPs[x.val]; dup {
			add(x.path, "%s is also %s; the etcd and the DNS server need different addresses", x.val, other)
		}
		dnsIPs[x.val] = x.path
		if bridgeOK {
			checkDNSIP(add, x.path, ip, bridge)
		}
	}

	// kind
	checkVersion(add, "kind.nodeVersion", c.Kind.NodeVersion)
	checkVersion(add, "kind.metalLBVersion", c.Kind.MetalLBVersion)
	domains := map[string]int{}
	for i, r := range c.Kind.CustomDNSResolvers {
		p := fmt.Sprintf("kind.customDNSResolvers[%d]", i)
		if err := checkDomain(r.Domain); err != nil {
			add(p+".domain", "%v", err)
		} else if strings.EqualFold(strings.TrimSuffix(r.Domain, "."), c.DNS.Zone) {
			add(p+".domain", "%q is the local zone dns.zone, which marina already forwards; remove this entry", r.Domain)
		}
		if j, dup := domains[r.Domain]; dup {
			add(p+".domain", "%q is already listed at kind.customDNSResolvers[%d]; merge the two entries", r.Domain, j)
		}
		domains[r.Domain] = i
		if len(r.Resolvers) == 0 {
			add(p+".resolvers", "needs at least one resolver address, e.g. [8.8.8.8]")
		}
		for j, addr := range r.Resolvers {
			if !validResolver(addr) {
				add(fmt.Sprintf("%s.resolvers[%d]", p, j), "%q is not an IP address or IP:port", addr)
			}
		}
	}

	// registries
	if c.Registries.CacheStorage != "host" && c.Registries.CacheStorage != "guest" {
		add("registries.cacheStorage", "%q is not valid; use host (cache survives destroy) or guest", c.Registries.CacheStorage)
	}
	names, ports := map[string]int{}, map[int]int{}
	for i, m := range c.Registries.Mirrors {
		p := fmt.Sprintf("registries.mirrors[%d]", i)
		switch {
		case m.Name == "":
			add(p+".name", "is required, e.g. registry-myregistry")
		case strings.ContainsAny(m.Name, ".:"):
			add(p+".name", "%q looks like a hostname and would shadow the real registry inside the clusters; use %q", m.Name, "registry-"+sanitize(m.Name))
		case !isDNSLabel(m.Name):
			add(p+".name", "%q is not a valid container name: use lower-case letters, digits and '-'", m.Name)
		}
		if j, dup := names[m.Name]; dup && m.Name != "" {
			add(p+".name", "%q is already used by registries.mirrors[%d]; names must be unique", m.Name, j)
		}
		names[m.Name] = i
		switch {
		case m.Port < 1 || m.Port > 65535:
			add(p+".port", "%d is out of range 1-65535", m.Port)
		case m.Port >= apiPortFirst && m.Port <= apiPortLast:
			add(p+".port", "%d is reserved for cluster API servers (%d-%d); pick another port", m.Port, apiPortFirst, apiPortLast)
		}
		if j, dup := ports[m.Port]; dup {
			add(p+".port", "%d is already used by registries.mirrors[%d]; ports must be unique", m.Port, j)
		}
		ports[m.Port] = i
		if u, err := url.Parse(m.RemoteURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add(p+".remoteURL", "%q is not an http(s) URL, e.g. https://quay.io", m.RemoteURL)
		}
		if (m.Username == "") != (m.Password == "") {
			add(p, "username and password must be set together")
		}
	}

	// plugins
	for _, name := range sortedKeys(c.Plugins) {
		pc := c.Plugins[name]
		p := "plugins." + name
		if !isPluginName(name) {
			add(p, "%q is not a valid plugin name: lower-case letters, digits and '-', starting with a letter", name)
		}
		if pc.Version != "" {
			if _, err := semver.NewConstraint(pc.Version); err != nil {
				add(p+".version", "%q is not a semver constraint (e.g. 1.2.3, ^1.2, >=1.0 <2.0): %v", pc.Version, err)
			}
		}
		if pc.Timeout < 0 {
			add(p+".timeout", "must be positive, got %s", pc.Timeout)
		}
	}

	// pluginTrust
	if c.PluginTrust.Policy != TrustWarn && c.PluginTrust.Policy != TrustEnforce {
		add("pluginTrust.policy", "%q is not a policy: use %s (install and run what no trusted key signed, with a warning) or %s (refuse it)%s",
			c.PluginTrust.Policy, TrustWarn, TrustEnforce, caseHint(c.PluginTrust.Policy, TrustWarn, TrustEnforce))
	}
	keyNames := map[string]int{}
	for i, k := range c.PluginTrust.Keys {
		p := fmt.Sprintf("pluginTrust.keys[%d]", i)
		if k.Name == "" {
			add(p+".name", "is empty: name the key (it is shown as 'signed by NAME')")
		} else if j, dup := keyNames[k.Name]; dup {
			add(p+".name", "%q is already the name of pluginTrust.keys[%d]; names must be unique", k.Name, j)
		}
		keyNames[k.Name] = i
		if _, _, err := pluginsign.ParsePublicKey(k.PublicKey); err != nil {
			add(p+".publicKey", "%v", err)
		}
		for j, s := range k.Sources {
			if strings.TrimSpace(s) == "" {
				add(fmt.Sprintf("%s.sources[%d]", p, j), "is empty: give a source prefix such as oci://registry.example.com/team/, or remove it")
			}
		}
	}

	for i, r := range c.PluginTrust.Capabilities {
		p := fmt.Sprintf("pluginTrust.capabilities[%d]", i)
		for j, s := range r.Sources {
			if strings.TrimSpace(s) == "" {
				add(fmt.Sprintf("%s.sources[%d]", p, j), "is empty: give a source prefix such as oci://registry.example.com/contrib/, or remove it")
			}
		}
		for j, name := range r.Allow {
			if _, ok := sdk.CapabilityUnlocks(name); !ok {
				add(fmt.Sprintf("%s.allow[%d]", p, j), "%q is not a capability: use %s%s", name, capabilityList(), suggestCapability(name))
			}
		}
	}

	// proxy
	for _, px := range []struct{ path, url string }{{"proxy.http", c.Proxy.HTTP}, {"proxy.https", c.Proxy.HTTPS}} {
		if px.url == "" {
			continue
		}
		if !proxyURLValid(px.url) {
			add(px.path, "%q is not a proxy URL: write http://HOST:PORT (or https://, socks5://), e.g. http://proxy.corp.example:3128", redactURL(px.url))
		}
	}
	for i, n := range c.Proxy.NoProxy {
		if n = strings.TrimSpace(n); n == "" || strings.ContainsAny(n, " ,/") && !isCIDR(n) {
			add(fmt.Sprintf("proxy.noProxy[%d]", i), "%q is not a host, a domain or a CIDR: one per list item (no commas), e.g. corp.example or 10.0.0.0/8", n)
		}
	}

	// pluginSources
	for i, src := range c.PluginSources {
		u, err := url.Parse(src)
		if err != nil || u.Scheme != "oci" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Path, ":@") {
			add(fmt.Sprintf("pluginSources[%d]", i), "%q is not an OCI registry namespace: write oci://HOST[:PORT][/PATH], e.g. oci://registry.example.com/marina-plugins", src)
		}
	}

	// images
	for _, leaf := range schema().child("images").Children {
		img := valueAt(c, leaf).(string)
		if img != "" && !IsImageRef(img) {
			add(leaf.Path, "%q is not an image reference like registry.example.com/repo/name:tag", img)
		}
	}
	return ps
}

func checkSize(add func(string, string, ...any), path, val string, minimum int64) {
	n, err := parseSize(val)
	if errors.Is(err, errSizeTooLarge) {
		add(path, "%s is too large: a size must be less than 8EiB; write it like 10GiB or 512MiB", val)
		return
	}
	if err != nil || val == "" {
		add(path, "%q is not a size; write it like 10GiB or 512MiB", val)
		return
	}
	if n < minimum {
		add(path, "%s is too small; at least %s is needed", val, units.BytesSize(float64(minimum)))
	}
}

var errSizeTooLarge = errors.New("size too large")

// parseSize reads a size as units.RAMInBytes does (10GiB, 512MiB, 1.5g),
// refusing what does not fit in an int64: RAMInBytes converts a float
// without checking, so 99999999999PiB wraps around to a negative number on
// amd64 (and saturates on arm64).
func parseSize(s string) (int64, error) {
	n, err := units.RAMInBytes(s)
	if err != nil {
		return 0, err
	}
	// RAMInBytes accepted s: it is a number, then optional space, then an
	// optional unit (b, k, kb, kib, ... p, pb, pib, any case).
	num := strings.TrimRightFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return 0, err
	}
	unit := strings.ToLower(strings.TrimSpace(s[len(num):]))
	if unit != "" {
		if shift := strings.IndexByte("bkmgtp", unit[0]); shift > 0 {
			f *= math.Pow(1024, float64(shift))
		}
	}
	if f >= math.MaxInt64 || n < 0 {
		return 0, errSizeTooLarge
	}
	return n, nil
}

func checkBridge(add func(string, string, ...any), val string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(val)
	switch {
	case err != nil:
		add("network.bridgeCIDR", "%q is not a CIDR; use an IPv4 /16 such as %s", val, DefaultBridgeCIDR)
	case !p.Addr().Is4():
		add("network.bridgeCIDR", "%s is not IPv4; use an IPv4 /16 such as %s", val, DefaultBridgeCIDR)
	case p.Bits() != 16:
		add("network.bridgeCIDR", "%s is a /%d; marina needs a /16 (slots use the third octet), e.g. %s", val, p.Bits(), p.Masked().Addr().String()+"/16")
	case p.Masked() != p:
		add("network.bridgeCIDR", "%s has host bits set; write %s", val, p.Masked())
	default:
		return p, true
	}
	return netip.Prefix{}, false
}

// checkDNSIP keeps a local DNS address inside the bridge and off every slot's
// MetalLB pools, Docker's dynamic range and the gateway.
func checkDNSIP(add func(string, string, ...any), path string, ip netip.Addr, bridge netip.Prefix) {
	if !bridge.Contains(ip) {
		add(path, "%s is outside network.bridgeCIDR %s; use an address inside it, e.g. %s", ip, bridge, octets(bridge, 255, 53))
		return
	}
	if ip == octets(bridge, 0, 0) || ip == octets(bridge, 0, 1) {
		add(path, "%s is the bridge's network or gateway address", ip)
		return
	}
	if dyn, err := slot.DockerIPRange(bridge); err == nil && dyn.Contains(ip) {
		add(path, "%s is inside Docker's dynamic range %s and could be taken by a container; use an address in %s-%s", ip, dyn, octets(bridge, 200, 0), octets(bridge, 255, 254))
		return
	}
	for n := slot.Min; n <= slot.Max; n++ {
		r, err := slot.Derive(n, bridge)
		if err != nil {
			return
		}
		for _, pool := range r.Pools {
			if pool.Contains(ip) {
				add(path, "%s is inside the MetalLB pool %s of cluster slot %d; use an address in %s-%s", ip, pool, n, octets(bridge, 200, 0), octets(bridge, 255, 254))
				return
			}
		}
	}
}

// strictSemver reports whether s is a SemVer 2.0.0 version (without a "v").
func strictSemver(s string) bool {
	_, err := semver.StrictNewVersion(s)
	return err == nil
}

func checkVersion(add func(string, string, ...any), path, val string) {
	if v, ok := strings.CutPrefix(val, "v"); !ok || !strictSemver(v) {
		add(path, "%q must look like v1.2.3", val)
	}
}

// checkDomain accepts DNS names with at least one dot-separated label.
func checkDomain(d string) error {
	d = strings.TrimSuffix(d, ".")
	if d == "" {
		return fmt.Errorf("a DNS domain is required, e.g. %s", DefaultZone)
	}
	if len(d) > 253 {
		return fmt.Errorf("%q is longer than 253 characters", excerpt(d))
	}
	for _, label := range strings.Split(d, ".") {
		if !isDNSLabel(label) {
			return fmt.Errorf("%q is not a valid DNS domain (label %q: lower-case letters, digits, '-')", excerpt(d), excerpt(label))
		}
	}
	return nil
}

func validResolver(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	ap, err := netip.ParseAddrPort(s)
	return err == nil && ap.Port() != 0
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	return strings.Trim(strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, s), "-")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func octets(p netip.Prefix, c, d byte) netip.Addr {
	b := p.Addr().As4()
	return netip.AddrFrom4([4]byte{b[0], b[1], c, d})
}

// deriveDNS places the DNS addresses in the configured bridge when they were
// left at their defaults.
func deriveDNS(c *Config, sources map[string]Source) {
	p, err := netip.ParsePrefix(c.Network.BridgeCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() != 16 {
		return
	}
	derive := func(path string, dst *string, last byte) {
		if sources[path].Kind == FromDefault {
			*dst = octets(p.Masked(), 255, last).String()
			sources[path] = Source{Kind: FromDefault, Detail: "(derived: x.x.255." + strconv.Itoa(int(last)) + " of network.bridgeCIDR)"}
		}
	}
	derive("dns.etcdIP", &c.DNS.EtcdIP, 52)
	derive("dns.serverIP", &c.DNS.ServerIP, 53)
}

// caseHint returns "; did you mean X?" when v is one of values but for case.
func caseHint(v string, values ...string) string {
	for _, x := range values {
		if strings.EqualFold(v, x) {
			return fmt.Sprintf("; did you mean %q? (values are case-sensitive)", x)
		}
	}
	return ""
}

// The grammar of names: a DNS label (RFC 1123), a plugin name, and an image
// reference as Docker's grammar has it, lower-case.
// Compiled on first use, like every package-level value that costs work
// (cmd/marina's TestNoInitWork).
var (
	dnsLabelRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })
	pluginNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`) })
	imageRefRE   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]{1,2}[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)
	})
)

func isDNSLabel(s string) bool   { return dnsLabelRE().MatchString(s) }
func isPluginName(s string) bool { return pluginNameRE().MatchString(s) }

// IsImageRef reports whether s is an image reference (registry/path:tag@digest).
func IsImageRef(s string) bool { return imageRefRE().MatchString(s) }

// capabilityList names the capabilities marina knows.
func capabilityList() string {
	return strings.Join(capabilityNames(), ", ")
}

func capabilityNames() []string {
	names := make([]string, len(sdk.KnownCapabilities))
	for i, c := range sdk.KnownCapabilities {
		names[i] = c.Name
	}
	return names
}

// suggestCapability is " (did you mean X?)" for a near miss, or "".
func suggestCapability(name string) string {
	if s := closest(name, capabilityNames()); s != "" {
		return " (did you mean " + s + "?)"
	}
	return ""
}

// isCIDR reports whether s is an IP prefix.
func isCIDR(s string) bool {
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// redactURL hides a URL's password (proxy URLs carry credentials).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
