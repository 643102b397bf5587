package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustCommands (issue 25): the lab CA through marina's commands.
// status before any CA; install --dry-run names exactly what would run;
// then, in a private mount namespace whose trust store is a copy (the
// machine's own never changes), install makes the CA and trusts it,
// status and doctor say so, rotate moves the trust to the new CA, and
// remove takes both out, leaving the bundle as it was.
func TestTrustCommands(t *testing.T) {
	home := t.TempDir()
	writeConfigFile(t, home, "vm: {name: trusty, driver: host}\n")
	var st trustStatus
	r := marina(t, home, nil, "trust", "status", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || st.Exists {
		t.Fatalf("status before any CA: %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "trust", "install", "--dry-run"); r.code != 2 || !strings.Contains(r.stderr, "without --dry-run, trust install creates it first") {
		t.Fatalf("install --dry-run without a CA: %d\n%s", r.code, r.stderr)
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the tests as root")
		}
		t.Skip("the rest needs root (a mount namespace)")
	}
	if _, err := os.Stat("/usr/sbin/update-ca-certificates"); err != nil {
		t.Fatalf("update-ca-certificates is needed (the ca-certificates package): %v", err)
	}
	work := t.TempDir()
	bundle := "/etc/ssl/certs/ca-certificates.crt"
	before, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	// One shell in a private mount namespace runs the sequence; each
	// marina call's output is delimited for the checks below.
	script := `set -e
for d in /etc/ssl/certs /usr/local/share/ca-certificates /etc/ca-certificates/update.d; do
  c="$WORK/copy$(echo $d | tr / _)"; mkdir -p "$c"
  [ "$d" = /etc/ca-certificates/update.d ] || cp -a "$d/." "$c"
  mount --bind "$c" "$d"
done
step() { echo "=== $*"; "$MARINA" "$@" 2>&1 || echo "exit $?"; }
step trust install --dry-run || true
step trust install
step trust status -o json
step doctor
step trust rotate
step trust status -o json
step trust remove
cp /etc/ssl/certs/ca-certificates.crt "$WORK/after.crt"
`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "WORK=" + work, "MARINA=" + marinaBin}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sequence in a mount namespace: %v\n%s", err, out)
	}
	steps := map[string]string{}
	for _, part := range strings.Split(string(out), "=== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		steps[name] += body
	}
	ca := filepath.Join(home, ".marina", "ca", "ca.crt")
	if s := steps["trust install --dry-run"]; !strings.Contains(s, "without --dry-run, trust install creates it first") {
		t.Errorf("install --dry-run:\n%s", s)
	}
	if s := steps["trust install"]; !strings.Contains(s, "marina runs these commands as root to trust the lab CA (valid only for demo.internal and 172.30.0.0/16)") ||
		!strings.Contains(s, "tee /usr/local/share/ca-certificates/marina-trusty-ca.crt") || !strings.Contains(s, "this machine trusts the lab CA "+ca) {
		t.Errorf("install:\n%s", s)
	}
	var first, second trustStatus
	statuses := strings.Split(steps["trust status -o json"], "\n{")
	if len(statuses) != 2 || json.Unmarshal([]byte(statuses[0]), &first) != nil || json.Unmarshal([]byte("{"+statuses[1]), &second) != nil {
		t.Fatalf("status outputs:\n%s", steps["trust status -o json"])
	}
	if !first.Exists || !first.Trusted || strings.Join(first.Domains, ",") != "demo.internal" || strings.Join(first.Ranges, ",") != "172.30.0.0/16" {
		t.Errorf("status after install: %+v", first)
	}
	if !second.Trusted || second.SHA256 == first.SHA256 {
		t.Errorf("status after rotate: %+v (before: %s)", second, first.SHA256)
	}
	if s := steps["doctor"]; !strings.Contains(s, "lab CA") || !strings.Contains(s, "trusted by this machine") {
		t.Errorf("doctor:\n%s", s)
	}
	if s := steps["trust rotate"]; !strings.Contains(s, "this machine trusts the new lab CA instead of the old one") {
		t.Errorf("rotate:\n%s", s)
	}
	if s := steps["trust remove"]; !strings.Contains(s, "this machine no longer trusts the lab CA") {
		t.Errorf("remove:\n%s", s)
	}
	after, err := os.ReadFile(filepath.Join(work, "after.crt"))
	if err != nil || string(after) != string(before) {
		t.Errorf("the bundle after remove is not the bundle before install (%v)", err)
	}
	if now, _ := os.ReadFile(bundle); string(now) != string(before) {
		t.Fatal("the machine's own bundle changed: the namespace leaked")
	}
}

// TestTrustImportKeychainIsMacOnly: on Linux the command refuses with a
// usage error that says what to do instead (the macOS argv and what is
// kept of security's output: hostnet.TestSystemKeychainCAs).
func TestTrustImportKeychainIsMacOnly(t *testing.T) {
	home := t.TempDir()
	writeConfigFile(t, home, "vm: {name: trusty, driver: host}\n")
	r := marina(t, home, nil, "trust", "import-keychain", "--dry-run")
	if r.code != 2 || !strings.Contains(r.stderr, "reads the macOS System keychain; elsewhere list your company's CA files in trust.extraCAs") {
		t.Errorf("import-keychain on Linux: exit %d\n%s", r.code, r.stderr)
	}
}
