package registries_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/dockertest"
)

// mitmProxy is a company's TLS-intercepting HTTP CONNECT proxy, written for
// the test: it answers CONNECT, completes TLS itself with a certificate for
// the requested name signed by its own CA, and forwards what it then reads
// to upstream (a registry container the test started). It counts what it
// sees.
type mitmProxy struct {
	ca       *labca.CA
	upstream string // host:port the intercepted requests go to
	addr     string

	connects atomic.Int64
	requests atomic.Int64
	mu       sync.Mutex
	hosts    map[string]int // CONNECT targets
}

func startMITMProxy(t *testing.T, listenIP netip.Addr, upstream string) *mitmProxy {
	t.Helper()
	ca, err := labca.Create(filepath.Join(t.TempDir(), "proxy-ca"), labca.Scope{Lab: "corp-proxy", Zone: "corp.example", Bridge: netip.MustParsePrefix("10.0.0.0/8")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(listenIP, 0).String())
	if err != nil {
		t.Fatalf("the proxy cannot listen on the test network's gateway %s: %v", listenIP, err)
	}
	p := &mitmProxy{ca: ca, upstream: upstream, addr: ln.Addr().String(), hosts: map[string]int{}}
	target, _ := url.Parse("http://" + upstream)
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.ErrorLog = log.New(io.Discard, "", 0)
	inner := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.requests.Add(1)
			forward.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	tlsConf := &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		certPEM, keyPEM, err := ca.Issue([]string{h.ServerName}, nil, time.Hour, time.Now())
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(append(certPEM, ca.CertPEM...), keyPEM)
		return &c, err
	}}
	conns := make(chan net.Conn)
	done := make(chan struct{})
	go func() { _ = inner.Serve(&chanListener{conns: conns, done: done, addr: ln.Addr()}) }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.handle(c, tlsConf, conns, done)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		close(done)
		_ = inner.Close()
	})
	return p
}

// handle serves one client connection: a CONNECT, then TLS, then HTTP.
func (p *mitmProxy) handle(c net.Conn, conf *tls.Config, conns chan<- net.Conn, done <-chan struct{}) {
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		_ = c.Close()
		return
	}
	p.connects.Add(1)
	p.mu.Lock()
	p.hosts[req.Host]++
	p.mu.Unlock()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	select {
	case conns <- tls.Server(&bufferedConn{Conn: c, r: br}, conf):
	case <-done:
		_ = c.Close()
	}
}

func (p *mitmProxy) connectsTo() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.hosts {
		out[k] = v
	}
	return out
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

type chanListener struct {
	conns <-chan net.Conn
	done  <-chan struct{}
	addr  net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// TestCompanyNetwork (issue 25): the company's registry is reachable only
// through its HTTP CONNECT proxy, which intercepts TLS with its own CA.
// Without trust.extraCAs the mirror cannot reach its upstream and marina's
// warning says why (the certificate is signed by an unknown authority, add
// the proxy's CA to trust.extraCAs), so a pull through it fails;
// with the proxy's CA in the list, the mirror is recreated and the same
// pull succeeds — every byte through the proxy, which saw only the
// upstream's name.
func TestCompanyNetwork(t *testing.T) {
	l := newLab(t, "guest")
	_, upAddr := l.upstream(t, "172.26.0.11")
	ref := upAddr + "/marina/corp:" + randHex(4)
	id := buildImage(t, ref)
	dockertest.Docker(t, "push", ref)

	gateway := l.net.Subnet.Addr().Next() // the host's side of the test network
	proxy := startMITMProxy(t, gateway, upAddr)
	m := mirror(t, "https://registry.corp.example")
	env := func(extraCAs string) []func(*sdk.Env) {
		return []func(*sdk.Env){func(e *sdk.Env) {
			e.Proxy = sdk.Proxy{HTTPS: "http://" + proxy.addr, NoProxy: []string{l.net.Subnet.String(), "localhost", "127.0.0.1"}}
			e.ExtraCAs = extraCAs
		}}
	}
	// Without the proxy's CA: the registry checks its upstream when it
	// starts, refuses the proxy's certificate and stops; marina's warning
	// names the CA problem and the fix, and a pull through it fails.
	warnings := func() string {
		t.Helper()
		res, err := l.h.Run(sdk.PostUp, l.env([]sdk.Mirror{m}, env("")...))
		if err != nil {
			t.Fatal(err)
		}
		var w string
		for _, d := range res.Warnings {
			w += d.Summary + "\n"
		}
		return w
	}
	const cause = "its upstream's TLS certificate is not trusted (x509: certificate signed by unknown authority)"
	warned := warnings()
	if !strings.Contains(warned, cause) {
		// On a loaded machine the registry may stop only after PostUp's
		// settle time: once it has, the next up says why.
		dockertest.WaitFor(t, time.Minute, 500*time.Millisecond, "the mirror to stop", func() error {
			if st := dockertest.Docker(t, "inspect", "--format", "{{.State.Status}}", m.Name); st != "restarting" && st != "exited" {
				return fmt.Errorf("it is %s", st)
			}
			return nil
		})
		warned = warnings()
	}
	if !strings.Contains(warned, cause) || !strings.Contains(warned, "trust.extraCAs") {
		logs, _ := dockerErr("logs", m.Name)
		t.Errorf("PostUp's warnings do not name the CA problem and the fix:\n%s\nmirror log:\n%s", warned, tail(logs, 20))
	}
	mirrorAddr := fmt.Sprintf("127.0.0.1:%d", m.Port)
	viaMirror := mirrorAddr + strings.TrimPrefix(ref, upAddr)
	removeImage(t, id)
	if out, err := dockerErr("pull", viaMirror); err == nil {
		t.Fatalf("the pull through an intercepting proxy succeeded without its CA:\n%s", out)
	}
	if proxy.connects.Load() == 0 {
		t.Fatal("the mirror never asked the proxy: the failure is not the proxy's CA")
	}
	if proxy.requests.Load() != 0 {
		t.Errorf("requests got through TLS that the mirror should have refused: %d", proxy.requests.Load())
	}

	// With it: recreated, and the same pull succeeds through the proxy.
	if _, err := l.h.Run(sdk.PostUp, l.env([]sdk.Mirror{m}, env(string(proxy.ca.CertPEM))...)); err != nil {
		t.Fatal(err)
	}
	dockertest.WaitRegistry(t, "mirror", mirrorAddr, 60*time.Second)
	if out, err := dockerErr("pull", viaMirror); err != nil {
		logs, _ := dockerErr("logs", m.Name)
		t.Fatalf("the pull with the proxy's CA trusted: %v\n%s\nmirror log:\n%s", err, out, tail(logs, 20))
	}
	if got := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", viaMirror); got != id {
		t.Fatalf("pulled %s, want %s", got, id)
	}
	hosts := proxy.connectsTo()
	if proxy.requests.Load() == 0 || len(hosts) != 1 || hosts["registry.corp.example:443"] == 0 {
		t.Errorf("the proxy saw %d requests, CONNECTs to %v; want requests, and CONNECTs only to registry.corp.example:443", proxy.requests.Load(), hosts)
	}
	t.Logf("through the intercepting proxy: %d CONNECTs, %d requests", proxy.connects.Load(), proxy.requests.Load())
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dockerErr runs the docker CLI and returns its combined output and error
// (a pull that must fail, logs), bounded by dockertest.CommandTimeout.
func dockerErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockertest.CommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return string(out), err
}
