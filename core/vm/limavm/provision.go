package limavm

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"

	"github.com/bcollard/marina/sdk"
)

// Provision is what the VM's provisioning script establishes. Lima runs the
// script as root on every boot, so every step first checks whether the VM
// already is in the wanted state and changes nothing when it is.
type Provision struct {
	// Sysctls are written to /etc/sysctl.d/99-marina.conf (the whole file is
	// replaced, never appended to) and applied when the file changes. The
	// provisioning is that file's one owner: every marina sysctl is here.
	Sysctls []Sysctl
	// Packages are apt packages installed when missing.
	Packages []string
	// DockerPackage names the Docker engine package; apt installs it when
	// missing (any version: see pins.go), and the version installed is
	// written to /var/lib/marina/versions.
	DockerPackage string
	// SocketUser owns /run/docker.sock (a docker.socket drop-in), so Lima
	// can forward the socket to the host as that user.
	SocketUser string
	// Binaries are downloaded into /usr/local/bin when missing or different,
	// and installed only when their SHA-256 matches.
	Binaries []Binary
	// Proxy, when set, is the corporate proxy the VM's traffic to the
	// outside takes: apt and the pinned downloads use it, and the Docker
	// engine gets it through a systemd drop-in
	// (docker.service.d/marina-proxy.conf; removed, and Docker restarted,
	// when the proxy goes away or changes).
	Proxy *Proxy
	// ExtraCAs are the company's CA certificates (trust.extraCAs), PEM:
	// installed in the VM's trust store (update-ca-certificates), so the
	// Docker engine, apt and curl accept a TLS-intercepting proxy; the
	// Docker engine is restarted when they change, and they are removed
	// when the list empties.
	ExtraCAs string
}

// Proxy is the VM's HTTP(S) proxy. NoProxy is comma-separated and holds
// the lab's own addresses (config.EffectiveProxy).
type Proxy struct {
	HTTP    string
	HTTPS   string
	NoProxy string
}

// Vars are the variables of p, upper- and lower-case, as KEY=VALUE
// (sdk.Proxy.Env).
func (p *Proxy) Vars() []string {
	var noProxy []string
	if p.NoProxy != "" {
		noProxy = strings.Split(p.NoProxy, ",")
	}
	return sdk.Proxy{HTTP: p.HTTP, HTTPS: p.HTTPS, NoProxy: noProxy}.Env()
}

// Sysctl is one kernel parameter.
type Sysctl struct {
	Key   string
	Value string
}

// Binary is a tool installed as /usr/local/bin/<Name>.
type Binary struct {
	Name    string
	Version string
	// Files holds the download of each architecture, keyed by its Debian
	// (and GOARCH) name: "amd64", "arm64".
	Files map[string]File
}

// File is one download, pinned by the SHA-256 of its content.
type File struct {
	URL    string
	SHA256 string
}

// DefaultProvision returns what marina provisions in its VM.
func DefaultProvision() Provision {
	return Provision{
		Sysctls: []Sysctl{
			// Many kind nodes each run many inotify users (kubelet, containerd).
			{Key: "fs.inotify.max_user_watches", Value: "524288"},
			{Key: "fs.inotify.max_user_instances", Value: "512"},
			// The host routes the bridge CIDR to the VM, which forwards it.
			{Key: "net.ipv4.ip_forward", Value: "1"},
		},
		Packages:      []string{"ca-certificates", "curl", "iptables"},
		DockerPackage: DockerPackage,
		SocketUser:    GuestUser,
		Binaries:      DefaultBinaries(),
	}
}

