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
	return withProxy(prov, d.cfg)
}

// proxyEnv reads the environment the proxy's defaults come from (the
// engine runs with marina's); tests replace it.
var proxyEnv = os.Getenv

// withProxy gives prov the lab's effective proxy (config, else the
// environment), if any: apt, the downloads and the VM's Docker engine use
// it at every boot; none removes it.
func withProxy(prov limavm.Provision, cfg *config.Config) limavm.Provision {
	if p := cfg.EffectiveProxy(proxyEnv); p.Set() {
		prov.Proxy = &limavm.Proxy{HTTP: p.HTTP, HTTPS: p.HTTPS, NoProxy: strings.Join(p.NoProxy, ",")}
	}
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
