package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingProxy is a company's HTTP proxy written for the test: it records
// every request it gets, tunnels CONNECTs to their target and forwards
// plain HTTP (one request per connection). A lab behind it must send it
// nothing of its own (marina's NO_PROXY); only the mirrors' upstreams, the
// outside, belong here.
type countingProxy struct {
	addr  string
	conns atomic.Int64 // connections accepted
	mu    sync.Mutex
	seen  []string // "CONNECT host:port" or "GET http://..."
}

func startCountingProxy(t testing.TB, ip netip.Addr) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatalf("the proxy cannot listen on %s: %v", ip, err)
	}
	p := &countingProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return p
}

func (p *countingProxy) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, req.Method+" "+req.RequestURI)
	p.mu.Unlock()
	if req.Method != http.MethodConnect {
		// Plain HTTP: forwarded, as a company proxy does (the mirrors'
		// upstreams are outside the lab: their traffic belongs here).
		if req.URL.Host == "" {
			_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return
		}
		req.RequestURI = ""
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		defer resp.Body.Close()
		resp.Close = true
		_ = resp.Write(c)
		return
	}
	up, err := net.DialTimeout("tcp", req.Host, 10*time.Second)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() { _, _ = io.Copy(up, c) }()
	_, _ = io.Copy(c, up)
}

func (p *countingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// startRealLabBehindProxy is startRealLab behind a company proxy: once the
// lab's network exists, a counting proxy listens on its gateway (the host's
// side, which every container and node reaches), the config's proxy.http and
// proxy.https name it (noProxy: the test's upstream registry, the company's
// internal one), and `up` runs again so the mirrors take it; every cluster
// created afterwards gets it in its nodes.
func startRealLabBehindProxy(t testing.TB) (*lab, *countingProxy) {
	t.Helper()
	l := startRealLab(t)
	gw := netip.MustParsePrefix(bridgeCIDR).Addr().Next()
	p := startCountingProxy(t, gw)
	f, err := os.OpenFile(filepath.Join(l.home, ".marina", "config.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The test's upstream registry stands for the company's internal
	// one, reached directly (the user's noProxy); marina adds the lab.
	_, err = fmt.Fprintf(f, "proxy:\n  http: http://%s\n  https: http://%s\n  noProxy: [%s]\n", p.addr, p.addr, upstreamName)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	l.run(t, upTimeout, "up", "--progress", "plain")
	return l, p
}
