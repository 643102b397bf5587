package lima

import (
	"os"
	"strings"

	"github.com/lima-vm/lima/v2/pkg/limatype"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm/limavm"
)

// provisionFor is the provisioning of a boot of the VM whose guest user is
// user: Driver.Provision when set, else DefaultProvision, with user owning
// the Docker socket.
func (d *Driver) provisionFor(user string) limavm.Provision {
	prov := limavm.DefaultProvision()
	if d.Provision != nil {
		prov = *d.Provision
		prov.Binaries = append([]limavm.Binary(nil), d.Provision.Binaries...)
	}
	prov.SocketUser = user
	return withCorporate(prov, d.cfg, d.home)
}

// proxyEnv reads the environment the proxy's defaults come from (the
// engine runs with marina's); tests replace it.
var proxyEnv = os.Getenv

// withCorporate gives prov what a corporate network needs: the lab's
// effective proxy (config, else the environment), which apt, the
// downloads and the VM's Docker engine use at every boot, and the extra
// CAs of trust.extraCAs (home expands ~/) for the VM's trust store. None
// of either removes it from the VM.
func withCorporate(prov limavm.Provision, cfg *config.Config, home string) limavm.Provision {
	if p := cfg.EffectiveProxy(proxyEnv); p.Set() {
		prov.Proxy = &limavm.Proxy{HTTP: p.HTTP, HTTPS: p.HTTPS, NoProxy: strings.Join(p.NoProxy, ",")}
	}
	// The config was validated when it was loaded: a file that has gone
	// bad since is left out (doctor and up report the config problem).
	cas, _ := cfg.ExtraCAs(home)
	prov.ExtraCAs = string(cas.PEM)
	return prov
}

// hasLima0 reports whether a qemu instance has a network beside Lima's
// user-mode one that the guest brings up as lima0 (a `socket:` or Lima
// network: TemplateOptions.Networks), the address the host routes the
// bridge to. (A vz VM always has one: vzNAT.)
func hasLima0(inst *limatype.Instance) bool {
	if inst.Config == nil {
		return false
	}
	for _, nw := range inst.Config.Networks {
		if nw.Socket != "" || nw.Lima != "" {
			return true
		}
	}
	return false
}
