// Package limavm is marina's lima driver as the marina program sees it. It
// links no Lima package (cmd/marina's TestImportGraph): whatever needs Lima —
// the VM's status, creating, booting, resizing, stopping and deleting it,
// the guest agent, the template — runs in marina-lima, marina's Lima engine
// (core/vm/lima, core/vm/lima/limaengine, built from cmd/marina-lima),
// which this package asks over the engine protocol (engine.go). Here live
// that protocol's client, the Driver that speaks it, the guest commands
// (SSH, with one reused connection), the route the VM's host agent keeps,
// and the types both programs share (the provisioning, images, resize).
package limavm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	units "github.com/docker/go-units"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/vm"
)

// GuestUser is the user Lima creates in a VM marina creates. It is pinned
// because Lima otherwise derives it from the host user name. A VM marina
// did not create (an adopted klimax VM) may have another: the engine says
// which (the SSH target).
const GuestUser = "lima"

// Image is one VM disk image for one architecture.
type Image struct {
	// Arch in GOARCH spelling: amd64 or arm64.
	Arch string `json:"arch"`
	// Location is the image URL (or a local path).
	Location string `json:"location"`
	// Digest pins the image content, e.g. sha256:<64 hex digits>; required.
	Digest string `json:"digest"`
}

// Network is an extra network of a qemu VM (Lima's networks: entry): a
// socket_vmnet-style socket, or a network of Lima's networks.yaml.
type Network struct {
	Socket string `json:"socket,omitempty"`
	Lima   string `json:"lima,omitempty"`
}

// Options are the lima driver's settings beyond the config; the zero
// value is what `marina` uses. Tests (test/vm) set them.
type Options struct {
	// GuestAgent is the Lima guest agent binary for the VM's architecture
	// (lima-guestagent.Linux-<arch>[.gz]). Empty means: look next to marina
	// (<prefix>/share/lima), in ~/.marina/share/lima, in Homebrew's Lima and
	// where `limactl info` says, and build it as a last resort.
	GuestAgent string `json:"guestAgent,omitempty"`
	// Images replaces the default images when the VM is created.
	Images []Image `json:"images,omitempty"`
	// Provision replaces DefaultProvision, when the VM is created and at
	// every boot; nil means the default. The VM test boots an image that
	// has everything installed with it.
	Provision *Provision `json:"provision,omitempty"`
	// Networks are extra networks of a qemu VM when it is created: the VM
	// test gives its VM a lima0 with one.
	Networks []Network `json:"networks,omitempty"`
	// Restart lets Start stop a running VM, apply a changed vm.cpus,
	// vm.memory or vm.disk, and start it again; unset, the change waits
	// (Pending). A stopped VM gets the change in any case.
	Restart bool `json:"restart,omitempty"`
}

// RegistryCacheDir is the host directory that keeps the pull-through
// registry caches when registries.cacheStorage is host. It is shared with
// the VM at the same path, so a bind mount of it means the same on both sides.
func RegistryCacheDir(home string) string {
	return filepath.Join(home, ".marina", "registry-cache")
}

// DockerSocket is the host end of the VM's Docker socket, which Lima
// forwards: ~/.<vm name>.docker.sock.
func DockerSocket(home, vmName string) string {
	return filepath.Join(home, "."+vmName+".docker.sock")
}

// Resize is the change of size (vm.cpus, vm.memory, vm.disk) the config asks
// of an existing VM: each pair is (the instance's lima.yaml, the config), and
// a pair whose two values are equal (by value: 10GiB = 10240MiB) is no change.
type Resize struct {
	CPUs   [2]int
	Memory [2]string
	Disk   [2]string
	// Running: the VM runs, so applying the change means a restart.
	Running bool
	// Provision: the VM's provisioning differs from the config's (the
	// proxy, trust.extraCAs, or this marina's pinned versions). Lima runs
	// it at boot, so a running VM takes it at its next start; a stopped
	// VM's is brought up to date before it boots.
	Provision bool `json:"provision,omitempty"`
}

// Empty reports whether nothing changes.
func (r Resize) Empty() bool {
	return r.CPUs[0] == r.CPUs[1] && SameSize(r.Memory[0], r.Memory[1]) && SameSize(r.Disk[0], r.Disk[1]) && !r.Provision
}

