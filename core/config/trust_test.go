package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA writes a self-signed CA certificate (PEM) to dir/name.
func testCA(t *testing.T, dir, name, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtraCAs(t *testing.T) {
	home := t.TempDir()
	a := testCA(t, home, "corp.pem", "Corp Proxy CA")
	b := testCA(t, home, "registry.pem", "Corp Registry CA")
	both := filepath.Join(home, "both.pem")
	if err := os.WriteFile(both, append(mustReadFile(t, a), mustReadFile(t, b)...), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(home, "key.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(home, "empty.pem")
	if err := os.WriteFile(empty, []byte("not pem\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.Trust.ExtraCAs = []string{"~/corp.pem", both}
	bundle, ps := c.ExtraCAs(home)
	if len(ps) != 0 || len(bundle.Certs) != 2 || bundle.Certs[0].Subject != "CN=Corp Proxy CA" || bundle.Certs[1].Subject != "CN=Corp Registry CA" ||
		strings.Count(string(bundle.PEM), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("bundle %+v, problems %v", bundle.Certs, ps)
	}
	c.Trust.ExtraCAs = []string{"", "relative.pem", key, empty, filepath.Join(home, "missing.pem")}
	_, ps = c.ExtraCAs(home)
	var lines []string
	for _, p := range ps {
		lines = append(lines, p.Path+": "+p.Message)
	}
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"trust.extraCAs[0]: is empty", "trust.extraCAs[1]: \"relative.pem\" is not an absolute path", "trust.extraCAs[2]: " + key + " holds a PRIVATE KEY block",
		"trust.extraCAs[3]: " + empty + " holds no PEM certificate", "trust.extraCAs[4]: cannot read"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	// Through Load: a bad file is a config problem.
	cfgPath := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("trust:\n  extraCAs: [\"~/missing.pem\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(LoadOptions{Path: cfgPath, Home: home}); err == nil || !strings.Contains(err.Error(), "trust.extraCAs[0]") {
		t.Errorf("Load with a missing CA file: %v", err)
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
