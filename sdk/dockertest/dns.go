package dockertest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// DNS constants used by QueryA (RFC 1035).
const (
	dnsTypeA    = 1
	dnsClassIN  = 1
	dnsFlagQR   = 1 << 15
	dnsFlagTC   = 1 << 9
	dnsFlagRD   = 1 << 8
	dnsRcodeMsk = 0xF
	maxNameHops = 32
)

// RcodeError is a DNS answer whose response code is not NOERROR.
type RcodeError struct {
	// Name is the name that was asked.
	Name string
	// Rcode is the response code (3 is NXDOMAIN).
	Rcode int
}

// Error implements error.
func (e *RcodeError) Error() string {
	names := map[int]string{1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
	n, ok := names[e.Rcode]
	if !ok {
		n = fmt.Sprintf("rcode %d", e.Rcode)
	}
	return fmt.Sprintf("DNS query for %s: %s", e.Name, n)
}

// IsNXDomain reports whether err is an NXDOMAIN answer.
func IsNXDomain(err error) bool {
	var re *RcodeError
	return errors.As(err, &re) && re.Rcode == 3
}

// QueryA sends one A query for name over UDP to server and returns the addresses
// of the A records in the answer section (CNAME records are skipped). It is a
// deliberately tiny stdlib-only client for tests.
//
// To honour the test network rule it refuses any server that is neither loopback
// nor inside the subnet of a Docker bridge interface (docker0 or br-*) of this
// machine: traffic never leaves the host.
func QueryA(ctx context.Context, server netip.AddrPort, name string) ([]netip.Addr, error) {
	if err := CheckLocal(server.Addr()); err != nil {
		return nil, err
	}
	var idb [2]byte
	_, _ = rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	query, err := buildQuery(id, name)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server.String())
	if err != nil {
		return nil, fmt.Errorf("DNS query for %s to %s: %w", name, server, err)
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(query); err != nil {
		return nil, fmt.Errorf("DNS query for %s to %s: %w", name, server, err)
	}
	buf := make([]byte, 4096)
	// A stray datagram with another id is ignored; a bounded number of them.
	for range 8 {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("DNS query for %s to %s: %w", name, server, err)
		}
		addrs, err := parseResponse(buf[:n], id, name)
		if errors.Is(err, errOtherID) {
			continue
		}
		return addrs, err
	}
	return nil, fmt.Errorf("DNS query for %s to %s: no response with id %d", name, server, id)
}

var errOtherID = errors.New("response id does not match the query")

// buildQuery encodes a recursion-desired A/IN query for name.
func buildQuery(id uint16, name string) ([]byte, error) {
	msg := make([]byte, 12, 12+len(name)+6)
	binary.BigEndian.PutUint16(msg[0:], id)
	binary.BigEndian.PutUint16(msg[2:], dnsFlagRD)
	binary.BigEndian.PutUint16(msg[4:], 1) // QDCOUNT
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return nil, errors.New("DNS query: empty name")
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return nil, fmt.Errorf("DNS query: name %q has an empty or over-long label", name)
		}
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0, 0, dnsTypeA, 0, dnsClassIN)
	if len(msg)-12-4 > 255 {
		return nil, fmt.Errorf("DNS query: name %q is longer than 255 bytes", name)
	}
	return msg, nil
}

// parseResponse decodes a response to query id and returns its A records.
func parseResponse(msg []byte, id uint16, name string) ([]netip.Addr, error) {
	if len(msg) < 12 {
		return nil, fmt.Errorf("DNS response for %s: %d bytes, shorter than a header", name, len(msg))
	}
	if binary.BigEndian.Uint16(msg[0:]) != id {
		return nil, errOtherID
	}
	flags := binary.BigEndian.Uint16(msg[2:])
	if flags&dnsFlagQR == 0 {
		return nil, fmt.Errorf("DNS response for %s: QR bit not set", name)
	}
	if flags&dnsFlagTC != 0 {
		return nil, fmt.Errorf("DNS response for %s: truncated (TC), TCP not supported", name)
	}
	if rc := int(flags & dnsRcodeMsk); rc != 0 {
		return nil, &RcodeError{Name: name, Rcode: rc}
	}
	qd := int(binary.BigEndian.Uint16(msg[4:]))
	an := int(binary.BigEndian.Uint16(msg[6:]))
	off := 12
	for range qd {
		var err error
		if off, err = skipName(msg, off); err != nil {
			return nil, fmt.Errorf("DNS response for %s: question: %w", name, err)
		}
		off += 4
	}
	var addrs []netip.Addr
	for i := range an {
		var err error
		if off, err = skipName(msg, off); err != nil {
			return nil, fmt.Errorf("DNS response for %s: answer %d: %w", name, i, err)
		}
		if off+10 > len(msg) {
			return nil, fmt.Errorf("DNS response for %s: answer %d: record header past the end", name, i)
		}
		typ := binary.BigEndian.Uint16(msg[off:])
		class := binary.BigEndian.Uint16(msg[off+2:])
		rdlen := int(binary.BigEndian.Uint16(msg[off+8:]))
		off += 10
		if off+rdlen > len(msg) {
			return nil, fmt.Errorf("DNS response for %s: answer %d: data past the end", name, i)
		}
		if typ == dnsTypeA && class == dnsClassIN {
			if rdlen != 4 {
				return nil, fmt.Errorf("DNS response for %s: answer %d: A record of %d bytes", name, i, rdlen)
			}
			addrs = append(addrs, netip.AddrFrom4([4]byte(msg[off:off+4])))
		}
		off += rdlen
	}
	return addrs, nil
}

// skipName returns the offset just past the (possibly compressed) name at off.
func skipName(msg []byte, off int) (int, error) {
	end := -1 // where the name ends in the record, once a pointer was followed
	for hops := 0; hops < maxNameHops; {
		if off >= len(msg) {
			return 0, errors.New("name past the end")
		}
		b := int(msg[off])
		switch {
		case b == 0:
			if end < 0 {
				end = off + 1
			}
			return end, nil
		case b&0xC0 == 0xC0:
			if off+1 >= len(msg) {
				return 0, errors.New("compression pointer past the end")
			}
			if end < 0 {
				end = off + 2
			}
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3FFF)
			hops++
		case b&0xC0 != 0:
			return 0, fmt.Errorf("unsupported label type 0x%x", b&0xC0)
		default:
			off += 1 + b
		}
	}
	return 0, errors.New("too many compression pointers (loop?)")
}

// CheckLocal returns an error unless addr is loopback or inside the subnet of a
// Docker bridge interface (docker0 or br-*) of this machine. Call it before
// sending anything to a container address: tests send traffic nowhere else.
func CheckLocal(addr netip.Addr) error {
	addr = addr.Unmap()
	if addr.IsLoopback() {
		return nil
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, iface := range ifaces {
		if iface.Name != "docker0" && !strings.HasPrefix(iface.Name, "br-") {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			ones, _ := ipn.Mask.Size()
			if ok && netip.PrefixFrom(ip.Unmap(), ones).Masked().Contains(addr) {
				return nil
			}
		}
	}
	return fmt.Errorf("refusing to send to %s: not loopback and not on a Docker bridge of this "+
		"machine (tests send traffic only to 127.0.0.0/8 and to containers they created)", addr)
}
