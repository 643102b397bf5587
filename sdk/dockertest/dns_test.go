package dockertest

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeDNS answers each datagram on 127.0.0.1 with what reply returns (nothing when
// it returns no packets). It checks the query is a well-formed A question for want
// and answers FORMERR otherwise, so a broken encoder fails the test.
func fakeDNS(t *testing.T, want string, reply func(q []byte) [][]byte) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := slices.Clone(buf[:n])
			var out [][]byte
			if name, ok := decodeQuestion(q); !ok || name != want {
				out = [][]byte{response(q, 0, 1)}
			} else {
				out = reply(q)
			}
			for _, p := range out {
				_, _ = pc.WriteTo(p, from)
			}
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// decodeQuestion returns the name of a single A/IN question with RD set.
func decodeQuestion(q []byte) (string, bool) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[2:]) != dnsFlagRD || binary.BigEndian.Uint16(q[4:]) != 1 {
		return "", false
	}
	var labels []string
	off := 12
	for off < len(q) && q[off] != 0 {
		l := int(q[off])
		if off+1+l > len(q) {
			return "", false
		}
		labels = append(labels, string(q[off+1:off+1+l]))
		off += 1 + l
	}
	if off+5 != len(q) || binary.BigEndian.Uint16(q[off+1:]) != dnsTypeA || binary.BigEndian.Uint16(q[off+3:]) != dnsClassIN {
		return "", false
	}
	return strings.Join(labels, "."), true
}

// rr is an answer record pointing (by compression) at the question name.
func rr(typ uint16, data []byte) []byte {
	b := []byte{0xC0, 12}
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, dnsClassIN)
	b = binary.BigEndian.AppendUint32(b, 30)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// response echoes q's id and question with flags, rcode and answers.
func response(q []byte, extraFlags uint16, rcode int, answers ...[]byte) []byte {
	p := slices.Clone(q)
	binary.BigEndian.PutUint16(p[2:], dnsFlagQR|dnsFlagRD|extraFlags|uint16(rcode))
	binary.BigEndian.PutUint16(p[6:], uint16(len(answers)))
	for _, a := range answers {
		p = append(p, a...)
	}
	return p
}

func withID(p []byte, id uint16) []byte {
	p = slices.Clone(p)
	binary.BigEndian.PutUint16(p, id)
	return p
}

