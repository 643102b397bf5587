package hostnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/labca"
)

// TestHostTrustDarwinArgv: on macOS the CA goes into the System keychain
// with security(1), exactly these commands; nothing runs when it is there.
func TestHostTrustDarwinArgv(t *testing.T) {
	f := &fakeRunner{replies: map[string]reply{}}
	h := &HostTrust{OS: Darwin, Priv: &Privileged{Runner: f, IsRoot: true, Out: &bytes.Buffer{}}}
	const sha1 = "0123456789ABCDEF0123456789ABCDEF01234567"
	cmds, err := h.PlanInstall(context.Background(), "/Users/me/.marina/ca/ca.crt", []byte("PEM"), sha1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 1 || cmds[0].Render(true) != "sudo /usr/bin/security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain /Users/me/.marina/ca/ca.crt" {
		t.Errorf("install plan: %v", cmds)
	}
	if rm, err := h.PlanRemove(context.Background(), "/Users/me/.marina/ca/ca.crt", sha1); err != nil || len(rm) != 0 {
		t.Errorf("remove plan when absent: %v %v", rm, err)
	}

	f.replies["/usr/bin/security find-certificate -a -Z /Library/Keychains/System.keychain"] = reply{out: "SHA-256 hash: AA\nSHA-1 hash: " + sha1 + "\nkeychain: \"/Library/Keychains/System.keychain\"\n"}
	st, err := h.Check(context.Background(), "/Users/me/.marina/ca/ca.crt", nil, sha1)
	if err != nil || !st.Trusted {
		t.Errorf("check when present and verified: %+v %v", st, err)
	}
	if cmds, err := h.PlanInstall(context.Background(), "/Users/me/.marina/ca/ca.crt", nil, sha1); err != nil || len(cmds) != 0 {
		t.Errorf("install plan when trusted: %v %v", cmds, err)
	}
	rm, err := h.PlanRemove(context.Background(), "/Users/me/.marina/ca/ca.crt", sha1)
	var lines []string
	for _, c := range rm {
		lines = append(lines, c.Render(true))
	}
	if err != nil || strings.Join(lines, "\n") != "sudo /usr/bin/security remove-trusted-cert -d /Users/me/.marina/ca/ca.crt\nsudo /usr/bin/security delete-certificate -Z "+sha1+" /Library/Keychains/System.keychain" {
		t.Errorf("remove plan:\n%s\n%v", strings.Join(lines, "\n"), err)
	}
	f.replies["/usr/bin/security verify-cert -c /Users/me/.marina/ca/ca.crt"] = reply{fail: true, stderr: "CSSMERR_TP_NOT_TRUSTED"}
	if st, err := h.Check(context.Background(), "/Users/me/.marina/ca/ca.crt", nil, sha1); err != nil || st.Trusted || !strings.Contains(st.Detail, "not trusted") {
		t.Errorf("check when present but not trusted: %+v %v", st, err)
	}
}

// TestHostTrustLinuxReal installs the lab CA into this machine's real
// trust store with the real update-ca-certificates — inside a private
// mount namespace whose /etc/ssl/certs, anchor directory and update hooks
// are copies, so the machine's own trust store never changes — then
// checks with OpenSSL against the system bundle that a certificate the CA
// signs for the zone verifies, and that removing it leaves the bundle as
// it was.
func TestHostTrustLinuxReal(t *testing.T) {
	if os.Getenv("MARINA_TRUST_HELPER") == "1" {
		return // runs as the helper below
	}
	requireRoot(t)
	if _, err := os.Stat("/usr/sbin/update-ca-certificates"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("update-ca-certificates is needed (the ca-certificates package): %v", err)
		}
		t.Skip("no update-ca-certificates")
	}
	work := t.TempDir()
	ca, _, err := labca.Ensure(filepath.Join(work, "ca"), labca.Scope{Lab: "t", Zone: "demo.internal", Bridge: netip.MustParsePrefix("172.30.0.0/16")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, _, err := ca.Issue([]string{"web.default.dev.demo.internal"}, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "leaf.crt"), leaf, 0o644); err != nil {
		t.Fatal(err)
	}
	before := sha256File(t, "/etc/ssl/certs/ca-certificates.crt")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run", "^TestHostTrustLinuxHelper$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), "MARINA_TRUST_HELPER=1", "MARINA_TRUST_WORK="+work)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHostTrustLinuxHelper") {
		t.Fatalf("helper in a private mount namespace: %v\n%s", err, out)
	}
	if after := sha256File(t, "/etc/ssl/certs/ca-certificates.crt"); after != before {
		t.Fatal("the machine's own bundle changed: the namespace leaked")
	}
}

