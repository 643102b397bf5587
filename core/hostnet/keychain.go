package hostnet

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
)

// KeychainCAs are CA certificates read from the macOS System keychain.
type KeychainCAs struct {
	// PEM holds the certificates, in the keychain's order.
	PEM []byte
	// Subjects name them, in the same order.
	Subjects []string
	// Skipped counts the certificates left out: not CA certificates, or
	// excluded (the lab's own CA).
	Skipped int
}

// SystemKeychainArgv is how the System keychain's certificates are read:
// every certificate, PEM, without privileges.
var SystemKeychainArgv = []string{darwinSecurity, "find-certificate", "-a", "-p", systemKeychain}

// SystemKeychainCAs reads the CA certificates of the macOS System keychain,
// where administrators and MDM profiles install a company's roots (Apple's
// own roots live elsewhere, in SystemRootCertificates.keychain), through r.
// Certificates whose SHA-256 (hex) is in exclude — the lab's own CA, which
// `marina trust install` puts there — and certificates that are not CAs
// are left out.
func SystemKeychainCAs(ctx context.Context, r Runner, exclude []string) (KeychainCAs, error) {
	var out KeychainCAs
	b, err := r.Run(ctx, SystemKeychainArgv, nil)
	if err != nil {
		return out, fmt.Errorf("read the System keychain (%s): %w", QuoteArgv(SystemKeychainArgv), err)
	}
	seen := map[string]bool{}
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			out.Skipped++
			continue
		}
		sum := sha256.Sum256(cert.Raw)
		fp := hex.EncodeToString(sum[:])
		if !cert.IsCA || slices.Contains(exclude, fp) || seen[fp] {
			out.Skipped++
			continue
		}
		seen[fp] = true
		out.PEM = append(out.PEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})...)
		out.Subjects = append(out.Subjects, cert.Subject.String())
	}
	return out, nil
}