func TestQueryA(t *testing.T) {
	a := func(s string) []byte { ip := netip.MustParseAddr(s).As4(); return ip[:] }
	cname := []byte{3, 'w', 'w', 'w', 0xC0, 12}
	tests := []struct {
		name    string
		query   string
		reply   func(q []byte) [][]byte
		want    []string
		wantErr string
		nx      bool
	}{
		{name: "one A", query: "web.demo.internal",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, 0, 0, rr(dnsTypeA, a("172.31.1.5")))} },
			want:  []string{"172.31.1.5"}},
		{name: "trailing dot", query: "web.demo.internal.",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, 0, 0, rr(dnsTypeA, a("10.0.0.1")))} },
			want:  []string{"10.0.0.1"}},
		{name: "CNAME then two A", query: "web.demo.internal",
			reply: func(q []byte) [][]byte {
				return [][]byte{response(q, 0, 0, rr(5, cname), rr(dnsTypeA, a("1.2.3.4")), rr(dnsTypeA, a("5.6.7.8")))}
			},
			want: []string{"1.2.3.4", "5.6.7.8"}},
		{name: "no answer", query: "web.demo.internal",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, 0, 0)} }},
		{name: "stray id first", query: "web.demo.internal",
			reply: func(q []byte) [][]byte {
				r := response(q, 0, 0, rr(dnsTypeA, a("9.9.9.9")))
				return [][]byte{withID(r, binary.BigEndian.Uint16(q)+1), r}
			},
			want: []string{"9.9.9.9"}},
		{name: "NXDOMAIN", query: "missing.demo.internal", nx: true, wantErr: "NXDOMAIN",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, 0, 3)} }},
		{name: "SERVFAIL", query: "web.demo.internal", wantErr: "SERVFAIL",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, 0, 2)} }},
		{name: "truncated", query: "web.demo.internal", wantErr: "truncated",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, dnsFlagTC, 0)} }},
		{name: "short packet", query: "web.demo.internal", wantErr: "shorter than a header",
			reply: func(q []byte) [][]byte { return [][]byte{q[:6]} }},
		{name: "not a response", query: "web.demo.internal", wantErr: "QR bit",
			reply: func(q []byte) [][]byte { return [][]byte{q} }},
		{name: "data past the end", query: "web.demo.internal", wantErr: "past the end",
			reply: func(q []byte) [][]byte {
				r := response(q, 0, 0, rr(dnsTypeA, a("1.2.3.4")))
				return [][]byte{r[:len(r)-2]}
			}},
		{name: "bad A length", query: "web.demo.internal", wantErr: "A record of 3 bytes",
			reply: func(q []byte) [][]byte { return [][]byte{response(q, 0, 0, rr(dnsTypeA, []byte{1, 2, 3}))} }},
		{name: "pointer loop", query: "web.demo.internal", wantErr: "too many compression pointers",
			reply: func(q []byte) [][]byte {
				loop := []byte{0xC0, byte(len(q))} // points at itself
				loop = binary.BigEndian.AppendUint16(loop, dnsTypeA)
				return [][]byte{response(q, 0, 0, loop)}
			}},
		{name: "no reply", query: "web.demo.internal", wantErr: "timeout",
			reply: func(q []byte) [][]byte { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := fakeDNS(t, strings.TrimSuffix(tt.query, "."), tt.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			got, err := QueryA(ctx, server, tt.query)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("QueryA error = %v, want one containing %q", err, tt.wantErr)
				}
				if IsNXDomain(err) != tt.nx {
					t.Fatalf("IsNXDomain(%v) = %v, want %v", err, !tt.nx, tt.nx)
				}
				return
			}
			if err != nil {
				t.Fatalf("QueryA: %v", err)
			}
			var gotS []string
			for _, ip := range got {
				gotS = append(gotS, ip.String())
			}
			if !slices.Equal(gotS, tt.want) {
				t.Fatalf("QueryA = %v, want %v", gotS, tt.want)
			}
		})
	}
}

func TestBuildQueryRejects(t *testing.T) {
	for _, name := range []string{"", ".", "a..b", strings.Repeat("x", 64) + ".internal",
		strings.Repeat(strings.Repeat("y", 60)+".", 5) + "internal"} {
		if _, err := buildQuery(1, name); err == nil {
			t.Errorf("buildQuery(%q) = nil error, want one", name)
		}
	}
}

func TestCheckLocal(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1", true},
		{"127.3.2.1", true},
		{"::1", true},
		{"8.8.8.8", false},
		{"203.0.113.9", false},
	}
	for _, tt := range tests {
		err := CheckLocal(netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("CheckLocal(%s) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
	// QueryA refuses a remote server before sending anything.
	if _, err := QueryA(context.Background(), netip.MustParseAddrPort("8.8.8.8:53"), "x.internal"); err == nil ||
		!strings.Contains(err.Error(), "refusing") {
		t.Errorf("QueryA to 8.8.8.8 = %v, want a refusal", err)
	}
}

// FuzzParseResponse feeds arbitrary datagrams to the response parser: it must
// never panic, and never return more addresses than the packet could hold.
func FuzzParseResponse(f *testing.F) {
	q, err := buildQuery(7, "web.demo.internal")
	if err != nil {
		f.Fatal(err)
	}
	a := [4]byte{172, 31, 1, 5}
	f.Add(response(q, 0, 0, rr(dnsTypeA, a[:])))
	f.Add(response(q, 0, 3))
	f.Add(response(q, 0, 0, []byte{0xC0, 12, 0, 1}))
	f.Add([]byte{0, 7, 0x81, 0x80, 0, 0, 0, 1, 0xC0, 12})
	f.Fuzz(func(t *testing.T, msg []byte) {
		addrs, err := parseResponse(msg, 7, "web.demo.internal")
		if err != nil && addrs != nil {
			t.Fatalf("parseResponse returned %v with error %v", addrs, err)
		}
		if len(addrs)*(2+10+4) > len(msg) {
			t.Fatalf("parseResponse returned %d addresses from %d bytes", len(addrs), len(msg))
		}
	})
}
