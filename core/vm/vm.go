// Package vm is the core's view of the machine that runs Docker: a Lima VM
// on macOS (driver "lima", in core/vm/lima) or this very machine (driver
// "host", on Linux). Everything above it — the bridge network, services,
// clusters — talks to the Docker endpoint a Driver reports, so the rest of
// marina does not care which driver is in use.
package vm

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
)

// LimaHome is marina's LIMA_HOME: ~/.marina/lima, one directory per
// instance (the lima driver's VM is the instance named vm.name).
func LimaHome(home string) string { return filepath.Join(home, ".marina", "lima") }

// State of the machine.
type State string

// The states.
const (
	// Absent: the VM does not exist (never for the host driver).
	Absent State = "absent"
	// Stopped: it exists but does not run, or Docker does not answer.
	Stopped State = "stopped"
	// Running: it runs and Docker answers.
	Running State = "running"
)

// Status is what a driver knows about its machine, without changing it.
type Status struct {
	// Driver is "lima" or "host".
	Driver string `json:"driver"`
	// Name is the VM's name (the config's vm.name).
	Name  string `json:"name"`
	State State  `json:"state"`
	// Detail explains a non-running state ("docker does not answer: ...").
	Detail string `json:"detail,omitempty"`
	// DockerHost is the Docker endpoint as seen from this machine.
	DockerHost string `json:"dockerHost,omitempty"`
	// GuestIP is the VM's address on the host-reachable network (lima0);
	// the route to the bridge points at it. Empty for the host driver.
	GuestIP string `json:"guestIP,omitempty"`
	// CPUs, Memory and Disk are the VM's resources as created.
	CPUs   int    `json:"cpus,omitempty"`
	Memory string `json:"memory,omitempty"`
	Disk   string `json:"disk,omitempty"`
	// Arch is the machine's architecture (GOARCH spelling).
	Arch string `json:"arch,omitempty"`
	// Drift lists config values that differ from what the VM was created
	// with, one "<key>: ..." line each: vm.cpus, vm.memory and vm.disk are
	// applied by `marina up` (a running VM after a restart), the others only
	// after `marina destroy && marina up`.
	Drift []string `json:"drift,omitempty"`
}

// Driver manages the machine that runs Docker.
type Driver interface {
	// Name is "lima" or "host".
	Name() string
	// Status inspects the machine without changing anything.
	Status(ctx context.Context) (Status, error)
	// Start creates the machine when absent and starts it when stopped;
	// on a running machine it changes nothing. progress receives
	// sub-status lines (may be nil).
	Start(ctx context.Context, progress func(string)) (Status, error)
	// Stop stops the machine, keeping everything in it.
	Stop(ctx context.Context) error
	// Delete removes the machine and everything in it.
	Delete(ctx context.Context) error
	// Exec runs argv (never a shell string) on the Docker host as root,
	// with stdin (may be nil), bounded by ctx, and returns its stdout; a
	// non-zero exit is an error carrying stderr.
	Exec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error)
	// Shell runs argv interactively on the Docker host with the given
	// streams (an interactive login shell when argv is empty).
	Shell(ctx context.Context, argv []string, in io.Reader, out, errOut io.Writer) error
}

// Resolve picks the driver name for the config's vm.driver: "auto" means
// lima on macOS and host elsewhere.
func Resolve(configured string) (string, error) {
	switch configured {
	case "", "auto":
		if runtime.GOOS == "darwin" {
			return "lima", nil
		}
		return "host", nil
	case "lima", "host":
		return configured, nil
	}
	return "", fmt.Errorf("vm.driver %q is not one of auto, lima, host", configured)
}
