package corefile

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Forward is a zone marina forwards to resolvers.
type Forward struct {
	// Zone is a DNS name such as "demo.internal" (case and a trailing dot
	// do not matter; the root "." is refused).
	Zone string
	// Resolvers are IP addresses, or IP:port, CoreDNS forwards the zone to.
	Resolvers []string
}

// Options tune the blocks Edit writes.
type Options struct {
	// CacheSeconds is the `cache` directive's TTL cap; 0 writes no cache directive.
	CacheSeconds int
}

// ConflictError is a server block marina did not write that already serves
// a zone marina should forward on port 53. marina does not touch it.
type ConflictError struct {
	// Zone is the zone both want.
	Zone string
	// Keys are the conflicting block's keys; Line is its first line.
	Keys []string
	Line int
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("Corefile line %d: server block %q already serves %s and was not written by marina, so marina will not change it; "+
		"remove that block from the Corefile (kubectl -n kube-system edit configmap coredns), or stop marina from forwarding %s",
		e.Line, strings.Join(e.Keys, " "), e.Zone, e.Zone)
}

// Edit returns src with one marina-managed server block per forward and no
// other marina-managed block: a block marina wrote before is replaced in
// place, a new one is appended at the end of the file, and a block for a
// zone no longer in forwards is removed (with the blank line marina put
// before it). Every other byte of src is kept. Edit is idempotent:
// Edit(Edit(src)) == Edit(src) for the same forwards and options.
//
// It returns a *ParseError if src cannot be parsed, a *ConflictError if a
// block marina did not write serves one of the zones on port 53, and an
// error naming the forward if a zone or resolver is not valid.
func Edit(src []byte, forwards []Forward, opt Options) ([]byte, error) {
	cf, err := Parse(src)
	if err != nil {
		return nil, err
	}
	return cf.Edit(forwards, opt)
}

// Edit is Edit on an already parsed Corefile; c is not changed.
func (c *Corefile) Edit(forwards []Forward, opt Options) ([]byte, error) {
	want, err := normalizeForwards(forwards)
	if err != nil {
		return nil, err
	}
	if opt.CacheSeconds < 0 {
		return nil, fmt.Errorf("corefile: cache seconds must be 0 or more, got %d", opt.CacheSeconds)
	}
	wanted := map[string]Forward{}
	for _, f := range want {
		wanted[f.Zone] = f
	}
	if err := c.checkConflicts(wanted); err != nil {
		return nil, err
	}

	src := c.src
	style := c.detectStyle()
	var out bytes.Buffer
	written := map[string]bool{}
	pos := 0
	for _, b := range c.Blocks {
		if b.ManagedZone == "" {
			continue
		}
		out.Write(src[pos:b.markerStart])
		if f, ok := wanted[b.ManagedZone]; ok && !written[b.ManagedZone] {
			style.render(&out, f, opt)
			written[b.ManagedZone] = true
		} else {
			// Removed: also drop the blank line marina wrote before it,
			// unless that would put a stray marker comment right above
			// the next block, which would then look like marina's.
			trimBlankLine(&out, style.eol)
			if isMarker(lastLine(out.Bytes())) && !startsBlank(src[b.spanEnd:]) {
				out.WriteString(style.eol)
			}
		}
		pos = b.spanEnd
	}
	out.Write(src[pos:])
	for _, f := range want {
		if written[f.Zone] {
			continue
		}
		if out.Len() > 0 {
			switch {
			case bytes.HasSuffix(out.Bytes(), []byte("\n")):
			case bytes.HasSuffix(out.Bytes(), []byte("\r")) && style.eol == "\r\n":
				out.WriteString("\n")
			default:
				out.WriteString(style.eol)
			}
			out.WriteString(style.eol)
		}
		style.render(&out, f, opt)
	}
	return out.Bytes(), nil
}

// checkConflicts refuses a block marina did not write that serves a wanted
// zone over plain DNS on port 53.
func (c *Corefile) checkConflicts(wanted map[string]Forward) error {
	for _, b := range c.Blocks {
		if b.Snippet || b.ManagedZone != "" {
			continue
		}
		for _, k := range b.Keys {
			zone, ok := plainDNSZone(k)
			if !ok {
				continue
			}
			if _, clash := wanted[zone]; clash {
				return &ConflictError{Zone: zone, Keys: b.Keys, Line: b.Line}
			}
		}
	}
	return nil
}

// plainDNSZone returns the zone of a server block key that CoreDNS serves
// over plain DNS on port 53 ("example.org", "dns://example.org:53"), and
// false for any other transport, port or placeholder.
func plainDNSZone(key string) (string, bool) {
	k := key
	if strings.Contains(k, "://") {
		scheme, rest, _ := strings.Cut(k, "://")
		if !strings.EqualFold(scheme, "dns") {
			return "", false
		}
		k = rest
	}
	if strings.ContainsAny(k, "{}") {
		return "", false // an unexpanded placeholder: its value is unknown here
	}
	if i := strings.LastIndexByte(k, ':'); i >= 0 {
		if strings.Contains(k[:i], ":") || strings.HasPrefix(k, "[") {
			return "", false // an IPv6 address or prefix, never a name marina forwards
		}
		if k[i+1:] != "53" {
			return "", false
		}
		k = k[:i]
	}
	if k == "" {
		return "", false
	}
	return normalizeZone(k), true
}

