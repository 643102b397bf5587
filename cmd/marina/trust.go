package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/labca"
)

// newHostTrust is the host's trust store for the lab CA of cfg, or nil on
// an OS where marina makes no host changes.
func newHostTrust(a *app, cfg *config.Config) *hostnet.HostTrust {
	goos := hostOS()
	if goos == "" {
		return nil
	}
	return &hostnet.HostTrust{OS: goos, Priv: hostnet.NewPrivileged(a.err), FileName: "marina-" + cfg.VM.Name + "-ca.crt"}
}

func newTrustCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "trust",
		GroupID: GroupSetup,
		Short:   "The lab's CA: whether this machine trusts it, trust it, stop trusting it, rotate it",
		Long: `marina up makes one CA per lab (~/.marina/ca; ECDSA P-256, key 0600). It signs the
certificates of the lab's names (HTTPS by name in every cluster), and it carries critical
X.509 name constraints: it can only vouch for names in dns.zone and addresses in
network.bridgeCIDR, so trusting it on this machine cannot be abused for any other site.

Trusting it is your choice and, like the route, privileged: trust install adds it to the
macOS System keychain (security add-trusted-cert) or to a Linux distribution's trust store
(update-ca-certificates and kin), showing the commands first (--dry-run only shows them).
The CA survives marina destroy; trust remove stops trusting it, trust rotate replaces it.`,
	}
	cmd.AddCommand(newTrustStatusCmd(a), newTrustInstallCmd(a, true), newTrustInstallCmd(a, false), newTrustRotateCmd(a), newTrustImportKeychainCmd(a))
	return cmd
}

// trustSetup is what the trust commands need: the lab (config, CA
// directory, host trust) and the CA's scope.
func (a *app) trustSetup(ctx context.Context) (*lab.Lab, labca.Scope, error) {
	lb, _, _, err := a.openLab(ctx, readOnly)
	if err != nil {
		return nil, labca.Scope{}, err
	}
	if lb.Trust == nil {
		return nil, labca.Scope{}, exitcode.NewUsage(errors.New("marina trusts a CA on macOS and Linux only"))
	}
	s, err := lab.CAScope(lb)
	return lb, s, err
}

type trustStatus struct {
	CA          string   `json:"ca"`
	Exists      bool     `json:"exists"`
	Subject     string   `json:"subject,omitempty"`
	SHA256      string   `json:"sha256,omitempty"`
	NotAfter    string   `json:"notAfter,omitempty"`
	Domains     []string `json:"permittedDomains,omitempty"`
	Ranges      []string `json:"permittedRanges,omitempty"`
	Mismatch    string   `json:"mismatch,omitempty"`
	Trusted     bool     `json:"trusted"`
	TrustDetail string   `json:"trustDetail,omitempty"`
}

func newTrustStatusCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the lab CA, what it may sign for, and whether this machine trusts it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, s, err := a.trustSetup(cmd.Context())
			if err != nil {
				return err
			}
			st := trustStatus{CA: filepath.Join(lb.CADir, labca.CertFile)}
			ca, err := labca.Load(lb.CADir)
			switch {
			case errors.Is(err, labca.ErrNoCA):
			case err != nil:
				return err
			default:
				st.Exists, st.Subject, st.SHA256 = true, ca.Cert.Subject.CommonName, ca.Fingerprint()
				st.NotAfter = ca.Cert.NotAfter.UTC().Format(time.RFC3339)
				st.Domains, st.Ranges = ca.Permits()
				st.Mismatch = ca.Mismatch(s)
				ts, err := lb.Trust.Check(cmd.Context(), ca.CertPath(), ca.CertPEM, ca.SHA1())
				if err != nil {
					return err
				}
				st.Trusted, st.TrustDetail = ts.Trusted, ts.Detail
			}
			if output != "text" {
				return PrintStructured(a.out, output, st)
			}
			if !st.Exists {
				fmt.Fprintf(a.out, "no lab CA yet (%s): marina up or marina trust install creates it\n", st.CA)
				return nil
			}
			fmt.Fprintf(a.out, "lab CA     %s\n  subject  %s\n  sha256   %s\n  expires  %s\n  only for %s and %s\n", st.CA, st.Subject, st.SHA256, st.NotAfter, strings.Join(st.Domains, ","), strings.Join(st.Ranges, ","))
			if st.Mismatch != "" {
				fmt.Fprintf(a.out, "  Warning: %s: marina trust rotate\n", st.Mismatch)
			}
			if st.Trusted {
				fmt.Fprintf(a.out, "this machine trusts it: %s\n", st.TrustDetail)
			} else {
				fmt.Fprintf(a.out, "this machine does not trust it (%s): marina trust install\n", st.TrustDetail)
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func newTrustInstallCmd(a *app, install bool) *cobra.Command {
	var dryRun bool
	use, short := "remove", "Stop trusting the lab CA on this machine (privileged; the CA itself is kept)"
	if install {
		use, short = "install", "Trust the lab CA on this machine (privileged; creates the CA if marina up has not)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, s, err := a.trustSetup(cmd.Context())
			if err != nil {
				return err
			}
			return a.withLock(cmd.Context(), func() error {
				var ca *labca.CA
				if install && !dryRun {
					if ca, _, err = labca.Ensure(lb.CADir, s, time.Now()); err != nil {
						return err
					}
				} else if ca, err = labca.Load(lb.CADir); err != nil {
					if install && errors.Is(err, labca.ErrNoCA) {
						return exitcode.NewUsage(fmt.Errorf("%w; without --dry-run, trust install creates it first", err))
					}
					if errors.Is(err, labca.ErrNoCA) {
						fmt.Fprintln(a.out, "no lab CA: nothing to remove")
						return nil
					}
					return err
				}
				var cmds []hostnet.Cmd
				reason := "stop trusting the lab CA"
				if install {
					reason = "trust the lab CA (valid only for " + s.Zone + " and " + s.Bridge.String() + ")"
					cmds, err = lb.Trust.PlanInstall(cmd.Context(), ca.CertPath(), ca.CertPEM, ca.SHA1())
				} else {
					cmds, err = lb.Trust.PlanRemove(cmd.Context(), ca.CertPath(), ca.SHA1())
					if prev, perr := labca.Load(filepath.Join(lb.CADir, labca.PreviousDir)); perr == nil {
						more, err2 := lb.Trust.PlanRemove(cmd.Context(), prev.CertPath(), prev.SHA1())
						cmds, err = append(cmds, more...), errors.Join(err, err2)
					}
				}
				if err != nil {
					return err
				}
				if len(cmds) == 0 {
					if install {
						fmt.Fprintf(a.out, "this machine trusts the lab CA already (%s)\n", ca.CertPath())
					} else {
						fmt.Fprintln(a.out, "this machine does not trust the lab CA: nothing to remove")
					}
					return nil
				}
				if dryRun {
					fmt.Fprintf(a.out, "marina would run, to %s:\n", reason)
					for _, c := range cmds {
						fmt.Fprintf(a.out, "  %s\n", c.Render(!lb.Trust.Priv.IsRoot))
					}
					return nil
				}
				if err := lb.Trust.Priv.Do(cmd.Context(), reason, cmds...); err != nil {
					return err
				}
				if install {
					fmt.Fprintf(a.out, "this machine trusts the lab CA %s (sha256 %s), only for %s and %s\n", ca.CertPath(), ca.Fingerprint()[:16], s.Zone, s.Bridge)
				} else {
					fmt.Fprintln(a.out, "this machine no longer trusts the lab CA")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the commands that would run, run nothing")
	return cmd
}

func newTrustRotateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate",
		Short: "Replace the lab CA with a new one (this machine's trust follows when it trusted the old one)",
		Long: `Make a new lab CA for the config's dns.zone and network.bridgeCIDR (after either changed,
or to retire a key). The old one is kept in ~/.marina/ca/previous until trust remove. When
this machine trusted the old CA, the new one is trusted instead (privileged). Clusters
created afterwards get the new CA (the certmanager plugin's issuer, the marina-ca-bundle
ConfigMap); existing ones keep the old one until they are re-created.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, s, err := a.trustSetup(cmd.Context())
			if err != nil {
				return err
			}
			return a.withLock(cmd.Context(), func() error {
				old, ca, err := labca.Rotate(lb.CADir, s, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.out, "new lab CA %s (sha256 %s), only for %s and %s\n", ca.CertPath(), ca.Fingerprint()[:16], s.Zone, s.Bridge)
				if old == nil {
					return nil
				}
				rm, err := lb.Trust.PlanRemove(cmd.Context(), old.CertPath(), old.SHA1())
				if err != nil || len(rm) == 0 {
					return err // the old one was not trusted: nothing follows
				}
				add, err := lb.Trust.PlanInstall(cmd.Context(), ca.CertPath(), ca.CertPEM, ca.SHA1())
				if err != nil {
					return err
				}
				if err := lb.Trust.Priv.Do(cmd.Context(), "trust the new lab CA instead of the old one", append(rm, add...)...); err != nil {
					return fmt.Errorf("the new CA is made, but this machine's trust did not follow: %w (marina trust install, then marina trust remove)", err)
				}
				fmt.Fprintln(a.out, "this machine trusts the new lab CA instead of the old one")
				return nil
			})
		},
	}
}

// keychainCAsFile is where trust import-keychain writes the System
// keychain's CAs, under marina's directory.
const keychainCAsFile = "extra-cas/system-keychain.pem"

func newTrustImportKeychainCmd(a *app) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "import-keychain",
		Short: "macOS: write the System keychain's CA certificates (your company's roots) to a file for trust.extraCAs",
		Long: `On a company Mac, administrators and MDM profiles install the company's root CAs (a
TLS-intercepting proxy's among them) in the System keychain, where the VM, the registry
mirrors and the kind nodes cannot see them. import-keychain reads its CA certificates
(security find-certificate -a -p /Library/Keychains/System.keychain; no privileges), leaves
out the lab's own CA, and writes them to ~/.marina/extra-cas/system-keychain.pem. List that
file in trust.extraCAs once; run import-keychain again when the company's CAs change, then
marina up. --dry-run shows the command and what it found without writing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hostOS() != hostnet.Darwin {
				return exitcode.NewUsage(errors.New("trust import-keychain reads the macOS System keychain; elsewhere list your company's CA files in trust.extraCAs"))
			}
			lb, l, _, err := a.openLab(cmd.Context(), readOnly)
			if err != nil {
				return err
			}
			var exclude []string
			for _, dir := range []string{lb.CADir, filepath.Join(lb.CADir, labca.PreviousDir)} {
				if ca, err := labca.Load(dir); err == nil {
					exclude = append(exclude, ca.Fingerprint())
				}
			}
			fmt.Fprintf(a.out, "reading: %s\n", hostnet.QuoteArgv(hostnet.SystemKeychainArgv))
			cas, err := hostnet.SystemKeychainCAs(cmd.Context(), hostnet.ExecRunner{}, exclude)
			if err != nil {
				return err
			}
			for _, s := range cas.Subjects {
				fmt.Fprintf(a.out, "  %s\n", s)
			}
			fmt.Fprintf(a.out, "%d CA certificate(s) (%d other certificate(s) left out)\n", len(cas.Subjects), cas.Skipped)
			if len(cas.Subjects) == 0 {
				return errors.New("the System keychain holds no CA certificate but the lab's: nothing to import (ask your IT for the proxy's CA file and list it in trust.extraCAs)")
			}
			path := filepath.Join(filepath.Dir(lb.CADir), keychainCAsFile) // ~/.marina
			if dryRun {
				fmt.Fprintf(a.out, "would write %s\n", path)
				return nil
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(path, cas.PEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "wrote %s\n", path)
			listed := false
			for _, f := range l.Config.Trust.ExtraCAs {
				if f == path || (strings.HasPrefix(f, "~/") && filepath.Join(lb.Home, f[2:]) == path) {
					listed = true
				}
			}
			if !listed {
				fmt.Fprintf(a.out, "\nList it in trust.extraCAs (%s), then run marina up:\n\ntrust:\n  extraCAs: [%q]\n", l.Path, path)
			} else {
				fmt.Fprintln(a.out, "trust.extraCAs lists it: marina up gives the lab the new list")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the command and the CAs found, write nothing")
	return cmd
}
