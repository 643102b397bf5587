// Package labca is the lab's own certificate authority: one per lab, made
// by `marina up`, kept in ~/.marina/ca (key 0600). It signs certificates
// for the lab's names — the cert-manager issuer of every cluster, the
// lab's services — and is what a user trusts on their machine (`marina
// trust install`) to get HTTPS by name without warnings.
//
// Trusting a local CA on a laptop is a known risk (mkcert's): its key could
// sign a certificate for any site. This CA cannot: it carries critical
// X.509 name constraints limiting it to the lab's DNS zone and the bridge
// CIDR, which browsers, the macOS trust store, OpenSSL and Go enforce — a
// certificate it signs for any other name or address does not verify.
package labca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bcollard/marina/core/atomicfile"
)

// The files of a CA directory.
const (
	CertFile = "ca.crt"
	KeyFile  = "ca.key"
	// PreviousDir keeps the CA a rotation replaced, so its trust can be
	// removed from the host afterwards.
	PreviousDir = "previous"
)

// Validity of the CA.
const Validity = 10 * 365 * 24 * time.Hour

// Scope is what the CA may sign for.
type Scope struct {
	// Lab names the lab in the CA's subject (the VM name).
	Lab string
	// Zone is the lab's DNS zone (dns.zone, e.g. demo.internal): names in
	// it and below.
	Zone string
	// Bridge is the bridge CIDR: addresses in it.
	Bridge netip.Prefix
}

// CA is a loaded lab CA.
type CA struct {
	Dir     string
	Cert    *x509.Certificate
	CertPEM []byte
	Key     *ecdsa.PrivateKey
}

// CertPath is the CA certificate's file.
func (c *CA) CertPath() string { return filepath.Join(c.Dir, CertFile) }

// Fingerprint is the SHA-256 of the certificate, hex.
func (c *CA) Fingerprint() string {
	s := sha256.Sum256(c.Cert.Raw)
	return hex.EncodeToString(s[:])
}

// SHA1 is the SHA-1 of the certificate, upper-case hex, as macOS's
// security(1) names certificates (-Z).
func (c *CA) SHA1() string {
	s := sha1.Sum(c.Cert.Raw)
	return strings.ToUpper(hex.EncodeToString(s[:]))
}

// Permits says what the CA's name constraints allow: DNS domains and IP
// ranges.
func (c *CA) Permits() (domains, ranges []string) {
	for _, n := range c.Cert.PermittedIPRanges {
		ranges = append(ranges, n.String())
	}
	return slices.Clone(c.Cert.PermittedDNSDomains), ranges
}

// Mismatch says how the CA's constraints differ from scope ("" when they
// are scope's): after network.bridgeCIDR or dns.zone changed, the CA no
// longer covers the lab and must be rotated.
func (c *CA) Mismatch(s Scope) string {
	domains, ranges := c.Permits()
	want := []string{strings.TrimSuffix(s.Zone, ".")}
	wantR := []string{s.Bridge.Masked().String()}
	if !slices.Equal(domains, want) || !slices.Equal(ranges, wantR) {
		return fmt.Sprintf("the lab CA is constrained to %s and %s, but the lab is %s and %s", strings.Join(domains, ","), strings.Join(ranges, ","), want[0], wantR[0])
	}
	return ""
}

// ErrNoCA is returned by Load when the directory holds no CA.
var ErrNoCA = errors.New("no lab CA")

// Load reads the CA in dir.
func Load(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (marina up creates it)", ErrNoCA, dir)
	}
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("the lab CA's key: %w (rotate the CA: marina trust rotate)", err)
	}
	return parse(dir, certPEM, keyPEM)
}

func parse(dir string, certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate (rotate the CA: marina trust rotate)", filepath.Join(dir, CertFile))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (rotate the CA: marina trust rotate)", filepath.Join(dir, CertFile), err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s is not a PEM key (rotate the CA: marina trust rotate)", filepath.Join(dir, KeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (rotate the CA: marina trust rotate)", filepath.Join(dir, KeyFile), err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s (rotate the CA: marina trust rotate)", filepath.Join(dir, KeyFile), filepath.Join(dir, CertFile))
	}
	return &CA{Dir: dir, Cert: cert, CertPEM: certPEM, Key: key}, nil
}

