// Package pluginsign signs plugin archives and checks their signatures
// against the keys a user trusts (config pluginTrust). Signatures are
// ed25519 over a plugin artifact's sha256 digest, verified offline: no
// transparency log, no network, no certificate authority — a key a team
// hands out is the whole trust root.
//
// Formats (docs/plugins.md, "Signing and trust"):
//
//	public key   marina-ed25519-pub:BASE64(32 bytes)
//	private key  marina-ed25519-key:BASE64(64 bytes)   (a file of mode 0600)
//	signature    {"algorithm":"ed25519","keyId":"…","digest":"sha256:…","signature":"BASE64"}
//
// The signed message is "marina-plugin-signature-v1\n" + digest, so a
// signature cannot be replayed as anything else.
package pluginsign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

const (
	pubPrefix  = "marina-ed25519-pub:"
	privPrefix = "marina-ed25519-key:"
	// Algorithm is the only signature algorithm.
	Algorithm = "ed25519"
	context   = "marina-plugin-signature-v1\n"
)

// GenerateKey returns a new key pair in the text formats above.
func GenerateKey() (pub, priv string, err error) {
	p, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return pubPrefix + base64.StdEncoding.EncodeToString(p), privPrefix + base64.StdEncoding.EncodeToString(k), nil
}

// ParsePublicKey parses a public key and returns it with its id (the
// first 16 hex digits of the sha256 of the key bytes).
func ParsePublicKey(s string) (ed25519.PublicKey, string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, pubPrefix) {
		return nil, "", fmt.Errorf("not a marina public key (it starts with %s; `marina plugin keygen` writes one)", pubPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, pubPrefix))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, "", fmt.Errorf("the public key after %s is not %d base64-encoded bytes", pubPrefix, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), KeyID(b), nil
}

// ParsePrivateKey parses a private key.
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, privPrefix) {
		return nil, fmt.Errorf("not a marina private key (it starts with %s; `marina plugin keygen` writes one)", privPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, privPrefix))
	if err != nil || len(b) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("the private key after %s is not %d base64-encoded bytes", privPrefix, ed25519.PrivateKeySize)
	}
	return ed25519.PrivateKey(b), nil
}

// KeyID is the id of public key bytes.
func KeyID(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signature is a detached signature of one artifact.
type Signature struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"keyId"`
	// Digest is "sha256:<hex>" of the signed artifact (an archive, or the
	// OCI layer holding it: the same bytes).
	Digest    string `json:"digest"`
	Signature string `json:"signature"`
}

// Sign signs digest ("sha256:<hex>") with priv.
func Sign(priv ed25519.PrivateKey, digest string) Signature {
	pub := priv.Public().(ed25519.PublicKey)
	return Signature{Algorithm: Algorithm, KeyID: KeyID(pub), Digest: digest,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(context+digest)))}
}

// Marshal encodes s as one line of JSON.
func (s Signature) Marshal() []byte {
	b, _ := json.Marshal(s)
	return b
}

// ParseSignature decodes a signature.
func ParseSignature(data []byte) (Signature, error) {
	var s Signature
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("not a marina signature: %v", err)
	}
	if s.Algorithm != Algorithm || s.KeyID == "" || s.Digest == "" || s.Signature == "" {
		return s, errors.New("not a marina signature: algorithm ed25519, keyId, digest and signature are required")
	}
	return s, nil
}

// TrustedKey is a public key the user trusts, for sources starting with
// one of Sources (every source when empty).
type TrustedKey struct {
	Name      string
	PublicKey string
	Sources   []string
}

// Status is the outcome of a signature check.
type Status string

// The outcomes of Check.
const (
	Signed    Status = "signed"    // by a key trusted for the source
	Unsigned  Status = "unsigned"  // no signature
	Untrusted Status = "untrusted" // a valid signature by a key not trusted for the source
	Invalid   Status = "invalid"   // a signature that does not verify, or for another artifact
)

// Result is what Check found.
type Result struct {
	Status Status `json:"status"`
	// Key is the name of the trusted key that signed (Signed), or the id
	// of the key that signed (Untrusted).
	Key    string `json:"key,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// String renders r for a person: "signed by team-a", "unsigned", ...
func (r Result) String() string {
	switch r.Status {
	case Signed:
		return "signed by " + r.Key
	case "":
		return "unchecked"
	}
	if r.Detail != "" {
		return string(r.Status) + " (" + r.Detail + ")"
	}
	return string(r.Status)
}

// Check verifies sig (nil: none) of the artifact with the given digest
// from source against the trusted keys.
func Check(sig *Signature, digest, source string, keys []TrustedKey) Result {
	if sig == nil {
		return Result{Status: Unsigned, Detail: "no signature"}
	}
	if sig.Digest != digest {
		return Result{Status: Invalid, Detail: fmt.Sprintf("the signature is for %s, the artifact is %s", sig.Digest, digest)}
	}
	rawSig, err := base64.StdEncoding.DecodeString(sig.Signature)
	if err != nil {
		return Result{Status: Invalid, Detail: "the signature is not base64"}
	}
	known := false
	for _, k := range keys {
		pub, id, err := ParsePublicKey(k.PublicKey)
		if err != nil || id != sig.KeyID {
			continue
		}
		known = true
		if !ed25519.Verify(pub, []byte(context+digest), rawSig) {
			return Result{Status: Invalid, Key: k.Name, Detail: "the signature does not verify with key " + k.Name}
		}
		if !Covers(k.Sources, source) {
			return Result{Status: Untrusted, Key: sig.KeyID, Detail: fmt.Sprintf("key %s is trusted for %s, not for %s", k.Name, strings.Join(k.Sources, ", "), source)}
		}
		return Result{Status: Signed, Key: k.Name}
	}
	if !known {
		return Result{Status: Untrusted, Key: sig.KeyID, Detail: "key " + sig.KeyID + " is not in pluginTrust.keys"}
	}
	return Result{Status: Invalid}
}

// Covers reports whether a rule for sources (prefixes; every source when
// empty) covers source: the rule of pluginTrust.keys and capabilities.
func Covers(sources []string, source string) bool {
	if len(sources) == 0 {
		return true
	}
	for _, s := range sources {
		if strings.HasPrefix(source, s) {
			return true
		}
	}
	return false
}
