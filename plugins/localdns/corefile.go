package localdns

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Fixed parts of the CoreDNS server the plugin runs.
const (
	// CorefilePath is where the Corefile is placed in the CoreDNS container.
	CorefilePath = "/etc/coredns/Corefile"
	// EtcdPath is the etcd key prefix records live under: ExternalDNS's
	// coredns provider writes <EtcdPath>/<reversed name labels>/<id>.
	EtcdPath = "/skydns"
	// EtcdClientPort is etcd's client port.
	EtcdClientPort = 2379
	// HealthPort and ReadyPort are CoreDNS's health and ready endpoints.
	HealthPort = 8080
	ReadyPort  = 8181
	// DNSPort is the port CoreDNS answers on.
	DNSPort = 53
)

// corefile is a CoreDNS configuration as data: the plugin renders it, never
// concatenates user input into Corefile text.
type corefile struct {
	// header is a comment written above the first block (fixed text).
	header []string
	blocks []serverBlock
}

// serverBlock is one CoreDNS server: the zones/ports it serves and its plugins.
type serverBlock struct {
	keys       []string
	directives []directive
}

// directive is one plugin line, with an optional nested block.
type directive struct {
	name string
	args []string
	body []directive
}

// safeToken is what the renderer writes as a bare word: no white space,
// quotes, braces, '#' (comments), '\' or '$' (environment placeholders), so a
// token can never change the file's structure.
var safeToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._:/\-\[\]@=+,*]+$`) })

// render writes c in CoreDNS's syntax, refusing any token that is not a
// plain word.
func (c corefile) render() ([]byte, error) {
	var b bytes.Buffer
	for _, h := range c.header {
		if strings.ContainsAny(h, "\r\n") {
			return nil, fmt.Errorf("corefile: header line %q spans lines", h)
		}
		b.WriteString("# " + h + "\n")
	}
	for i, blk := range c.blocks {
		if i > 0 || len(c.header) > 0 {
			b.WriteString("\n")
		}
		if len(blk.keys) == 0 {
			return nil, fmt.Errorf("corefile: server block %d has no keys", i)
		}
		if err := writeWords(&b, blk.keys); err != nil {
			return nil, err
		}
		b.WriteString(" {\n")
		if err := writeDirectives(&b, blk.directives, 1); err != nil {
			return nil, err
		}
		b.WriteString("}\n")
	}
	return b.Bytes(), nil
}

func writeDirectives(b *bytes.Buffer, ds []directive, depth int) error {
	indent := strings.Repeat("    ", depth)
	for _, d := range ds {
		b.WriteString(indent)
		if err := writeWords(b, append([]string{d.name}, d.args...)); err != nil {
			return err
		}
		if len(d.body) == 0 {
			b.WriteString("\n")
			continue
		}
		b.WriteString(" {\n")
		if err := writeDirectives(b, d.body, depth+1); err != nil {
			return err
		}
		b.WriteString(indent + "}\n")
	}
	return nil
}

func writeWords(b *bytes.Buffer, words []string) error {
	for i, w := range words {
		if !safeToken().MatchString(w) {
			return fmt.Errorf("corefile: %q is not a plain word (letters, digits and . _ : / - [ ] @ = + , *)", w)
		}
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(w)
	}
	return nil
}

// serverOptions are the user's choices that shape the Corefile.
type serverOptions struct {
	// CacheSeconds caps how long answers are cached; 0 writes no cache.
	CacheSeconds int
	// LogQueries logs every query to the container's output.
	LogQueries bool
}

// serverCorefile is the CoreDNS configuration for zone, served from the etcd
// at etcdIP. There is deliberately no catch-all "." block: the server answers
// for its zone only and REFUSES every other name, so it is never an open
// resolver (not to the host, not to the clusters). zone must have passed
// parseZone and etcdIP must be an IPv4 address.
func serverCorefile(zone string, etcdIP netip.Addr, opt serverOptions) corefile {
	ds := []directive{{name: "errors"}}
	if opt.LogQueries {
		ds = append(ds, directive{name: "log"})
	}
	ds = append(ds,
		directive{name: "health", args: []string{":" + strconv.Itoa(HealthPort)}},
		directive{name: "ready", args: []string{":" + strconv.Itoa(ReadyPort)}},
	)
	if opt.CacheSeconds > 0 {
		ds = append(ds, directive{name: "cache", args: []string{strconv.Itoa(opt.CacheSeconds)}})
	}
	ds = append(ds, directive{name: "etcd", args: []string{zone}, body: []directive{
		{name: "path", args: []string{EtcdPath}},
		{name: "endpoint", args: []string{etcdEndpoint(etcdIP)}},
	}})
	return corefile{
		header: []string{
			"Written by marina's localdns plugin; changes are overwritten by `marina up`.",
			"Serves " + zone + " from etcd (records under " + EtcdPath + ", as ExternalDNS's coredns provider writes them).",
		},
		blocks: []serverBlock{{keys: []string{zone + ":" + strconv.Itoa(DNSPort)}, directives: ds}},
	}
}

// etcdEndpoint is the client URL of the etcd at ip.
func etcdEndpoint(ip netip.Addr) string {
	return "http://" + netip.AddrPortFrom(ip, EtcdClientPort).String()
}

// zoneFix is the end of every dns.zone error: where the user changes it.
const zoneFix = "fix: set dns.zone in ~/.marina/config.yaml (or MARINA_DNS_ZONE) to a DNS name such as demo.internal"

// parseZone checks that s is a DNS zone marina can serve and resolve from
// the host, and returns it in canonical form (lower case, no trailing dot).
// Errors name dns.zone, say what is wrong and how to fix it.
func parseZone(s string) (string, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("dns.zone %q is not a valid DNS zone: %s; %s", s, fmt.Sprintf(format, args...), zoneFix)
	}
	z := strings.ToLower(strings.TrimSuffix(s, "."))
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("dns.zone is empty; %s", zoneFix)
	}
	if z == "" {
		return "", bad("the root zone would send every lookup to the local server")
	}
	if len(z) > 253 {
		return "", bad("it is %d characters long, the limit is 253", len(z))
	}
	labels := strings.Split(z, ".")
	for i, l := range labels {
		switch {
		case l == "":
			return "", bad("label %d is empty (two dots in a row, or a leading dot)", i+1)
		case len(l) > 63:
			return "", bad("label %q is %d characters long, the limit is 63", l, len(l))
		case l[0] == '-' || l[len(l)-1] == '-':
			return "", bad("label %q starts or ends with '-'", l)
		}
		for _, r := range l {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return "", bad("label %q has the character %q (use letters, digits and '-')", l, r)
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", bad("its last label %q is all digits (it reads like an IP address)", labels[len(labels)-1])
	}
	return z, nil
}

// isMDNSZone reports whether zone is .local or under it, which macOS (and
// Avahi on Linux) use for multicast DNS.
func isMDNSZone(zone string) bool {
	return zone == "local" || strings.HasSuffix(zone, ".local")
}
