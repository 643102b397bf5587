package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/sdk/dockertest"
)

// countingProxy is a company's HTTP proxy written for the test: it records
// every request it gets, with the address it came from, tunnels CONNECTs to
// their target and forwards plain HTTP (one request per connection). A lab
// behind it must send it nothing of its own (marina's NO_PROXY); only the
// mirrors' upstreams, the outside, belong here.
//
// Like a company's proxy it also intercepts TLS for one name (corpRegistry):
// it completes the TLS handshake itself with a certificate for that name
// signed by its own CA (the lab's trust.extraCAs) and forwards the requests
// it then reads, as plain HTTP, to the test's upstream registry (setTarget).
type countingProxy struct {
	addr  string
	ca    *labca.CA
	conns atomic.Int64 // connections accepted
	// intercepted counts the requests read inside intercepted TLS.
	intercepted atomic.Int64
	target      atomic.Pointer[string] // host:port intercepted requests go to
	mu          sync.Mutex
	seen        []proxied
}

// proxied is one request the proxy got.
type proxied struct {
	From    netip.Addr
	Request string // "CONNECT host:port" or "GET http://..."
}

func startCountingProxy(t testing.TB, ip netip.Addr, ca *labca.CA) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatalf("the proxy cannot listen on %s: %v", ip, err)
	}
	p := &countingProxy{addr: ln.Addr().String(), ca: ca}
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

// setTarget sets where intercepted requests go (the upstream's published
// address).
func (p *countingProxy) setTarget(hostport string) { p.target.Store(&hostport) }

func (p *countingProxy) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	from, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	p.mu.Lock()
	p.seen = append(p.seen, proxied{From: from.Addr().Unmap(), Request: req.Method + " " + req.RequestURI})
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
	if req.Host == corpRegistry+":443" && p.ca != nil {
		p.intercept(c, br)
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

// intercept answers a CONNECT to corpRegistry as a TLS-intercepting proxy:
// TLS with its own certificate, then each request forwarded to the target.
func (p *countingProxy) intercept(c net.Conn, br *bufio.Reader) {
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	tc := tls.Server(&bufferedConn{Conn: c, r: br}, &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		certPEM, keyPEM, err := p.ca.Issue([]string{h.ServerName}, nil, time.Hour, time.Now())
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(append(certPEM, p.ca.CertPEM...), keyPEM)
		return &pair, err
	}})
	defer tc.Close()
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	in := bufio.NewReader(tc)
	for {
		req, err := http.ReadRequest(in)
		if err != nil {
			return
		}
		p.intercepted.Add(1)
		target := p.target.Load()
		if target == nil {
			_, _ = io.WriteString(tc, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		req.URL.Scheme, req.URL.Host, req.RequestURI = "http", *target, ""
		resp, err := tr.RoundTrip(req)
		if err != nil {
			_, _ = io.WriteString(tc, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		err = resp.Write(tc)
		resp.Body.Close()
		if err != nil {
			return
		}
	}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (p *countingProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxied(nil), p.seen...)
}

// startRealLabBehindProxy is startRealLab behind a company proxy: once the
// lab's network exists, a counting proxy listens on its gateway (the host's
// side, which every container and node reaches), the config's proxy.http and
// proxy.https name it (noProxy: the test's upstream registry, the company's
// internal one), and `up` runs again so the mirrors take it; every cluster
// created afterwards gets it in its nodes.
func startRealLabBehindProxy(t testing.TB) (*lab, *countingProxy, *upstream) {
	t.Helper()
	l := startRealLab(t)
	gw := netip.MustParsePrefix(bridgeCIDR).Addr().Next()
	corpCA, err := labca.Load(filepath.Join(l.home, "corp-ca"))
	if err != nil {
		t.Fatal(err)
	}
	p := startCountingProxy(t, gw, corpCA)
	// The upstream first: the company registry's mirror checks it (through
	// the proxy) when it starts.
	u := startUpstream(t)
	p.setTarget(u.hostport)
	// The company's registry, reached only through the proxy, which
	// intercepts its TLS: a second mirror of the lab is its.
	cfgPath := filepath.Join(l.home, ".marina", "config.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "mirrors: "+realMirrors+"\n") {
		t.Fatalf("the lab's config has no mirrors line %s:\n%s", realMirrors, cfg)
	}
	withCorp := strings.Replace(string(cfg), "mirrors: "+realMirrors+"\n", "mirrors: "+strings.TrimSuffix(realMirrors, "]")+", "+corpMirror+"]\n", 1)
	if err := os.WriteFile(cfgPath, []byte(withCorp), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
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
	dockertest.WaitRegistry(t, "marina's mirror "+corpMirrorName+" of "+corpRegistry+" (through the intercepting proxy)", fmt.Sprintf("127.0.0.1:%d", corpMirrorPort), 3*time.Minute)
	return l, p, u
}
