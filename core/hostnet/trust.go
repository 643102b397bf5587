package hostnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// macOS's security(1) and System keychain, by absolute path.
const (
	darwinSecurity = "/usr/bin/security"
	systemKeychain = "/Library/Keychains/System.keychain"
)

// LinuxTrustStore is a distribution's system trust store: where a CA
// certificate is dropped and the command that rebuilds the bundle.
type LinuxTrustStore struct {
	// Name says which family it is (debian, fedora, arch).
	Name string
	// AnchorDir receives the certificate (<AnchorDir>/<file>.crt).
	AnchorDir string
	// Update rebuilds the bundle from the anchors.
	Update []string
	// Bundle is the file every TLS client reads.
	Bundle string
}

// LinuxTrustStores are the stores marina knows, in the order it looks for
// them (the first whose Update command exists wins).
var LinuxTrustStores = []LinuxTrustStore{
	{Name: "debian", AnchorDir: "/usr/local/share/ca-certificates", Update: []string{"/usr/sbin/update-ca-certificates"}, Bundle: "/etc/ssl/certs/ca-certificates.crt"},
	{Name: "fedora", AnchorDir: "/etc/pki/ca-trust/source/anchors", Update: []string{"/usr/bin/update-ca-trust", "extract"}, Bundle: "/etc/pki/tls/certs/ca-bundle.crt"},
	{Name: "arch", AnchorDir: "/etc/ca-certificates/trust-source/anchors", Update: []string{"/usr/bin/trust", "extract-compat"}, Bundle: "/etc/ssl/certs/ca-certificates.crt"},
}

// HostTrust adds a CA certificate to this machine's system trust store,
// removes it, and says whether it is there: the macOS System keychain
// (security add-trusted-cert / remove-trusted-cert), or a Linux
// distribution's anchor directory and bundle (update-ca-certificates and
// kin). Changes run through Priv, shown first, like the route.
type HostTrust struct {
	// OS is Darwin or Linux.
	OS   string
	Priv *Privileged
	// Store is the Linux store; zero means the first of LinuxTrustStores
	// found on this machine.
	Store LinuxTrustStore
	// FileName names the anchor file (Linux), e.g. marina-lab-ca.crt.
	FileName string
	// Stat and ReadFile read the machine's files (tests replace them).
	Stat     func(string) (fs.FileInfo, error)
	ReadFile func(string) ([]byte, error)
}

// TrustState is what the host's trust store holds of one certificate.
type TrustState struct {
	// Trusted: TLS clients of this machine that use the system store
	// accept what the certificate signs.
	Trusted bool `json:"trusted"`
	// Where names the store ("System keychain", "/etc/ssl/certs/ca-certificates.crt").
	Where string `json:"where"`
	// Detail says what was found.
	Detail string `json:"detail,omitempty"`
}

func (h *HostTrust) stat(p string) (fs.FileInfo, error) {
	if h.Stat != nil {
		return h.Stat(p)
	}
	return os.Stat(p)
}

func (h *HostTrust) read(p string) ([]byte, error) {
	if h.ReadFile != nil {
		return h.ReadFile(p)
	}
	return os.ReadFile(p)
}

// linuxStore is the store to use, or an error naming what is missing.
func (h *HostTrust) linuxStore() (LinuxTrustStore, error) {
	if h.Store.AnchorDir != "" {
		return h.Store, nil
	}
	for _, s := range LinuxTrustStores {
		if _, err := h.stat(s.Update[0]); err == nil {
			return s, nil
		}
	}
	return LinuxTrustStore{}, errors.New("no system trust store found (update-ca-certificates, update-ca-trust or trust): install your distribution's ca-certificates package, or add the CA to your browsers by hand")
}

func (h *HostTrust) anchorName() string {
	if h.FileName != "" {
		return h.FileName
	}
	return "marina-lab-ca.crt"
}