// String lists the changes: "cpus 4→6, memory 10GiB→12GiB".
func (r Resize) String() string {
	var parts []string
	if r.CPUs[0] != r.CPUs[1] {
		parts = append(parts, fmt.Sprintf("cpus %d→%d", r.CPUs[0], r.CPUs[1]))
	}
	if !SameSize(r.Memory[0], r.Memory[1]) {
		parts = append(parts, fmt.Sprintf("memory %s→%s", r.Memory[0], r.Memory[1]))
	}
	if !SameSize(r.Disk[0], r.Disk[1]) {
		parts = append(parts, fmt.Sprintf("disk %s→%s", r.Disk[0], r.Disk[1]))
	}
	if r.Provision {
		parts = append(parts, "provisioning (proxy, trust.extraCAs or pinned versions)")
	}
	return strings.Join(parts, ", ")
}

// RestartCommand is what applies a pending resize to a running VM.
const RestartCommand = "marina up --restart"

// Planned is what Start does with r: the change it applies ("" when none),
// and whether it restarts the running VM to do so. A stopped VM gets the
// change when Start boots it; a running one only when restart (Options.
// Restart) is set, else "": the change waits, and up reports it.
func (r Resize) Planned(restart bool) (change string, restarts bool) {
	if r.Empty() || (r.Running && !restart) {
		return "", false
	}
	return r.String(), r.Running
}

// Note says that the running VM vmName keeps its size and how to apply r;
// "" when r is Empty.
func (r Resize) Note(vmName string) string {
	if r.Empty() {
		return ""
	}
	return fmt.Sprintf("the VM %s keeps running as it is; the config's %s applies after a restart: %s (or marina down && marina up)",
		vmName, r, RestartCommand)
}

// SameSize reports whether two sizes (10GiB, 10240MiB) are equal by value.
func SameSize(a, b string) bool {
	if a == b {
		return true
	}
	x, errA := units.RAMInBytes(a)
	y, errB := units.RAMInBytes(b)
	return errA == nil && errB == nil && x == y
}

// RouteNoteFile, in the instance directory, is the route the VM's host
// agent keeps on the VM's address: written by `marina up` once the route
// is in place (KeepRoute), removed by `marina down --remove-route` and
// `marina destroy` (ForgetRoute). The host agent reads it before every
// look, so it needs no config of its own (it is started with the instance
// name only) and follows what the last `marina up` set.
const RouteNoteFile = "marina-route.json"

// RouteNote is the route to keep.
type RouteNote struct {
	// CIDR is the bridge network (network.bridgeCIDR).
	CIDR string `json:"cidr"`
	// OS is hostnet.Darwin or hostnet.Linux (which route commands).
	OS string `json:"os"`
}

func (d *Driver) instDir() string { return filepath.Join(vm.LimaHome(d.home), d.cfg.VM.Name) }

// KeepRoute tells the VM's host agent to keep the route for cidr on the
// VM's address (hostOS: hostnet.Darwin or hostnet.Linux). `marina up`
// calls it once the route is in place.
func (d *Driver) KeepRoute(cidr, hostOS string) error {
	if hostOS != hostnet.Darwin && hostOS != hostnet.Linux {
		return fmt.Errorf("keep route: host OS %q is not %q or %q", hostOS, hostnet.Darwin, hostnet.Linux)
	}
	b, err := json.Marshal(RouteNote{CIDR: cidr, OS: hostOS})
	if err != nil {
		return err
	}
	path := filepath.Join(d.instDir(), RouteNoteFile)
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("tell the host agent to keep the route (%s): %w", path, err)
	}
	return nil
}

// KeepingRoute reports whether the host agent is told to keep the route
// for cidr.
func (d *Driver) KeepingRoute(cidr string) bool {
	n, err := ReadRouteNote(d.instDir())
	return err == nil && n != nil && n.CIDR == cidr
}

// ForgetRoute tells the host agent to stop keeping the route (before it
// is removed, so the agent does not put it back).
func (d *Driver) ForgetRoute() error {
	err := os.Remove(filepath.Join(d.instDir(), RouteNoteFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ReadRouteNote returns the note, or (nil, nil) when there is none.
func ReadRouteNote(instDir string) (*RouteNote, error) {
	b, err := os.ReadFile(filepath.Join(instDir, RouteNoteFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n RouteNote
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", RouteNoteFile, err)
	}
	return &n, nil
}
