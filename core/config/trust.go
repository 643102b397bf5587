package config

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bcollard/marina/core/userfile"
)

// CABundle is the extra CAs of trust.extraCAs, read and checked.
type CABundle struct {
	// PEM holds every certificate, PEM-encoded, in the order given (one
	// block each, nothing else: comments and keys are dropped).
	PEM []byte
	// Certs are the certificates, with the file each came from.
	Certs []ExtraCA
}

// ExtraCA is one certificate of the bundle.
type ExtraCA struct {
	File    string `json:"file"`
	Subject string `json:"subject"`
	// SHA256 is the certificate's fingerprint, hex.
	SHA256   string `json:"sha256"`
	NotAfter string `json:"notAfter"`
}

// maxCAFile bounds one trust.extraCAs file (a bundle of a few hundred CAs
// is well under).
const maxCAFile = 1 << 20

// ExtraCAs reads trust.extraCAs: every file must hold at least one PEM
// certificate, and only certificates. home expands a leading ~/. Problems
// name the list item and the fix.
func (c *Config) ExtraCAs(home string) (CABundle, []Problem) {
	var b CABundle
	var ps []Problem
	seen := map[string]bool{}
	for i, f := range c.Trust.ExtraCAs {
		path := fmt.Sprintf("trust.extraCAs[%d]", i)
		name := strings.TrimSpace(f)
		if name == "" {
			ps = append(ps, Problem{Path: path, Message: "is empty: give the path of a PEM file with your company's CA certificate"})
			continue
		}
		if rest, ok := strings.CutPrefix(name, "~/"); ok && home != "" {
			name = filepath.Join(home, rest)
		}
		if !filepath.IsAbs(name) {
			ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%q is not an absolute path (or ~/...): marina reads it from any working directory", f)})
			continue
		}
		data, err := userfile.ReadFile(name, maxCAFile)
		if err != nil {
			ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("cannot read %s: %v", name, unwrapPathError(err))})
			continue
		}
		n := 0
		for rest := data; ; {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%s holds a %s block: only CA certificates belong there (never a private key)", name, blk.Type)})
				n = -1
				break
			}
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%s: certificate %d does not parse: %v", name, n+1, err)})
				n = -1
				break
			}
			n++
			sum := sha256.Sum256(cert.Raw)
			fp := hex.EncodeToString(sum[:])
			if seen[fp] {
				continue
			}
			seen[fp] = true
			b.PEM = append(b.PEM, pem.EncodeToMemory(blk)...)
			b.Certs = append(b.Certs, ExtraCA{File: name, Subject: cert.Subject.String(), SHA256: fp, NotAfter: cert.NotAfter.UTC().Format("2006-01-02")})
		}
		if n == 0 {
			ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----); export the CA as PEM (macOS: security find-certificate -p -c NAME)", name)})
		}
	}
	return b, ps
}

// unwrapPathError drops the path os errors repeat.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
