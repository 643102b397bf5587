package lab

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// proxyChecks are doctor's checks of the effective proxy: none set is OK;
// each proxy URL must answer a TCP connection (the lab's traffic out would
// otherwise fail in the VM, the mirrors and the nodes), within timeout.
func (l *Lab) proxyChecks(ctx context.Context, timeout time.Duration) []Check {
	p := l.Config.EffectiveProxy(l.getenv)
	if !p.Set() {
		return []Check{{Name: "proxy", Status: OK, Detail: "none (the lab reaches the outside directly)"}}
	}
	var out []Check
	seen := map[string]bool{}
	for _, x := range []struct{ key, raw string }{{"http", p.HTTP}, {"https", p.HTTPS}} {
		if x.raw == "" || seen[x.raw] {
			continue
		}
		seen[x.raw] = true
		shown := p.Redacted()
		where := shown.HTTP
		if x.key == "https" {
			where = shown.HTTPS
		}
		c := Check{Name: "proxy " + x.key, Detail: fmt.Sprintf("%s (%s); %d entries bypass it, the lab's included", where, p.Sources[x.key], len(p.NoProxy))}
		u, err := url.Parse(x.raw)
		if err != nil || u.Hostname() == "" {
			c.Status, c.Detail, c.Fix = Fail, where+" is not a proxy URL", "set proxy."+x.key+" in the config (or fix $"+strings.ToUpper(x.key)+"_PROXY)"
			out = append(out, c)
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443", "socks5": "1080"}[u.Scheme]
		}
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
		if err != nil {
			c.Status, c.Detail, c.Fix = Fail, c.Detail+": does not answer: "+err.Error(), "check proxy."+x.key+" (or $"+strings.ToUpper(x.key)+"_PROXY) and that this machine reaches it"
		} else {
			_ = conn.Close()
			c.Status, c.Detail = OK, c.Detail+": answers"
		}
		out = append(out, c)
	}
	return out
}

// extraCAsCheck is doctor's check of trust.extraCAs: how many company CAs
// the lab trusts, and a warning for any that has expired or expires within
// 30 days (pulls through the proxy would then fail). None listed is OK.
func (l *Lab) extraCAsCheck(now time.Time) Check {
	c := Check{Name: "company CAs", Status: OK}
	bundle, problems := l.Config.ExtraCAs(l.Home)
	if len(problems) > 0 {
		c.Status, c.Detail, c.Fix = Fail, problems[0].Path+": "+problems[0].Message, "fix trust.extraCAs in the config"
		return c
	}
	if len(bundle.Certs) == 0 {
		c.Detail = "none (trust.extraCAs is empty)"
		return c
	}
	var soon []string
	for _, ca := range bundle.Certs {
		end, err := time.Parse("2006-01-02", ca.NotAfter)
		if err == nil && end.Before(now.Add(30*24*time.Hour)) {
			soon = append(soon, ca.Subject+" (until "+ca.NotAfter+", "+ca.File+")")
		}
	}
	c.Detail = fmt.Sprintf("%d trusted in the VM, the mirrors and new nodes", len(bundle.Certs))
	if len(soon) > 0 {
		c.Status = Warn
		c.Detail += "; expired or expiring within 30 days: " + strings.Join(soon, "; ")
		c.Fix = "get the renewed CA from your company, update the files in trust.extraCAs, then marina up"
	}
	return c
}