// TestHostTrustLinuxHelper is TestHostTrustLinuxReal's body, in its mount
// namespace.
func TestHostTrustLinuxHelper(t *testing.T) {
	if os.Getenv("MARINA_TRUST_HELPER") != "1" {
		return
	}
	work := os.Getenv("MARINA_TRUST_WORK")
	run := func(argv ...string) string {
		t.Helper()
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
		return string(out)
	}
	// Copies of everything update-ca-certificates writes, mounted over the
	// originals in this namespace only.
	for _, d := range []string{"/etc/ssl/certs", "/usr/local/share/ca-certificates", "/etc/ca-certificates/update.d"} {
		cp := filepath.Join(work, "copy", strings.ReplaceAll(d, "/", "_"))
		if err := os.MkdirAll(cp, 0o755); err != nil {
			t.Fatal(err)
		}
		if d != "/etc/ca-certificates/update.d" { // no hooks (Java's keystore): only the bundle
			run("cp", "-a", d+"/.", cp)
		}
		run("mount", "--bind", cp, d)
	}
	before := sha256File(t, "/etc/ssl/certs/ca-certificates.crt")
	ca, err := labca.Load(filepath.Join(work, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	var shown bytes.Buffer
	h := &HostTrust{OS: Linux, Priv: &Privileged{Runner: ExecRunner{}, IsRoot: true, Out: &shown}}
	ctx := context.Background()
	cmds, err := h.PlanInstall(ctx, ca.CertPath(), ca.CertPEM, ca.SHA1())
	if err != nil || len(cmds) != 3 {
		t.Fatalf("install plan: %v %v", cmds, err)
	}
	if err := h.Priv.Do(ctx, "trust the lab CA", cmds...); err != nil {
		t.Fatal(err)
	}
	if st, err := h.Check(ctx, ca.CertPath(), ca.CertPEM, ca.SHA1()); err != nil || !st.Trusted {
		t.Fatalf("after install: %+v %v", st, err)
	}
	if out := run("openssl", "verify", "-CAfile", "/etc/ssl/certs/ca-certificates.crt", filepath.Join(work, "leaf.crt")); !strings.Contains(out, ": OK") {
		t.Errorf("openssl verify against the system bundle: %s", out)
	}
	if again, err := h.PlanInstall(ctx, ca.CertPath(), ca.CertPEM, ca.SHA1()); err != nil || len(again) != 0 {
		t.Errorf("install plan when trusted: %v %v", again, err)
	}
	rm, err := h.PlanRemove(ctx, ca.CertPath(), ca.SHA1())
	if err != nil || len(rm) != 2 {
		t.Fatalf("remove plan: %v %v", rm, err)
	}
	if err := h.Priv.Do(ctx, "stop trusting the lab CA", rm...); err != nil {
		t.Fatal(err)
	}
	if after := sha256File(t, "/etc/ssl/certs/ca-certificates.crt"); after != before {
		t.Errorf("the bundle after remove differs from before install")
	}
	if st, _ := h.Check(ctx, ca.CertPath(), ca.CertPEM, ca.SHA1()); st.Trusted {
		t.Errorf("still trusted after remove: %+v", st)
	}
	if _, err := exec.Command("openssl", "verify", "-CAfile", "/etc/ssl/certs/ca-certificates.crt", filepath.Join(work, "leaf.crt")).CombinedOutput(); err == nil {
		t.Error("the leaf still verifies against the bundle after remove")
	}
	if !strings.Contains(shown.String(), "marina runs these commands as root to trust the lab CA:\n  install -d -m 0755 /usr/local/share/ca-certificates") {
		t.Errorf("the commands were not shown first:\n%s", shown.String())
	}
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
