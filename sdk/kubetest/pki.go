package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Admin identity of the static token file: a member of system:masters, which the
// API server authorizes for everything before RBAC is consulted.
const (
	AdminUser  = "marina-test-admin"
	AdminGroup = "system:masters"
)

// writeServiceAccountKeys writes a fresh ECDSA P-256 key pair for signing
// service-account tokens: the private key (PKCS#8, "PRIVATE KEY") to keyPath and
// the public key (PKIX, "PUBLIC KEY") to pubPath. ECDSA keys are generated in
// microseconds, RSA ones in tens of milliseconds.
func writeServiceAccountKeys(keyPath, pubPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service-account public key: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// writeTokenFile writes kube-apiserver's --token-auth-file with one admin token
// and returns the token. The format is CSV: token,user,uid,"group1,group2".
func writeTokenFile(path string) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	var sb strings.Builder
	w := csv.NewWriter(&sb)
	if err := w.Write([]string{token, AdminUser, AdminUser, AdminGroup}); err != nil {
		return "", err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return "", err
	}
	return token, os.WriteFile(path, []byte(sb.String()), 0o600)
}

// servingCA returns, PEM-encoded, the CA certificates in the API server's
// self-signed serving bundle (--cert-dir/apiserver.crt: the serving certificate
// followed by the CA that signed it). It fails while the file is absent or
// incomplete, so callers poll it.
func servingCA(certPath string) ([]byte, error) {
	b, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	var ca []byte
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certPath, err)
		}
		if cert.IsCA {
			ca = append(ca, pem.EncodeToMemory(block)...)
		}
	}
	if len(ca) == 0 {
		return nil, errors.New(certPath + " holds no CA certificate yet")
	}
	return ca, nil
}
