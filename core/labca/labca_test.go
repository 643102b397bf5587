package labca

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var scope = Scope{Lab: "marina", Zone: "demo.internal", Bridge: netip.MustParsePrefix("172.30.0.0/16")}

func newCA(t *testing.T) *CA {
	t.Helper()
	ca, created, err := Ensure(filepath.Join(t.TempDir(), "ca"), scope, time.Now())
	if err != nil || !created {
		t.Fatalf("Ensure: %v created=%v", err, created)
	}
	return ca
}

func TestCreateLoadEnsure(t *testing.T) {
	ca := newCA(t)
	if st, err := os.Stat(filepath.Join(ca.Dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if !ca.Cert.IsCA || !ca.Cert.PermittedDNSDomainsCritical || ca.Cert.MaxPathLen != 0 || !ca.Cert.MaxPathLenZero {
		t.Errorf("CA flags: IsCA %v critical %v maxPathLen %d", ca.Cert.IsCA, ca.Cert.PermittedDNSDomainsCritical, ca.Cert.MaxPathLen)
	}
	if d, r := ca.Permits(); strings.Join(d, ",") != "demo.internal" || strings.Join(r, ",") != "172.30.0.0/16" {
		t.Errorf("Permits = %v %v", d, r)
	}
	again, created, err := Ensure(ca.Dir, scope, time.Now())
	if err != nil || created || again.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("Ensure on an existing CA: %v created=%v", err, created)
	}
	moved := scope
	moved.Bridge = netip.MustParsePrefix("172.20.0.0/16")
	if m := ca.Mismatch(moved); !strings.Contains(m, "constrained to demo.internal and 172.30.0.0/16, but the lab is demo.internal and 172.20.0.0/16") {
		t.Errorf("Mismatch = %q", m)
	}
	if m := ca.Mismatch(scope); m != "" {
		t.Errorf("Mismatch with its own scope = %q", m)
	}
	// A key that is not the certificate's is refused.
	other := newCA(t)
	if err := os.WriteFile(filepath.Join(ca.Dir, KeyFile), mustRead(t, filepath.Join(other.Dir, KeyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ca.Dir); err == nil || !strings.Contains(err.Error(), "is not the key of") {
		t.Errorf("Load with another CA's key: %v", err)
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNoCA) {
		t.Errorf("Load of an empty directory: %v", err)
	}
	if _, err := Create(t.TempDir(), Scope{Zone: "*", Bridge: scope.Bridge}, time.Now()); err == nil {
		t.Error("a CA constrained to * was made")
	}
}

func TestRotateKeepsPrevious(t *testing.T) {
	ca := newCA(t)
	old, fresh, err := Rotate(ca.Dir, scope, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if old == nil || old.Fingerprint() != ca.Fingerprint() || old.Dir != filepath.Join(ca.Dir, PreviousDir) || fresh.Fingerprint() == ca.Fingerprint() {
		t.Fatalf("Rotate: old %v fresh %v", old, fresh)
	}
	if prev, err := Load(filepath.Join(ca.Dir, PreviousDir)); err != nil || prev.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("previous CA: %v", err)
	}
	if now, err := Load(ca.Dir); err != nil || now.Fingerprint() != fresh.Fingerprint() {
		t.Fatalf("current CA after rotation: %v", err)
	}
}

// TestNameConstraintsGo: Go's verifier accepts what the CA signs for the
// zone and the bridge, and refuses the same CA's certificate for any other
// name or address.
func TestNameConstraintsGo(t *testing.T) {
	ca := newCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, tc := range []struct {
		names []string
		ips   []netip.Addr
		ok    bool
	}{
		{names: []string{"web.default.dev.demo.internal"}, ok: true},
		{names: []string{"demo.internal"}, ok: true},
		{ips: []netip.Addr{netip.MustParseAddr("172.30.3.20")}, ok: true},
		{names: []string{"www.example.com"}},
		{names: []string{"demo.internal.evil.com"}},
		{names: []string{"web.demo.internal", "login.bank.example"}},
		{ips: []netip.Addr{netip.MustParseAddr("8.8.8.8")}},
	} {
		certPEM, _, err := ca.Issue(tc.names, tc.ips, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(certPEM)
		leaf, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool})
		var inv x509.CertificateInvalidError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%v %v: %v, want verified", tc.names, tc.ips, err)
		case !tc.ok && (!errors.As(err, &inv) || inv.Reason != x509.CANotAuthorizedForThisName):
			t.Errorf("%v %v: %v, want refused by the name constraints", tc.names, tc.ips, err)
		}
	}
}

// TestNameConstraintsOpenSSLAndCurl: OpenSSL's verifier and curl (over a
// real TLS connection to a server on 127.0.0.1) agree.
func TestNameConstraintsOpenSSLAndCurl(t *testing.T) {
	for _, tool := range []string{"openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed (test/ci installs it): %v", tool, err)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	ca := newCA(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"web.default.dev.demo.internal", true}, {"www.example.com", false}} {
		certPEM, keyPEM, err := ca.Issue([]string{tc.name}, nil, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leaf := filepath.Join(dir, tc.name+".crt")
		if err := os.WriteFile(leaf, certPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("openssl", "verify", "-CAfile", ca.CertPath(), leaf).CombinedOutput()
		if tc.ok != (err == nil) || !tc.ok && !strings.Contains(string(out), "permitted subtree violation") {
			t.Errorf("openssl verify %s: %v\n%s", tc.name, err, out)
		}

		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from the lab") }), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
		go func() { _ = srv.Serve(ln) }()
		port := ln.Addr().(*net.TCPAddr).Port
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err = exec.CommandContext(ctx, "curl", "-sS", "--max-time", "10", "--cacert", ca.CertPath(),
			"--resolve", fmt.Sprintf("%s:%d:127.0.0.1", tc.name, port), fmt.Sprintf("https://%s:%d/", tc.name, port)).CombinedOutput()
		cancel()
		_ = srv.Close()
		if tc.ok && (err != nil || string(out) != "hello from the lab") {
			t.Errorf("curl https://%s: %v\n%s", tc.name, err, out)
		}
		var ee *exec.ExitError
		if !tc.ok && (!errors.As(err, &ee) || ee.ExitCode() != 60) {
			t.Errorf("curl https://%s = %v (%s), want exit 60 (certificate refused)", tc.name, err, out)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
