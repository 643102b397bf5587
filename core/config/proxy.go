package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk"
)

// EffectiveProxy is the proxy the lab uses: each value from the config or,
// when the config leaves it empty, from the environment marina runs in (as
// kind and colima read it), with the lab's own addresses added to the list
// that bypasses it, so lab traffic never goes to the proxy.
type EffectiveProxy struct {
	HTTP  string `json:"http,omitempty" yaml:"http,omitempty"`
	HTTPS string `json:"https,omitempty" yaml:"https,omitempty"`
	// NoProxy is what bypasses the proxy: the user's entries, then the
	// lab's (LabNoProxy).
	NoProxy []string `json:"noProxy" yaml:"noProxy"`
	// Sources say where http, https and noProxy came from: "config",
	// "environment ($HTTPS_PROXY)", or "" when not set.
	Sources map[string]string `json:"sources" yaml:"sources"`
}

// Set reports whether a proxy is in use.
func (p EffectiveProxy) Set() bool { return p.HTTP != "" || p.HTTPS != "" }

// Env returns the variables a program behind the proxy reads (sdk.Proxy.Env:
// HTTP_PROXY, HTTPS_PROXY and NO_PROXY, and their lower-case twins, which
// curl reads), or none when no proxy is set.
func (p EffectiveProxy) Env() []string { return p.SDK().Env() }

// SDK is p as plugins receive it (sdk.Env.Proxy).
func (p EffectiveProxy) SDK() sdk.Proxy {
	return sdk.Proxy{HTTP: p.HTTP, HTTPS: p.HTTPS, NoProxy: p.NoProxy}
}

// Redacted is p with the URLs' passwords hidden, for output.
func (p EffectiveProxy) Redacted() EffectiveProxy {
	p.HTTP, p.HTTPS = redactURL(p.HTTP), redactURL(p.HTTPS)
	return p
}

// ProxyVars are the environment variables the proxy is read from, by key.
var ProxyVars = map[string][2]string{
	"http":    {"HTTP_PROXY", "http_proxy"},
	"https":   {"HTTPS_PROXY", "https_proxy"},
	"noProxy": {"NO_PROXY", "no_proxy"},
}

// EffectiveProxy resolves the proxy of c against the environment getenv
// reads (os.Getenv).
func (c *Config) EffectiveProxy(getenv func(string) string) EffectiveProxy {
	p := EffectiveProxy{Sources: map[string]string{}}
	fromEnv := func(key string) (string, string) {
		for _, v := range ProxyVars[key] {
			if val := strings.TrimSpace(getenv(v)); val != "" {
				return val, "environment ($" + v + ")"
			}
		}
		return "", ""
	}
	pick := func(key, configured string) string {
		if configured != "" {
			p.Sources[key] = "config"
			return configured
		}
		v, src := fromEnv(key)
		p.Sources[key] = src
		return v
	}
	p.HTTP = pick("http", c.Proxy.HTTP)
	p.HTTPS = pick("https", c.Proxy.HTTPS)
	var user []string
	if len(c.Proxy.NoProxy) > 0 {
		user, p.Sources["noProxy"] = c.Proxy.NoProxy, "config"
	} else if v, src := fromEnv("noProxy"); v != "" {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				user = append(user, e)
			}
		}
		p.Sources["noProxy"] = src
	}
	seen := map[string]bool{}
	p.NoProxy = []string{}
	for _, e := range append(user, c.LabNoProxy()...) {
		if !seen[e] {
			seen[e] = true
			p.NoProxy = append(p.NoProxy, e)
		}
	}
	return p
}

// LabNoProxy is everything that is the lab's, which must never go to a
// proxy: localhost, the bridge CIDR (the API servers' and every Service's
// addresses, the DNS and mirror containers), every slot's service and pod
// subnets (10.N.0.0/16 and 10.1N.0.0/16 for N in 1..99, as the fewest
// CIDRs that cover exactly those: 10.1-99 and 10.110-199), the zone (which covers its
// subdomains) and the mirrors' container names.
func (c *Config) LabNoProxy() []string {
	out := []string{"localhost", "127.0.0.1", "::1"}
	if b, err := netip.ParsePrefix(c.Network.BridgeCIDR); err == nil {
		out = append(out, b.Masked().String())
	}
	out = append(out, slotSubnets()...)
	if z := strings.TrimSuffix(c.DNS.Zone, "."); z != "" {
		out = append(out, z)
	}
	for _, m := range c.Registries.Mirrors {
		if m.Name != "" {
			out = append(out, m.Name)
		}
	}
	return out
}

// slotSubnets covers every slot's service and pod subnets (slot.Derive:
// 10.N.0.0/16 and 10.1N.0.0/16, the second octets 1-99 and 110-199 with
// 11-19 among the first) with the fewest CIDRs.
func slotSubnets() []string {
	octets := map[int]bool{}
	bridge := netip.MustParsePrefix("172.30.0.0/16") // the subnets do not depend on it
	for n := slot.Min; n <= slot.Max; n++ {
		if r, err := slot.Derive(n, bridge); err == nil {
			octets[int(r.ServiceSubnet.Addr().As4()[1])] = true
			octets[int(r.PodSubnet.Addr().As4()[1])] = true
		}
	}
	var out []string
	for lo := 0; lo <= 255; lo++ {
		if !octets[lo] {
			continue
		}
		hi := lo
		for hi+1 <= 255 && octets[hi+1] {
			hi++
		}
		out = append(out, coverOctet(lo, hi)...)
		lo = hi
	}
	return out
}

// coverOctet returns the fewest 10.X.0.0/n prefixes covering exactly the
// /16s 10.lo.0.0 … 10.hi.0.0.
func coverOctet(lo, hi int) []string {
	var out []string
	for lo <= hi {
		size := 1
		for lo%(size*2) == 0 && lo+size*2-1 <= hi {
			size *= 2
		}
		bits := 16
		for s := size; s > 1; s /= 2 {
			bits--
		}
		out = append(out, fmt.Sprintf("10.%d.0.0/%d", lo, bits))
		lo += size
	}
	return out
}

// proxyURLValid is what validation accepts as a proxy URL.
func proxyURLValid(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Hostname() != "" && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "socks5")
}
