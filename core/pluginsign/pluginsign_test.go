package pluginsign

import (
	"strings"
	"testing"
)

func TestSignAndCheck(t *testing.T) {
	pub, priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	otherPub, otherPriv, _ := GenerateKey()
	k, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	ko, _ := ParsePrivateKey(otherPriv)
	digest := "sha256:" + strings.Repeat("ab", 32)
	sig := Sign(k, digest)
	parsed, err := ParseSignature(sig.Marshal())
	if err != nil || parsed != sig {
		t.Fatalf("round trip: %v %+v", err, parsed)
	}
	keys := []TrustedKey{{Name: "team", PublicKey: pub, Sources: []string{"oci://reg/team/"}}, {Name: "other", PublicKey: otherPub}}
	bySelf := Sign(ko, digest)
	forged := sig
	forged.KeyID = bySelf.KeyID // claims the other key, signature is team's
	for name, tc := range map[string]struct {
		sig    *Signature
		digest string
		source string
		keys   []TrustedKey
		want   Status
		detail string
	}{
		"signed":           {&sig, digest, "oci://reg/team/acme:1.0.0", keys, Signed, ""},
		"wrong source":     {&sig, digest, "oci://reg/elsewhere/acme", keys, Untrusted, "trusted for oci://reg/team/"},
		"unknown key":      {&sig, digest, "oci://reg/team/acme", keys[1:], Untrusted, "not in pluginTrust.keys"},
		"unsigned":         {nil, digest, "oci://reg/team/acme", keys, Unsigned, ""},
		"another artifact": {&sig, "sha256:" + strings.Repeat("cd", 32), "oci://reg/team/acme", keys, Invalid, "the signature is for"},
		"forged key id":    {&forged, digest, "oci://reg/team/acme", keys, Invalid, "does not verify with key other"},
		"any source":       {&bySelf, digest, "/home/me/acme.tar.gz", keys, Signed, ""},
		"no keys trusted":  {&sig, digest, "oci://reg/team/acme", nil, Untrusted, ""},
	} {
		got := Check(tc.sig, tc.digest, tc.source, tc.keys)
		if got.Status != tc.want || !strings.Contains(got.Detail, tc.detail) {
			t.Errorf("%s: %+v, want %s (%q)", name, got, tc.want, tc.detail)
		}
	}
	if got := Check(&sig, digest, "oci://reg/team/acme", keys); got.String() != "signed by team" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"", "marina-ed25519-pub:!!", "ssh-ed25519 AAAA", priv} {
		if _, _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("ParsePublicKey(%q) accepted", bad)
		}
	}
	if _, err := ParsePrivateKey(pub); err == nil {
		t.Error("a public key parsed as a private key")
	}
	if _, err := ParseSignature([]byte(`{"algorithm":"rsa","keyId":"x","digest":"d","signature":"s"}`)); err == nil {
		t.Error("a non-ed25519 signature parsed")
	}
}
