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
	// Capabilities cap what the plugins of some sources may declare; a
	// plugin over a limit is refused at install and at launch, whatever
	// Enforce says.
	Capabilities []CapabilityLimit
}

// TrustOf checks inst's signature against the keys trusted now.
func (s *Store) TrustOf(inst *Installed) pluginsign.Result {
	return pluginsign.Check(inst.Signature, inst.SignedDigest, inst.Source, s.Trust.Keys)
}

// checkTrust refuses inst under an enforced policy when no trusted key
// signed it.
func (s *Store) checkTrust(inst *Installed) error {
	return s.refuseUntrusted(inst.Name+" "+inst.Version+" from "+inst.Source, inst.Signature, inst.SignedDigest, inst.Source)
}

// refuseUntrusted is the trust decision of an install: under an enforced
// policy, what (described for the message) from source is refused unless a
// trusted key for source signed digest (sig may be nil: unsigned). It is
// taken from the signature alone, so an OCI install takes it from the
// manifest, before the layer is downloaded, and every install before the
// binary runs.
func (s *Store) refuseUntrusted(what string, sig *pluginsign.Signature, digest, source string) error {
	if !s.Trust.Enforce {
		return nil
	}
	return s.refuse(what, pluginsign.Check(sig, digest, source, s.Trust.Keys))
}

// refuse is refuseUntrusted for a signature already checked (trust).
func (s *Store) refuse(what string, trust pluginsign.Result) error {
	if s.Trust.Enforce && trust.Status != pluginsign.Signed {
		return newError(ErrUntrusted, untrustedMessage(what, trust))
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