var (
	sysctlKeyRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_-]+)+$`) })
	sysctlValRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+( [0-9]+)*$`) })
	debPackageRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`) })
	userRe       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`) })
	binNameRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`) })
	httpsURLRe   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%+-]+)+$`)
	})
	sha256Re = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
	// proxyValRe: what a proxy URL or NO_PROXY list may hold to be written
	// in a systemd Environment= line and a shell export (quoted there).
	pemRe      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9+/=\n -]+$`) })
	proxyValRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._~%!$&'()*+,;=:@/?#\[\]-]+$`) })
	archRe     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(amd64|arm64)$`) })
)

// Validate checks every value that ends up in the script. Values are also
// quoted when rendered; validation keeps the script readable and makes a
// bad pin fail on the host, not half-way through a boot.
func (p Provision) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.ExtraCAs != "" && (!pemRe().MatchString(p.ExtraCAs) || !strings.HasPrefix(p.ExtraCAs, "-----BEGIN CERTIFICATE-----\n")) {
		bad("provision: extraCAs is not PEM certificates only")
	}
	if p.Proxy != nil {
		for _, v := range []struct{ name, val string }{{"proxy.http", p.Proxy.HTTP}, {"proxy.https", p.Proxy.HTTPS}, {"proxy.noProxy", p.Proxy.NoProxy}} {
			if v.val != "" && !proxyValRe().MatchString(v.val) {
				bad("provision: %s holds a character the VM's Docker drop-in cannot carry (a quote, backslash or space): percent-encode it in the URL", v.name)
			}
		}
	}
	seen := map[string]bool{}
	for i, s := range p.Sysctls {
		if !sysctlKeyRe().MatchString(s.Key) {
			bad("provision: sysctls[%d].key %q is not a sysctl name like net.ipv4.ip_forward", i, s.Key)
		}
		if !sysctlValRe().MatchString(s.Value) {
			bad("provision: sysctls[%d] %s: value %q is not numeric", i, s.Key, s.Value)
		}
		if seen[s.Key] {
			bad("provision: sysctl %s is listed twice", s.Key)
		}
		seen[s.Key] = true
	}
	for i, pkg := range p.Packages {
		if !debPackageRe().MatchString(pkg) {
			bad("provision: packages[%d] %q is not a Debian package name", i, pkg)
		}
	}
	if !debPackageRe().MatchString(p.DockerPackage) {
		bad("provision: docker package %q is not a Debian package name", p.DockerPackage)
	}
	if !userRe().MatchString(p.SocketUser) {
		bad("provision: socket user %q is not a user name", p.SocketUser)
	}
	names := map[string]bool{}
	for _, b := range p.Binaries {
		if !binNameRe().MatchString(b.Name) {
			bad("provision: binary name %q is not a plain file name", b.Name)
		}
		if names[b.Name] {
			bad("provision: binary %s is listed twice", b.Name)
		}
		names[b.Name] = true
		if len(b.Files) == 0 {
			bad("provision: binary %s has no downloads", b.Name)
		}
		for _, arch := range sortedKeys(b.Files) {
			f := b.Files[arch]
			if !archRe().MatchString(arch) {
				bad("provision: binary %s: architecture %q is not amd64 or arm64", b.Name, arch)
			}
			if !httpsURLRe().MatchString(f.URL) {
				bad("provision: binary %s %s: %q is not a plain https URL", b.Name, arch, f.URL)
			}
			if !sha256Re().MatchString(f.SHA256) {
				bad("provision: binary %s %s: sha256 %q is not 64 lower-case hex digits; fill it in core/vm/lima/pins.go from the checksum published next to %s",
					b.Name, arch, f.SHA256, f.URL)
			}
		}
	}
	return errors.Join(errs...)
}

//go:embed provision.sh.tmpl
var provisionTemplate string

// probeScript is Lima's readiness probe: Lima runs it as the guest user,
// retrying every few seconds (up to 10 minutes) until it succeeds, so it
// checks once and never sleeps. Lima's own start returns only after it
// passed, which means the Docker socket answers for the socket user.
//
//go:embed probe.sh
var probeScript string

var scriptTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("provision").
		Option("missingkey=error").
		Funcs(template.FuncMap{"q": Quote, "systemd": func(s string) string { return strings.ReplaceAll(s, "%", "%%") }}).
		Parse(provisionTemplate))
})

// Script renders the provisioning script (bash). It validates p first.
func (p Provision) Script() (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	type archBinary struct {
		Name string
		File File
	}
	type arch struct {
		Name     string
		Binaries []archBinary
	}
	byArch := map[string][]archBinary{}
	for _, b := range p.Binaries {
		for a, f := range b.Files {
			byArch[a] = append(byArch[a], archBinary{Name: b.Name, File: f})
		}
	}
	var arches []arch
	for _, a := range sortedKeys(byArch) {
		arches = append(arches, arch{Name: a, Binaries: byArch[a]})
	}
	var b bytes.Buffer
	err := scriptTmpl().Execute(&b, struct {
		Provision
		Arches []arch
	}{p, arches})
	if err != nil {
		return "", fmt.Errorf("render the provisioning script: %w", err)
	}
	return b.String(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Probe is the readiness probe of p: probe.sh's checks of the Docker
// engine, then one `command -v` per tool p installs (kind, kubectl by
// default, in that order: the probe of DefaultProvision is probe.sh as it
// is). A provisioning without tools (a test image that has Docker and
// nothing to download) waits for Docker only.
func (p Provision) Probe() string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(probeScript, "\n") {
		if !strings.HasPrefix(line, "command -v ") {
			b.WriteString(line)
		}
	}
	for _, bin := range p.Binaries {
		b.WriteString("command -v " + bin.Name + " >/dev/null\n") // a plain file name (Validate)
	}
	return b.String()
}
