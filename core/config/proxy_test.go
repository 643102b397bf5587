package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/slot"
)

func TestEffectiveProxy(t *testing.T) {
	env := map[string]string{"https_proxy": "http://u:secret@proxy.corp.example:3128", "NO_PROXY": "corp.example, 10.20.0.0/16"}
	getenv := func(k string) string { return env[k] }
	c := Default()
	p := c.EffectiveProxy(getenv)
	if p.HTTP != "" || p.HTTPS != "http://u:secret@proxy.corp.example:3128" || !p.Set() {
		t.Fatalf("from the environment: %+v", p)
	}
	if p.Sources["https"] != "environment ($https_proxy)" || p.Sources["noProxy"] != "environment ($NO_PROXY)" || p.Sources["http"] != "" {
		t.Errorf("sources = %v", p.Sources)
	}
	if !slices.Equal(p.NoProxy[:2], []string{"corp.example", "10.20.0.0/16"}) {
		t.Errorf("the user's entries come first: %v", p.NoProxy)
	}
	for _, want := range []string{"localhost", "127.0.0.1", "172.30.0.0/16", "demo.internal", "registry-dockerio"} {
		if !slices.Contains(p.NoProxy, want) {
			t.Errorf("NoProxy lacks the lab's %q: %v", want, p.NoProxy)
		}
	}
	if r := p.Redacted(); strings.Contains(r.HTTPS, "secret") {
		t.Errorf("Redacted keeps the password: %s", r.HTTPS)
	}
	var got []string
	for _, kv := range p.Env() {
		k, _, _ := strings.Cut(kv, "=")
		got = append(got, k)
	}
	if strings.Join(got, ",") != "HTTPS_PROXY,https_proxy,NO_PROXY,no_proxy" {
		t.Errorf("Env names = %v", got)
	}

	// The config wins over the environment.
	c.Proxy = Proxy{HTTP: "http://p:8080", HTTPS: "http://p:8080", NoProxy: []string{"intranet.example"}}
	p = c.EffectiveProxy(getenv)
	if p.HTTPS != "http://p:8080" || p.Sources["https"] != "config" || p.NoProxy[0] != "intranet.example" || slices.Contains(p.NoProxy, "corp.example") {
		t.Errorf("config over environment: %+v", p)
	}
	// No proxy: no variables at all.
	if env := Default().EffectiveProxy(func(string) string { return "" }).Env(); env != nil {
		t.Errorf("Env without a proxy = %v", env)
	}
}

// TestLabNoProxyCoversExactlyTheSlots: the CIDRs for the slots' subnets
// cover 10.N and 10.1N for every slot (slot.Derive) and nothing else of
// 10/8 (a company's 10.0.x, 10.100.x or 10.200.x still goes through the
// proxy).
func TestLabNoProxyCoversExactlyTheSlots(t *testing.T) {
	var prefixes []netip.Prefix
	for _, s := range slotSubnets() {
		prefixes = append(prefixes, netip.MustParsePrefix(s))
	}
	if len(prefixes) > 16 {
		t.Errorf("%d CIDRs: not the fewest", len(prefixes))
	}
	want := map[byte]bool{}
	for n := slot.Min; n <= slot.Max; n++ {
		r, err := slot.Derive(n, netip.MustParsePrefix("172.30.0.0/16"))
		if err != nil {
			t.Fatal(err)
		}
		want[r.ServiceSubnet.Addr().As4()[1]], want[r.PodSubnet.Addr().As4()[1]] = true, true
	}
	if !want[13] || !want[142] || want[100] || want[105] {
		t.Fatalf("slot.Derive's subnets changed: %v", want)
	}
	for octet := 0; octet <= 255; octet++ {
		a := netip.AddrFrom4([4]byte{10, byte(octet), 7, 7})
		covered := false
		for _, p := range prefixes {
			covered = covered || p.Contains(a)
		}
		want := want[byte(octet)]
		if covered != want {
			t.Errorf("10.%d.7.7 covered = %v, want %v (%v)", octet, covered, want, slotSubnets())
		}
	}
}

func TestProxyValidation(t *testing.T) {
	c := Default()
	c.Proxy = Proxy{HTTP: "proxy.corp.example:3128", HTTPS: "http://u:pw@:3128", NoProxy: []string{"a.example,b.example", "10.0.0.0/8", ""}}
	var paths []string
	for _, p := range Validate(c) {
		if strings.HasPrefix(p.Path, "proxy.") {
			paths = append(paths, p.Path+": "+p.Message)
		}
	}
	joined := strings.Join(paths, "\n")
	for _, want := range []string{"proxy.http: \"proxy.corp.example:3128\" is not a proxy URL", "proxy.https: \"http://u:xxxxx@:3128\" is not a proxy URL", "proxy.noProxy[0]", "proxy.noProxy[2]"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "noProxy[1]") {
		t.Errorf("a CIDR was refused:\n%s", joined)
	}
}
