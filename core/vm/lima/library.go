package lima

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	hostagentevents "github.com/lima-vm/lima/v2/pkg/hostagent/events"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"
	"github.com/lima-vm/lima/v2/pkg/version"

	"github.com/bcollard/marina/core/vm/limavm"
)

// LimaVersion is the Lima library marina is built with (go.mod pins it).
const LimaVersion = "v2.2.0"

func init() {
	// Lima stamps this into every instance it creates (lima-version) and
	// compares it on start; a library build would otherwise say <unknown>.
	if version.Version == "" || version.Version == "<unknown>" {
		version.Version = LimaVersion
	}
}

// API is the part of Lima the driver uses: Lima itself in the engine
// (limaengine), a fake in tests.
type API interface {
	// Inspect returns the instance; an error wrapping fs.ErrNotExist means
	// there is none.
	Inspect(ctx context.Context, name string) (*limatype.Instance, error)
	Create(ctx context.Context, name string, yaml []byte) (*limatype.Instance, error)
	// Start boots a stopped instance and returns once Lima's readiness
	// probes passed. The host agent it spawns outlives ctx: cancelling ctx
	// only stops the wait (the error wraps ctx.Err()), never the VM.
	Start(ctx context.Context, inst *limatype.Instance, opts StartOptions) error
	// WaitRunning waits until the host agent of a running instance reports
	// the VM up (or exiting), e.g. for a boot an interrupted Start left
	// going; it returns at once for a VM that finished booting long ago.
	WaitRunning(ctx context.Context, inst *limatype.Instance, timeout time.Duration) error
	// Stop shuts a running instance down gracefully.
	Stop(ctx context.Context, inst *limatype.Instance) error
	// StopForcibly kills what is left of an instance (Lima's `limactl stop
	// -f`): its driver and host agent processes, and their stale files.
	StopForcibly(ctx context.Context, inst *limatype.Instance) error
	Delete(ctx context.Context, inst *limatype.Instance) error
	// GuestAgent finds Lima's guest agent next to the running program.
	GuestAgent(guestOS limatype.OS, arch limatype.Arch) (string, error)
	// VZ reports whether Lima's vz driver can run (the engine was built
	// with cgo on macOS).
	VZ(ctx context.Context) (bool, error)
}

// StartOptions are what Start passes on to Lima.
type StartOptions struct {
	// HostAgent is the program Lima runs as the host agent; "" means the
	// engine itself.
	HostAgent string `json:"hostAgent,omitempty"`
	// GuestAgent is Lima's guest agent binary.
	GuestAgent string `json:"guestAgent,omitempty"`
	// Timeout bounds the wait for the VM to come up (Lima's `limactl start
	// --timeout`); 0 means Lima's default (10 minutes).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// defaultWaitRunning is Lima's default wait for a VM to come up
// (instance.DefaultWatchHostAgentEventsTimeout).
const defaultWaitRunning = 10 * time.Minute

// WaitRunning reads the host agent's events (ha.stdout.log) from the
// beginning until one says the VM runs or the agent exits.
func WaitRunning(ctx context.Context, instDir string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = defaultWaitRunning
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var result error
	seen := false
	stdout, stderr := filepath.Join(instDir, filenames.HostAgentStdoutLog), filepath.Join(instDir, filenames.HostAgentStderrLog)
	err := hostagentevents.Watch(wctx, stdout, stderr, time.Time{}, false, func(ev hostagentevents.Event) bool {
		switch {
		case ev.Status.Exiting:
			seen, result = true, fmt.Errorf("the VM's host agent is exiting (see %s)", stderr)
		case ev.Status.Running && ev.Status.Degraded:
			seen, result = true, fmt.Errorf("the VM runs degraded: %v (see %s)", ev.Status.Errors, stderr)
		case ev.Status.Running:
			seen = true
		}
		return seen
	})
	switch {
	case err != nil:
		return err
	case seen:
		return result
	case ctx.Err() != nil:
		return fmt.Errorf("%w (%w); it keeps booting in the background", limavm.ErrStartInterrupted, ctx.Err())
	default:
		return fmt.Errorf("the VM did not come up within %s (vm.startTimeout; see %s)", timeout, stderr)
	}
}
