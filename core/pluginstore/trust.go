package pluginstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/bcollard/marina/core/pluginsign"
)

// SignatureSuffix names the detached signature beside an archive:
// marina-plugin-acme_1.2.3_linux_amd64.tar.gz.sig.
const SignatureSuffix = ".sig"

// Trust is the signature policy a store applies.
type Trust struct {
	// Enforce refuses to install or launch a plugin no trusted key signed;
	// otherwise such a plugin is installed and run, and reported.
	Enforce bool
	Keys    []pluginsign.TrustedKey
}

// TrustOf checks inst's signature against the keys trusted now.
func (s *Store) TrustOf(inst *Installed) pluginsign.Result {
	return pluginsign.Check(inst.Signature, inst.SignedDigest, inst.Source, s.Trust.Keys)
}

// checkTrust refuses inst under an enforced policy when no trusted key
// signed it.
func (s *Store) checkTrust(inst *Installed) error {
	if !s.Trust.Enforce {
		return nil
	}
	if r := s.TrustOf(inst); r.Status != pluginsign.Signed {
		return newError(ErrUntrusted, untrustedMessage(inst.Name+" "+inst.Version+" from "+inst.Source, r))
	}
	return nil
}

// untrustedMessage says why what is refused and how to trust it.
func untrustedMessage(what string, r pluginsign.Result) string {
	fix := "add the publisher's public key to pluginTrust.keys in the config (with sources covering where it comes from)"
	switch r.Status {
	case pluginsign.Unsigned:
		fix = "ask its publisher for a signed build (marina plugin package --sign), or set pluginTrust.policy: warn to accept unsigned plugins"
	case pluginsign.Invalid:
		fix = "the artifact or its signature was altered: reinstall it from its publisher"
	}
	return fmt.Sprintf("plugin %s is %s, and pluginTrust.policy is enforce: %s", what, r, fix)
}

// readSignatureFile reads the .sig beside an archive; none is nil.
func readSignatureFile(path string) (*pluginsign.Signature, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(data) > 64<<10 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s is over 64 KiB: not a marina signature", path))
	}
	sig, err := pluginsign.ParseSignature(data)
	if err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: %v", path, err))
	}
	return &sig, nil
}
