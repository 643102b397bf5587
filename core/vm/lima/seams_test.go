package lima

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limayaml"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/core/vm/limavm"
)

// Driver.Provision is what the VM is created with and what every boot
// keeps (the boot's refresh must not put the default back).
func TestDriverProvisionOverride(t *testing.T) {
	d, f := fakeDriver(t, nil)
	p := limavm.DefaultProvision()
	p.Binaries = nil
	p.Packages = []string{"curl"}
	d.Provision = &p
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	check := func(when string, b []byte) {
		t.Helper()
		s := string(b)
		if strings.Contains(s, "kind-linux") || strings.Contains(s, "command -v kind") || strings.Contains(s, "iptables") {
			t.Errorf("%s: lima.yaml has the default provisioning:\n%s", when, s)
		}
	}
	check("created", f.createdYAML)
	// A boot of the stopped VM refreshes the provisioning to Driver.Provision.
	f.inst.Status = limatype.StatusStopped
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "lima.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	check("after a boot", b)
	// Without the override, the next boot brings the default back.
	d.Provision = nil
	f.inst.Status = limatype.StatusStopped
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ = os.ReadFile(filepath.Join(f.dir, "lima.yaml")); !strings.Contains(string(b), "kind-linux") {
		t.Error("a boot without Driver.Provision kept the override")
	}
}

// TemplateOptions.Networks reach a qemu VM's lima.yaml (Lima names the
// first lima0); a vz VM keeps its vzNAT only.
func TestTemplateNetworks(t *testing.T) {
	nw := []limatype.Network{{Socket: "/run/marina-test/lima0.sock"}}
	y, err := Template(config.Default(), TemplateOptions{GOOS: "linux", GOARCH: "amd64", Home: testHome, Networks: nw})
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Networks) != 1 || y.Networks[0].Socket != nw[0].Socket {
		t.Errorf("qemu networks = %+v", y.Networks)
	}
	b, err := Render(y)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := limayaml.Load(context.Background(), b, "lima.yaml"); err != nil {
		t.Errorf("Lima does not load the template with a socket network: %v", err)
	}
	y, err = Template(config.Default(), TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome, Networks: nw})
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Networks) != 1 || y.Networks[0].VZNAT == nil || y.Networks[0].Socket != "" {
		t.Errorf("vz networks = %+v", y.Networks)
	}
}

func TestHasLima0(t *testing.T) {
	for _, tc := range []struct {
		name string
		nws  []limatype.Network
		want bool
	}{
		{"none", nil, false},
		{"socket", []limatype.Network{{Socket: "/tmp/lima0.sock"}}, true},
		{"lima network", []limatype.Network{{Lima: "user-v2"}}, true},
		{"vzNAT on a qemu VM", []limatype.Network{{VZNAT: ptr(true)}}, false},
	} {
		inst := &limatype.Instance{VMType: limatype.QEMU, Config: &limatype.LimaYAML{Networks: tc.nws}}
		if got := hasLima0(inst); got != tc.want {
			t.Errorf("%s: hasLima0 = %v, want %v", tc.name, got, tc.want)
		}
	}
	if hasLima0(&limatype.Instance{VMType: limatype.QEMU}) {
		t.Error("an instance without a configuration has no lima0")
	}
}

// TestTemplateProxy (issue 25): behind a corporate proxy (here from the
// environment marina runs in) the VM's provisioning carries it — apt and
// the Docker engine's drop-in, with the lab's NO_PROXY — from creation on,
// and a later boot's provisioning too; without one, none.
func TestTemplateProxy(t *testing.T) {
	old := proxyEnv
	t.Cleanup(func() { proxyEnv = old })
	proxyEnv = func(k string) string {
		return map[string]string{"HTTPS_PROXY": "http://proxy.corp.example:3128"}[k]
	}
	y, err := Template(config.Default(), TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome})
	if err != nil {
		t.Fatal(err)
	}
	script := y.Provision[0].Script
	for _, want := range []string{
		"/etc/systemd/system/docker.service.d/marina-proxy.conf",
		`Environment="HTTPS_PROXY=http://proxy.corp.example:3128"`,
		"NO_PROXY=localhost,127.0.0.1,::1,172.30.0.0/16,",
		"export 'HTTPS_PROXY=http://proxy.corp.example:3128' 'https_proxy=http://proxy.corp.example:3128'",
	} {
		if !strings.Contains(*script, want) {
			t.Errorf("the creation's provisioning lacks %q", want)
		}
	}
	d := &Driver{cfg: config.Default()}
	if p := d.provisionFor("lima"); p.Proxy == nil || p.Proxy.HTTPS != "http://proxy.corp.example:3128" {
		t.Errorf("a boot's provisioning: %+v", p.Proxy)
	}
	proxyEnv = func(string) string { return "" }
	if p := d.provisionFor("lima"); p.Proxy != nil {
		t.Errorf("without a proxy: %+v", p.Proxy)
	}
}

// TestTemplateExtraCAs (issue 25): trust.extraCAs reach the VM's trust
// store from creation on (and every boot's provisioning).
func TestTemplateExtraCAs(t *testing.T) {
	dir := t.TempDir()
	ca, err := labca.Create(dir, labca.Scope{Lab: "corp", Zone: "corp.example", Bridge: netip.MustParsePrefix("10.0.0.0/8")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Trust.ExtraCAs = []string{ca.CertPath()}
	y, err := Template(cfg, TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome})
	if err != nil {
		t.Fatal(err)
	}
	script := *y.Provision[0].Script
	if !strings.Contains(script, "marina-extra-cas.crt 0644 <<'MARINA_EOF'\n"+string(ca.CertPEM)+"MARINA_EOF") {
		t.Errorf("the creation's provisioning does not install the extra CA")
	}
	d := &Driver{cfg: cfg, home: testHome}
	if p := d.provisionFor("lima"); p.ExtraCAs != string(ca.CertPEM) {
		t.Errorf("a boot's provisioning: %q", p.ExtraCAs)
	}
}
