package limavm

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"
)

func TestProvisionScriptGolden(t *testing.T) {
	s, err := DefaultProvision().Script()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/provision.sh", []byte(s))
	golden.Check(t, "testdata/probe.sh", []byte(probeScript))
}

func TestProvisionScriptsParse(t *testing.T) {
	s, err := DefaultProvision().Script()
	if err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{"provision": s, "probe": probeScript} {
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", name, err, out)
		}
	}
}

func TestProvisionValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Provision)
		want string
	}{
		{"sysctl injection", func(p *Provision) { p.Sysctls[0].Value = "1\nMARINA_EOF\nrm -rf /" }, "not numeric"},
		{"sysctl key", func(p *Provision) { p.Sysctls[0].Key = "a b" }, "sysctl name"},
		{"duplicate sysctl", func(p *Provision) { p.Sysctls = append(p.Sysctls, p.Sysctls[0]) }, "twice"},
		{"package", func(p *Provision) { p.Packages = append(p.Packages, "curl;reboot") }, "Debian package"},
		{"docker package", func(p *Provision) { p.DockerPackage = "docker.io;reboot" }, "Debian package"},
		{"socket user", func(p *Provision) { p.SocketUser = "root lima" }, "user name"},
		{"binary name", func(p *Provision) { p.Binaries[0].Name = "../kind" }, "plain file name"},
		{"url", func(p *Provision) {
			p.Binaries[0].Files["amd64"] = File{URL: "http://example.com/kind", SHA256: strings.Repeat("a", 64)}
		}, "https URL"},
		{"url with quote", func(p *Provision) {
			p.Binaries[0].Files["amd64"] = File{URL: "https://example.com/k'ind", SHA256: strings.Repeat("a", 64)}
		}, "https URL"},
		{"unfilled sha", func(p *Provision) {
			p.Binaries[1].Files["arm64"] = File{URL: "https://example.com/kubectl", SHA256: "TODO"}
		}, "fill it in core/vm/lima/pins.go"},
		{"arch", func(p *Provision) {
			p.Binaries[0].Files["riscv64"] = File{URL: "https://example.com/kind", SHA256: strings.Repeat("a", 64)}
		}, "amd64 or arm64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultProvision()
			tc.edit(&p)
			if _, err := p.Script(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Script() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// stubs are fake system commands the provisioning script calls; each logs
// its argv, one line per call, to $LOG.
var stubs = map[string]string{
	"apt-get": `echo "apt-get $*" >>"$LOG"
[ -z "${https_proxy:-}" ] || echo "apt-get sees https_proxy=$https_proxy" >>"$LOG"
[ "$1" = install ] || exit 0
[ -z "${APT_FAIL:-}" ] || exit 100
for a in "$@"; do
  case "$a" in -*|install) continue ;; esac
  name="${a%%=*}"; ver=1.0
  case "$a" in *=*) ver="${a#*=}" ;; esac
  printf '%s' "$ver" >"$STATE/$name"
done`,
	"dpkg-query": `echo "dpkg-query $*" >>"$LOG"
pkg="$3"; [ -f "$STATE/$pkg" ] || exit 1
case "$2" in
  '-f=${Status}') printf 'install ok installed' ;;
  '-f=${Version}') cat "$STATE/$pkg" ;;
  *) exit 2 ;;
esac`,
	"dpkg":                   `[ "$1" = --print-architecture ] && echo "$ARCH"`,
	"systemctl":              `echo "systemctl $*" >>"$LOG"; [ "$1" != is-active ] || [ -f "$STATE/docker-active" ]`,
	"sysctl":                 `echo "sysctl $*" >>"$LOG"`,
	"update-ca-certificates": `echo "update-ca-certificates $*" >>"$LOG"`,
	"curl": `echo "curl $*" >>"$LOG"
out=; url=
while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift 2 ;; *) url="$1"; shift ;; esac; done
f="$FIXTURES/${url##*/}"
[ -f "$f" ] || exit 22
cat "$f" >"$out"`,
}

type provisionRig struct {
	t                          *testing.T
	root, bin, state, fixtures string
	log                        string
}

func newProvisionRig(t *testing.T) *provisionRig {
	dir := t.TempDir()
	r := &provisionRig{t: t, root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"),
		state: filepath.Join(dir, "state"), fixtures: filepath.Join(dir, "fixtures"), log: filepath.Join(dir, "log")}
	for _, d := range []string{r.root, r.bin, r.state, r.fixtures} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(r.bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// fixture serves content as the download named name and returns its SHA-256.
func (r *provisionRig) fixture(name, content string) string {
	if err := os.WriteFile(filepath.Join(r.fixtures, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// run runs the script once and returns the commands it called and its output.
func (r *provisionRig) run(p Provision, arch string, env ...string) (calls []string, out string, err error) {
	r.t.Helper()
	script, err := p.Script()
	if err != nil {
		r.t.Fatal(err)
	}
	_ = os.Remove(r.log)
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append([]string{"PATH=" + r.bin + ":/usr/bin:/bin", "MARINA_PROVISION_ROOT=" + r.root,
		"LOG=" + r.log, "STATE=" + r.state, "FIXTURES=" + r.fixtures, "ARCH=" + arch}, env...)
	b, err := cmd.CombinedOutput()
	logged, _ := os.ReadFile(r.log)
	for _, l := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
		if l != "" && !strings.HasPrefix(l, "dpkg-query") {
			calls = append(calls, l)
		}
	}
	return calls, string(b), err
}

func (r *provisionRig) read(path string) string {
	b, err := os.ReadFile(filepath.Join(r.root, path))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func testProvision(r *provisionRig, kind, kubectl string) Provision {
	p := DefaultProvision()
	p.Binaries = []Binary{
		{Name: "kind", Files: map[string]File{
			"arm64": {URL: "https://example.test/dl/kind-linux-arm64", SHA256: r.fixture("kind-linux-arm64", kind)},
			"amd64": {URL: "https://example.test/dl/kind-linux-amd64", SHA256: r.fixture("kind-linux-amd64", "amd64 "+kind)},
		}},
		{Name: "kubectl", Files: map[string]File{
			"arm64": {URL: "https://example.test/dl/kubectl", SHA256: r.fixture("kubectl", kubectl)},
		}},
	}
	return p
}

func contains(calls []string, prefix string) bool {
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// TestProvisionScriptIdempotent runs the real script (bash) against a
// scratch root with stub system commands: the first run installs, the
// second changes nothing and calls neither apt nor curl.
func TestProvisionScriptIdempotent(t *testing.T) {
	r := newProvisionRig(t)
	// The sysctl file an older `marina up` wrote (its guest network step
	// owned it too, with ip_forward only) is replaced, not extended.
	if err := os.MkdirAll(filepath.Join(r.root, "etc/sysctl.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := "# managed by marina: `marina up` rewrites this file.\nnet.ipv4.ip_forward = 1\n"
	if err := os.WriteFile(filepath.Join(r.root, "etc/sysctl.d/99-marina.conf"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testProvision(r, "kind v1", "kubectl v1")

	calls, out, err := r.run(p, "arm64")
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	wantSysctl := "# managed by marina: the VM's provisioning rewrites this file at every boot.\n" +
		"fs.inotify.max_user_watches = 524288\nfs.inotify.max_user_instances = 512\nnet.ipv4.ip_forward = 1\n"
	if got := r.read("etc/sysctl.d/99-marina.conf"); got != wantSysctl {
		t.Errorf("sysctl file:\n%s\nwant:\n%s", got, wantSysctl)
	}
	if got := r.read("etc/systemd/system/docker.socket.d/override.conf"); got != "[Socket]\nSocketUser=lima\n" {
		t.Errorf("docker.socket drop-in:\n%s", got)
	}
	if got := r.read("usr/local/bin/kind"); got != "kind v1" {
		t.Errorf("kind = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(r.root, "usr/local/bin/kubectl")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("kubectl: %v %v", fi, err)
	}
	for _, want := range []string{
		"sysctl -q -p " + r.root + "/etc/sysctl.d/99-marina.conf",
		"systemctl daemon-reload",
		"apt-get update -qq",
		"apt-get install -y -q --no-install-recommends ca-certificates curl iptables docker.io",
		"curl -fsSL --retry 3 --proto =https -o",
	} {
		if !contains(calls, want) {
			t.Errorf("first run did not call %q; calls:\n%s", want, strings.Join(calls, "\n"))
		}
	}
	if contains(calls, "systemctl restart") {
		t.Errorf("restarted docker.socket although it was not active: %q", calls)
	}
	// The Docker version apt chose is recorded and printed (the stub apt
	// installs 1.0).
	if got := r.read("var/lib/marina/versions"); got != "docker.io=1.0\n" {
		t.Errorf("recorded versions = %q", got)
	}
	if !strings.Contains(out, "marina: docker.io 1.0\n") {
		t.Errorf("the Docker version was not printed:\n%s", out)
	}

	calls, out, err = r.run(p, "arm64")
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if len(calls) != 0 {
		t.Errorf("second run changed things; calls:\n%s\noutput:\n%s", strings.Join(calls, "\n"), out)
	}
	if got := r.read("etc/sysctl.d/99-marina.conf"); got != wantSysctl {
		t.Errorf("sysctl file after the second run:\n%s", got)
	}
	entries, _ := os.ReadDir(filepath.Join(r.root, "usr/local/bin"))
	if len(entries) != 2 {
		t.Errorf("usr/local/bin holds %d entries (leftover temp files?): %v", len(entries), entries)
	}

	// A new pin replaces exactly that tool; Docker, at whatever version
	// (here upgraded by the guest's own apt), is left alone and its new
	// version recorded; nothing else moves.
	p = testProvision(r, "kind v2", "kubectl v1")
	if err := os.WriteFile(filepath.Join(r.state, "docker.io"), []byte("29.2.0-0ubuntu1~24.04.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls, out, err = r.run(p, "arm64")
	if err != nil {
		t.Fatalf("upgrade run: %v\n%s", err, out)
	}
	if got := r.read("usr/local/bin/kind"); got != "kind v2" {
		t.Errorf("kind after the pin changed = %q", got)
	}
	if got := r.read("var/lib/marina/versions"); got != "docker.io=29.2.0-0ubuntu1~24.04.1\n" {
		t.Errorf("recorded versions after an upgrade = %q", got)
	}
	want := []string{"curl -fsSL --retry 3 --proto =https -o " + r.root + "/usr/local/bin/.kind."}
	if len(calls) != len(want) {
		t.Fatalf("upgrade run calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(calls[i], want[i]) {
			t.Errorf("upgrade call %d = %q, want %q...", i, calls[i], want[i])
		}
	}
}

func TestProvisionScriptRefusesBadDownloads(t *testing.T) {
	r := newProvisionRig(t)
	p := testProvision(r, "kind v1", "kubectl v1")
	if _, out, err := r.run(p, "arm64"); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	// The server now serves other bytes than the pin for a new version.
	p.Binaries[0].Files["arm64"] = File{URL: "https://example.test/dl/kind-linux-arm64", SHA256: strings.Repeat("0", 64)}
	_, out, err := r.run(p, "arm64")
	if err == nil || !strings.Contains(out, "refusing kind") || !strings.Contains(out, "pins.go") {
		t.Fatalf("mismatching download: err=%v\n%s", err, out)
	}
	if got := r.read("usr/local/bin/kind"); got != "kind v1" {
		t.Errorf("the refused download replaced kind: %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(r.root, "usr/local/bin"))
	if len(entries) != 2 {
		t.Errorf("the refused download left files: %v", entries)
	}
	// A failed download and an architecture without pins stop the script.
	p.Binaries[0].Files["arm64"] = File{URL: "https://example.test/dl/missing", SHA256: strings.Repeat("0", 64)}
	if _, out, err := r.run(p, "arm64"); err == nil || !strings.Contains(out, "downloading kind") {
		t.Errorf("failed download: err=%v\n%s", err, out)
	}
	if _, out, err := r.run(testProvision(r, "kind v1", "kubectl v1"), "s390x"); err == nil || !strings.Contains(out, "no pinned downloads for architecture s390x") {
		t.Errorf("unknown architecture: err=%v\n%s", err, out)
	}
}

func TestProvisionScriptAptFailure(t *testing.T) {
	r := newProvisionRig(t)
	_, out, err := r.run(testProvision(r, "k", "k"), "arm64", "APT_FAIL=1")
	if err == nil || !strings.Contains(out, "apt-get could not install ca-certificates curl iptables docker.io; see its output above") {
		t.Fatalf("apt failure: err=%v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(r.root, "usr/local/bin/kind")); err == nil {
		t.Error("the script went on after apt failed")
	}
}

func TestProvisionScriptRestartsActiveDockerSocket(t *testing.T) {
	r := newProvisionRig(t)
	if err := os.WriteFile(filepath.Join(r.state, "docker-active"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	calls, out, err := r.run(testProvision(r, "k", "k"), "arm64")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !contains(calls, "systemctl restart docker.socket docker.service") {
		t.Errorf("a new drop-in did not restart the active socket; calls:\n%s", strings.Join(calls, "\n"))
	}
}

func TestDefaultProbeIsProbeScript(t *testing.T) {
	if got := DefaultProvision().Probe(); got != probeScript {
		t.Errorf("the default provisioning's probe differs from probe.sh:\n%s", got)
	}
}

// A provisioning without tools (the VM test's image has Docker and needs no
// download) renders a script that downloads nothing and a probe that waits
// for Docker only.
func TestProvisionWithoutTools(t *testing.T) {
	p := DefaultProvision()
	p.Binaries = nil
	s, err := p.Script()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "\n    install_pinned ") || strings.Contains(s, "dpkg --print-architecture") || strings.Contains(s, "https://") {
		t.Errorf("a provisioning without tools still downloads:\n%s", s)
	}
	probe := p.Probe()
	if strings.Contains(probe, "command -v") || !strings.Contains(probe, "docker info") {
		t.Errorf("probe without tools:\n%s", probe)
	}
	for name, script := range map[string]string{"provision": s, "probe": probe} {
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", name, err, out)
		}
	}
}

// TestProvisionScriptProxy (issue 25): behind a corporate proxy the VM's
// apt (and downloads) run with it, and the Docker engine gets it through
// its own drop-in — percent signs escaped for systemd — restarting an
// engine that runs; nothing moves on the next boot; a proxy that goes away
// takes its drop-in with it.
func TestProvisionScriptProxy(t *testing.T) {
	r := newProvisionRig(t)
	if err := os.WriteFile(filepath.Join(r.state, "docker-active"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := testProvision(r, "k", "k")
	p.Proxy = &Proxy{HTTP: "http://proxy.corp.example:3128", HTTPS: "http://me:p%40ss@proxy.corp.example:3128", NoProxy: "localhost,172.30.0.0/16,demo.internal"}
	calls, out, err := r.run(p, "arm64")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "[Service]\n" +
		"Environment=\"HTTP_PROXY=http://proxy.corp.example:3128\"\nEnvironment=\"http_proxy=http://proxy.corp.example:3128\"\n" +
		"Environment=\"HTTPS_PROXY=http://me:p%%40ss@proxy.corp.example:3128\"\nEnvironment=\"https_proxy=http://me:p%%40ss@proxy.corp.example:3128\"\n" +
		"Environment=\"NO_PROXY=localhost,172.30.0.0/16,demo.internal\"\nEnvironment=\"no_proxy=localhost,172.30.0.0/16,demo.internal\"\n"
	if got := r.read("etc/systemd/system/docker.service.d/marina-proxy.conf"); got != want {
		t.Errorf("docker proxy drop-in:\n%s\nwant:\n%s", got, want)
	}
	for _, c := range []string{"systemctl restart docker.service", "apt-get sees https_proxy=http://me:p%40ss@proxy.corp.example:3128"} {
		if !contains(calls, c) {
			t.Errorf("calls lack %q:\n%s", c, strings.Join(calls, "\n"))
		}
	}
	if calls, out, err := r.run(p, "arm64"); err != nil || len(calls) != 0 {
		t.Errorf("second boot: %v, calls %q\n%s", err, calls, out)
	}
	p.Proxy = nil
	calls, out, err = r.run(p, "arm64")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(r.root, "etc/systemd/system/docker.service.d/marina-proxy.conf")); err == nil {
		t.Error("the proxy drop-in outlived the proxy")
	}
	if !contains(calls, "systemctl restart docker.service") {
		t.Errorf("removing the proxy did not restart the engine; calls:\n%s", strings.Join(calls, "\n"))
	}
	p.Proxy = &Proxy{HTTPS: "http://proxy:3128 \"x"}
	if _, err := p.Script(); err == nil || !strings.Contains(err.Error(), "provision: proxy.https") {
		t.Errorf("a proxy URL with a quote and a space: %v", err)
	}
}

// TestProvisionScriptExtraCAs (issue 25): the company's CAs go into the
// VM's trust store (update-ca-certificates), restarting a running Docker
// engine; a second boot changes nothing; an emptied list removes them.
func TestProvisionScriptExtraCAs(t *testing.T) {
	r := newProvisionRig(t)
	if err := os.WriteFile(filepath.Join(r.state, "docker-active"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := testProvision(r, "k", "k")
	p.ExtraCAs = "-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n"
	calls, out, err := r.run(p, "arm64")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := r.read("usr/local/share/ca-certificates/marina-extra-cas.crt"); got != p.ExtraCAs {
		t.Errorf("anchor file = %q", got)
	}
	for _, c := range []string{"update-ca-certificates", "systemctl restart docker.service"} {
		if !contains(calls, c) {
			t.Errorf("calls lack %q:\n%s", c, strings.Join(calls, "\n"))
		}
	}
	if calls, out, err := r.run(p, "arm64"); err != nil || len(calls) != 0 {
		t.Errorf("second boot: %v, calls %q\n%s", err, calls, out)
	}
	p.ExtraCAs = ""
	if calls, out, err = r.run(p, "arm64"); err != nil || !contains(calls, "update-ca-certificates") {
		t.Fatalf("emptied list: %v, calls %q\n%s", err, calls, out)
	}
	if _, err := os.Stat(filepath.Join(r.root, "usr/local/share/ca-certificates/marina-extra-cas.crt")); err == nil {
		t.Error("the anchor outlived the list")
	}
	p.ExtraCAs = "-----BEGIN CERTIFICATE-----\nMIIB\nMARINA_EOF\nrm -rf /\n"
	if _, err := p.Script(); err == nil || !strings.Contains(err.Error(), "extraCAs is not PEM") {
		t.Errorf("a heredoc breakout in extraCAs: %v", err)
	}
}