// normalizeZone lower-cases a zone and drops its trailing dot (except the root's).
func normalizeZone(z string) string {
	z = strings.ToLower(z)
	if len(z) > 1 {
		z = strings.TrimSuffix(z, ".")
	}
	return z
}

// normalizeForwards checks forwards and returns them with normalized zones.
func normalizeForwards(forwards []Forward) ([]Forward, error) {
	out := make([]Forward, 0, len(forwards))
	seen := map[string]int{}
	for i, f := range forwards {
		zone := normalizeZone(strings.TrimSpace(f.Zone))
		if err := checkZone(zone); err != nil {
			return nil, fmt.Errorf("corefile: forward %d: zone %q: %w", i, f.Zone, err)
		}
		if j, dup := seen[zone]; dup {
			return nil, fmt.Errorf("corefile: forward %d: zone %s is also forward %d; list each zone once", i, zone, j)
		}
		seen[zone] = i
		if len(f.Resolvers) == 0 {
			return nil, fmt.Errorf("corefile: forward %d (%s): no resolvers; give at least one IP address", i, zone)
		}
		for _, r := range f.Resolvers {
			if !validResolver(r) {
				return nil, fmt.Errorf("corefile: forward %d (%s): resolver %q is not an IP address or IP:port", i, zone, r)
			}
		}
		out = append(out, Forward{Zone: zone, Resolvers: append([]string(nil), f.Resolvers...)})
	}
	return out, nil
}

// checkZone accepts a DNS name of letters, digits, '-' and '_' labels.
func checkZone(zone string) error {
	switch {
	case zone == "" || zone == ".":
		return fmt.Errorf("must be a DNS name such as demo.internal (the root zone is CoreDNS's own)")
	case len(zone) > 253:
		return fmt.Errorf("is longer than 253 characters")
	}
	for _, label := range strings.Split(zone, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q must be 1 to 63 characters", label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("label %q may only hold letters, digits, '-' and '_'", label)
			}
		}
	}
	return nil
}

func validResolver(r string) bool {
	if _, err := netip.ParseAddr(r); err == nil {
		return true
	}
	_, err := netip.ParseAddrPort(r)
	return err == nil
}

// lastLine is the last complete line of b, without its line break.
func lastLine(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return string(b[bytes.LastIndexByte(b, '\n')+1:])
}

// startsBlank reports whether b starts with a blank line (or is empty).
func startsBlank(b []byte) bool {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return len(bytes.TrimSpace(line)) == 0
}

// trimBlankLine drops the last line break of out when out ends with an
// empty line (the separator Edit writes before a block it appends), or is one.
func trimBlankLine(out *bytes.Buffer, eol string) {
	b := out.Bytes()
	if !bytes.HasSuffix(b, []byte(eol)) {
		return
	}
	if rest := b[:len(b)-len(eol)]; len(rest) == 0 || rest[len(rest)-1] == '\n' {
		out.Truncate(len(b) - len(eol))
	}
}

// style is how the file writes blocks: its indentation and line breaks.
type style struct {
	indent string
	eol    string
}

// detectStyle takes the indentation of the first directive that starts a
// line in a block marina does not manage (so re-runs see the same style),
// and CRLF line breaks if the file's first line ends with one (or, in a
// file of one line, if that line ends with '\r': Edit completes it to CRLF).
func (c *Corefile) detectStyle() style {
	s := style{indent: "    ", eol: "\n"}
	i := bytes.IndexByte(c.src, '\n')
	if i > 0 && c.src[i-1] == '\r' || i < 0 && bytes.HasSuffix(c.src, []byte("\r")) {
		s.eol = "\r\n"
	}
	for _, b := range c.Blocks {
		if b.Snippet || b.ManagedZone != "" {
			continue
		}
		for _, d := range b.Directives {
			if d.Line == b.Line {
				continue
			}
			ls := c.lineOf(d.Line)
			indent := ls[:len(ls)-len(strings.TrimLeft(ls, " \t"))]
			if indent != "" && strings.HasPrefix(strings.TrimLeft(ls, " \t"), d.Name) {
				s.indent = indent
				return s
			}
		}
	}
	return s
}

// lineOf returns line n (1-based) of the source, without its line break.
func (c *Corefile) lineOf(n int) string {
	src := string(c.src)
	for ; n > 1; n-- {
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return ""
		}
		src = src[i+1:]
	}
	if i := strings.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	return src
}

// render writes f's marker comment and server block.
func (s style) render(out *bytes.Buffer, f Forward, opt Options) {
	line := func(parts ...string) {
		out.WriteString(strings.Join(parts, ""))
		out.WriteString(s.eol)
	}
	line("# ", markerPrefix, " ", f.Zone)
	line(f.Zone, ":53 {")
	line(s.indent, "errors")
	if opt.CacheSeconds > 0 {
		line(s.indent, "cache ", strconv.Itoa(opt.CacheSeconds))
	}
	line(s.indent, "forward . ", strings.Join(f.Resolvers, " "))
	line("}")
}
