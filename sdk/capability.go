package sdk

import (
	"net/url"
	"slices"
)

// CapabilityDoc says what one capability unlocks.
type CapabilityDoc struct {
	Name    string
	Unlocks string
}

// KnownCapabilities lists the capabilities this SDK (and a marina built with
// it) knows, with what each unlocks, as `marina plugin install` shows them.
var KnownCapabilities = []CapabilityDoc{
	{CapDocker, "the lab's Docker engine (Env.DockerHost): it can run, change and remove any container in the lab"},
	{CapKubeconfig, "every cluster's admin kubeconfig (Cluster.Kubeconfig): full control of the clusters"},
	{CapHostResolver, "DNS resolver changes on your machine (/etc/resolver), made by marina with sudo"},
	{CapRegistryCredentials, "the credentials of the upstream registries the mirrors pull from (Env.Mirrors) and of the proxy (Env.Proxy)"},
	{CapLabCA, "the lab CA's private key (Env.LabCA.Key): it can sign certificates for the lab's DNS zone and bridge addresses, which your machine trusts after marina trust install"},
}

// CapabilityUnlocks returns what capability name unlocks, and whether this
// SDK knows it.
func CapabilityUnlocks(name string) (string, bool) {
	for _, c := range KnownCapabilities {
		if c.Name == name {
			return c.Unlocks, true
		}
	}
	return "", false
}

// HasCapability reports whether d declares capability name.
func (d *Description) HasCapability(name string) bool {
	return d != nil && slices.Contains(d.Capabilities, name)
}

// UnknownCapabilities returns the capabilities d declares that this SDK
// does not know (a plugin built with a newer SDK), and any declared twice.
func (d *Description) UnknownCapabilities() []string {
	var bad []string
	seen := map[string]bool{}
	for _, c := range d.Capabilities {
		if _, ok := CapabilityUnlocks(c); !ok || seen[c] {
			bad = append(bad, c)
		}
		seen[c] = true
	}
	return bad
}

// Granted returns c as a plugin described by d may see it: what a
// capability unlocks is withheld (zeroed) unless d declares it — the Docker
// endpoint (CapDocker), the kubeconfig (CapKubeconfig), the upstream
// registries' credentials (CapRegistryCredentials), the lab CA's key
// (CapLabCA). c is not changed; the
// Cluster and Mirrors are copied when something is withheld. marina and
// sdk/plugintest hand every hook this call.
func (c HookCall) Granted(d *Description) HookCall {
	if !d.HasCapability(CapDocker) {
		c.Env.DockerHost = ""
	}
	if !d.HasCapability(CapRegistryCredentials) {
		if len(c.Env.Mirrors) > 0 {
			ms := slices.Clone(c.Env.Mirrors)
			for i := range ms {
				ms[i].Username, ms[i].Password = "", ""
			}
			c.Env.Mirrors = ms
		}
		c.Env.Proxy.HTTP, c.Env.Proxy.HTTPS = withoutPassword(c.Env.Proxy.HTTP), withoutPassword(c.Env.Proxy.HTTPS)
	}
	if !d.HasCapability(CapLabCA) {
		c.Env.LabCA.Key = ""
	}
	if !d.HasCapability(CapKubeconfig) && c.Cluster != nil {
		cl := *c.Cluster
		cl.Kubeconfig, cl.KubeconfigPath = nil, ""
		c.Cluster = &cl
	}
	return c
}

// UndeclaredChanges returns, for every host change in r that needs a
// capability d does not declare, a sentence naming the change and the
// capability (empty: r asks for nothing it may not). marina fails such a
// hook, applying none of its host changes.
func (r *Result) UndeclaredChanges(d *Description) []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, hc := range r.HostChanges {
		if hc.Resolver != nil && !d.HasCapability(CapHostResolver) {
			out = append(out, "a DNS resolver change for "+hc.Resolver.Domain+" needs capability "+CapHostResolver+" (sdk.CapHostResolver in Info.Capabilities)")
		}
	}
	return out
}

// withoutPassword is a proxy URL without its password (the user name
// stays: it says whose proxy account it is).
func withoutPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); !has {
		return s
	}
	u.User = url.User(u.User.Username())
	return u.String()
}
