package lima

import (
	"strings"

	"github.com/lima-vm/lima/v2/pkg/limatype"
)

// provisionFor is the provisioning of a boot of the VM whose guest user is
// user: Driver.Provision when set, else DefaultProvision, with user owning
// the Docker socket.
func (d *Driver) provisionFor(user string) Provision {
	prov := DefaultProvision()
	if d.Provision != nil {
		prov = *d.Provision
		prov.Binaries = append([]Binary(nil), d.Provision.Binaries...)
	}
	prov.SocketUser = user
	return prov
}

// probe is the readiness probe of p: probe.sh's checks of the Docker
// engine, then one `command -v` per tool p installs (kind, kubectl by
// default, in that order: the probe of DefaultProvision is probe.sh as it
// is). A provisioning without tools (a test image that has Docker and
// nothing to download) waits for Docker only.
func (p Provision) probe() string {
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
