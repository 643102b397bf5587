package hostnet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestSystemKeychainCAs: the argv marina runs on macOS, and what it keeps
// of security's output: the CA certificates, not a leaf, not the lab's own
// CA, each once.
func TestSystemKeychainCAs(t *testing.T) {
	corp, _ := testCert(t, "Corp Root CA", true)
	proxy, _ := testCert(t, "Corp Proxy CA", true)
	leaf, _ := testCert(t, "vpn.corp.example", false)
	lab, labFP := testCert(t, "marina lab CA", true)
	f := &fakeRunner{replies: map[string]reply{
		"/usr/bin/security find-certificate -a -p /Library/Keychains/System.keychain": {out: corp + leaf + lab + proxy + corp},
	}}
	got, err := SystemKeychainCAs(context.Background(), f, []string{labFP})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || strings.Join(f.calls[0].argv, " ") != "/usr/bin/security find-certificate -a -p /Library/Keychains/System.keychain" {
		t.Errorf("calls = %+v", f.calls)
	}
	if string(got.PEM) != corp+proxy || strings.Join(got.Subjects, "|") != "CN=Corp Root CA|CN=Corp Proxy CA" || got.Skipped != 3 {
		t.Errorf("got subjects %q, skipped %d, PEM:\n%s", got.Subjects, got.Skipped, got.PEM)
	}

	f.replies["/usr/bin/security find-certificate -a -p /Library/Keychains/System.keychain"] = reply{fail: true, stderr: "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain."}
	if _, err := SystemKeychainCAs(context.Background(), f, nil); err == nil || !strings.Contains(err.Error(), "read the System keychain") {
		t.Errorf("a failing security = %v", err)
	}
}

// testCert returns a self-signed certificate (a CA or a leaf) as PEM and
// its SHA-256.
func testCert(t *testing.T, cn string, ca bool) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: ca, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), hex.EncodeToString(sum[:])
}
