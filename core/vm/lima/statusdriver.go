package lima

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/lima-vm/lima/v2/pkg/driver"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/registry"
)

// statusDriver stands in, in marina's own process, for a Lima VM driver
// that lives in the engine (EngineName): Lima's store.Inspect asks the
// instance's driver for its status, and both drivers marina uses (qemu,
// vz) answer "" there, which makes Lima read the instance's PID files.
// statusDriver answers the same; every other method says the engine does
// it. Registering the real drivers here would link them (and their
// user-mode networking) into the marina binary.
type statusDriver struct{ name string }

// statusDriverTypes are the VM types marina creates (vz on macOS, qemu on
// Linux).
var statusDriverTypes = []limatype.VMType{limatype.VZ, limatype.QEMU}

var registerStatusOnce sync.Once

// registerStatusDrivers registers a statusDriver for each of
// statusDriverTypes not registered yet (in the engine the real drivers are,
// by their packages' init, and win). Lazily, at the first Inspect: marina's
// packages do no work at init.
func registerStatusDrivers(ctx context.Context) {
	registerStatusOnce.Do(func() {
		for _, name := range statusDriverTypes {
			registry.Register(ctx, statusDriver{name: string(name)})
		}
	})
}

func (d statusDriver) errEngine(what string) error {
	return fmt.Errorf("lima %s driver: %s runs in %s, not in marina", d.name, what, EngineName)
}

func (d statusDriver) Info(context.Context) driver.Info { return driver.Info{Name: d.name} }

// InspectStatus is what Lima's qemu and vz drivers answer: "" (Lima then
// reads the instance's PID files).
func (d statusDriver) InspectStatus(context.Context, *limatype.Instance) string { return "" }

func (d statusDriver) Validate(context.Context) error   { return d.errEngine("Validate") }
func (d statusDriver) Create(context.Context) error     { return d.errEngine("Create") }
func (d statusDriver) CreateDisk(context.Context) error { return d.errEngine("CreateDisk") }
func (d statusDriver) Start(context.Context) (chan error, error) {
	return nil, d.errEngine("Start")
}
func (d statusDriver) Stop(context.Context) error   { return d.errEngine("Stop") }
func (d statusDriver) Delete(context.Context) error { return d.errEngine("Delete") }
func (d statusDriver) BootScripts(context.Context) (map[string][]byte, error) {
	return nil, d.errEngine("BootScripts")
}
func (d statusDriver) RunGUI(context.Context) error { return d.errEngine("RunGUI") }
func (d statusDriver) ChangeDisplayPassword(context.Context, string) error {
	return d.errEngine("ChangeDisplayPassword")
}
func (d statusDriver) DisplayConnection(context.Context) (string, error) {
	return "", d.errEngine("DisplayConnection")
}
func (d statusDriver) CreateSnapshot(context.Context, string) error {
	return d.errEngine("CreateSnapshot")
}
func (d statusDriver) ApplySnapshot(context.Context, string) error {
	return d.errEngine("ApplySnapshot")
}
func (d statusDriver) DeleteSnapshot(context.Context, string) error {
	return d.errEngine("DeleteSnapshot")
}
func (d statusDriver) ListSnapshots(context.Context) (string, error) {
	return "", d.errEngine("ListSnapshots")
}
func (d statusDriver) ForwardGuestAgent(context.Context) bool { return false }
func (d statusDriver) GuestAgentConn(context.Context) (net.Conn, string, error) {
	return nil, "", d.errEngine("GuestAgentConn")
}
func (d statusDriver) Configure(context.Context, *limatype.Instance) (*driver.ConfiguredDriver, error) {
	return nil, d.errEngine("Configure")
}
func (d statusDriver) SSHAddress(context.Context) (string, error) {
	return "", d.errEngine("SSHAddress")
}
func (d statusDriver) AdditionalSetupForSSH(context.Context) error {
	return d.errEngine("AdditionalSetupForSSH")
}