// PlanInstall returns the commands that make the host trust the CA at
// certPath (with PEM content certPEM), none when it does already.
func (h *HostTrust) PlanInstall(ctx context.Context, certPath string, certPEM []byte, sha1 string) ([]Cmd, error) {
	st, err := h.Check(ctx, certPath, certPEM, sha1)
	if err != nil {
		return nil, err
	}
	if st.Trusted {
		return nil, nil
	}
	switch h.OS {
	case Darwin:
		return []Cmd{{Argv: []string{darwinSecurity, "add-trusted-cert", "-d", "-r", "trustRoot", "-k", systemKeychain, certPath}}}, nil
	case Linux:
		s, err := h.linuxStore()
		if err != nil {
			return nil, err
		}
		return []Cmd{
			{Argv: []string{"install", "-d", "-m", "0755", s.AnchorDir}},
			{Argv: []string{"tee", filepath.Join(s.AnchorDir, h.anchorName())}, Stdin: certPEM},
			{Argv: s.Update},
		}, nil
	}
	return nil, fmt.Errorf("trusting a CA on %s is not supported", h.OS)
}

// PlanRemove returns the commands that take the CA out of the host's
// trust store, none when it is not there.
func (h *HostTrust) PlanRemove(ctx context.Context, certPath string, sha1 string) ([]Cmd, error) {
	switch h.OS {
	case Darwin:
		out, err := h.Priv.Runner.Run(ctx, []string{darwinSecurity, "find-certificate", "-a", "-Z", systemKeychain}, nil)
		if err != nil {
			return nil, err
		}
		if !strings.Contains(string(out), "SHA-1 hash: "+sha1) {
			return nil, nil
		}
		return []Cmd{
			{Argv: []string{darwinSecurity, "remove-trusted-cert", "-d", certPath}},
			{Argv: []string{darwinSecurity, "delete-certificate", "-Z", sha1, systemKeychain}},
		}, nil
	case Linux:
		s, err := h.linuxStore()
		if err != nil {
			return nil, err
		}
		anchor := filepath.Join(s.AnchorDir, h.anchorName())
		if _, err := h.stat(anchor); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return []Cmd{{Argv: []string{"rm", "-f", anchor}}, {Argv: s.Update}}, nil
	}
	return nil, fmt.Errorf("trusting a CA on %s is not supported", h.OS)
}

// Check says whether the host trusts the CA: on macOS, the certificate is
// in the System keychain and security(1) verifies it; on Linux, the
// anchor file holds it and the bundle includes it.
func (h *HostTrust) Check(ctx context.Context, certPath string, certPEM []byte, sha1 string) (TrustState, error) {
	switch h.OS {
	case Darwin:
		st := TrustState{Where: "the System keychain"}
		out, err := h.Priv.Runner.Run(ctx, []string{darwinSecurity, "find-certificate", "-a", "-Z", systemKeychain}, nil)
		if err != nil {
			return st, err
		}
		if !strings.Contains(string(out), "SHA-1 hash: "+sha1) {
			st.Detail = "not in the System keychain"
			return st, nil
		}
		if _, err := h.Priv.Runner.Run(ctx, []string{darwinSecurity, "verify-cert", "-c", certPath}, nil); err != nil {
			st.Detail = "in the System keychain, but not trusted (security verify-cert failed)"
			return st, nil
		}
		st.Trusted, st.Detail = true, "in the System keychain, trusted"
		return st, nil
	case Linux:
		s, err := h.linuxStore()
		if err != nil {
			return TrustState{}, err
		}
		st := TrustState{Where: s.Bundle}
		anchor := filepath.Join(s.AnchorDir, h.anchorName())
		have, err := h.read(anchor)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			st.Detail = anchor + " does not exist"
			return st, nil
		case err != nil:
			return st, err
		case !bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(certPEM)):
			st.Detail = anchor + " holds another certificate (an older lab CA?)"
			return st, nil
		}
		bundle, err := h.read(s.Bundle)
		if err != nil {
			st.Detail = "cannot read " + s.Bundle + ": " + err.Error()
			return st, nil
		}
		if !bytes.Contains(bundle, bytes.TrimSpace(pemBody(certPEM))) {
			st.Detail = anchor + " is there, but " + s.Bundle + " does not include it yet (run " + QuoteArgv(s.Update) + ")"
			return st, nil
		}
		st.Trusted, st.Detail = true, "in "+s.Bundle+" (from "+anchor+")"
		return st, nil
	}
	return TrustState{}, fmt.Errorf("trusting a CA on %s is not supported", h.OS)
}

// pemBody is the base64 lines of a PEM block, as bundles concatenate them.
func pemBody(p []byte) []byte {
	s := string(p)
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.Index(s, "-----END"); i >= 0 {
		s = s[:i]
	}
	return []byte(s)
}