// Ensure loads the CA in dir, creating it for scope when there is none.
// A CA whose constraints no longer match scope is returned as it is: the
// caller reports Mismatch (rotation changes what the host trusts, so it
// is the user's command). Callers hold marina's process lock.
func Ensure(dir string, s Scope, now time.Time) (ca *CA, created bool, err error) {
	ca, err = Load(dir)
	if err == nil || !errors.Is(err, ErrNoCA) {
		return ca, false, err
	}
	ca, err = Create(dir, s, now)
	return ca, err == nil, err
}

// Create makes a new CA for scope in dir (replacing none: Rotate does).
func Create(dir string, s Scope, now time.Time) (*CA, error) {
	if err := checkScope(s); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	bridge := s.Bridge.Masked()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         fmt.Sprintf("marina lab CA %s %s", s.Lab, now.UTC().Format("2006-01-02 15:04")),
			Organization:       []string{"marina"},
			OrganizationalUnit: []string{"only for " + s.Zone + " and " + bridge.String()},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// The constraints are critical: a verifier that does not
		// understand them must refuse the CA rather than ignore them.
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         []string{strings.TrimSuffix(s.Zone, ".")},
		PermittedIPRanges:           []*net.IPNet{{IP: net.IP(bridge.Addr().AsSlice()), Mask: net.CIDRMask(bridge.Bits(), 32)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating the lab CA: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The key first: a certificate without its key is a broken CA, a key
	// without its certificate is no CA (Load says so, Ensure makes one).
	if err := atomicfile.WriteFile(filepath.Join(dir, KeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return parse(dir, certPEM, keyPEM)
}

// Rotate replaces the CA in dir with a new one for scope; the old one (if
// any) moves to dir/previous, so what trusted it can be found and removed.
func Rotate(dir string, s Scope, now time.Time) (old, ca *CA, err error) {
	old, err = Load(dir)
	switch {
	case errors.Is(err, ErrNoCA):
		old = nil
	case err != nil:
		old = nil // unreadable: replaced all the same
	default:
		prev := filepath.Join(dir, PreviousDir)
		if err := os.MkdirAll(prev, 0o700); err != nil {
			return nil, nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(prev, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(old.Key)}), 0o600); err != nil {
			return nil, nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(prev, CertFile), old.CertPEM, 0o644); err != nil {
			return nil, nil, err
		}
		old.Dir = prev
	}
	ca, err = Create(dir, s, now)
	return old, ca, err
}

// KeyPEM is the CA's private key, PKCS #8 PEM: what a plugin that declares
// the lab.ca capability gets (sdk.Env.LabCA.Key).
func (c *CA) KeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(c.Key)})
}

func mustPKCS8(k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err) // an ecdsa P-256 key always marshals
	}
	return b
}

// Issue signs a leaf certificate for names and ips, valid for ttl, and
// returns it and its key as PEM. The CA signs whatever it is asked: the
// verifier's name-constraint check refuses what is outside the scope.
func (c *CA) Issue(names []string, ips []netip.Addr, ttl time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: firstOf(names)},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(ttl),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// checkScope refuses a scope the CA cannot be constrained to.
func checkScope(s Scope) error {
	zone := strings.TrimSuffix(s.Zone, ".")
	if zone == "" || strings.ContainsAny(zone, " *") || !strings.Contains(zone, ".") && zone != "localhost" {
		return fmt.Errorf("dns.zone %q cannot constrain the lab CA: give a domain such as demo.internal", s.Zone)
	}
	if !s.Bridge.IsValid() || !s.Bridge.Addr().Is4() {
		return fmt.Errorf("network.bridgeCIDR %v cannot constrain the lab CA: give an IPv4 CIDR such as 172.30.0.0/16", s.Bridge)
	}
	return nil
}

// Same reports whether a and b are the same certificate.
func Same(a, b []byte) bool {
	pa, _ := pem.Decode(a)
	pb, _ := pem.Decode(b)
	return pa != nil && pb != nil && bytes.Equal(pa.Bytes, pb.Bytes)
}
