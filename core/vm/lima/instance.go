package lima

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lima-vm/lima/v2/pkg/instance"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"
	"github.com/lima-vm/lima/v2/pkg/store"
	"github.com/lima-vm/lima/v2/pkg/usrlocal"

	"github.com/bcollard/marina/core/vm/limavm"

	// Lima's qemu driver, on every platform (Lima's vmType on Linux).
	_ "github.com/lima-vm/lima/v2/pkg/driver/qemu"
)

// Library is API on Lima itself: its instance operations in this process,
// under the LIMA_HOME of the environment (the engine's request sets it).
type Library struct{}

func (l *Library) Inspect(ctx context.Context, name string) (*limatype.Instance, error) {
	return store.Inspect(ctx, name)
}

func (l *Library) Create(ctx context.Context, name string, yaml []byte) (*limatype.Instance, error) {
	return instance.Create(ctx, name, yaml, false)
}

// Start runs Lima's start in two parts. Prepare (image download, disk) runs
// under ctx, so an interrupt there stops it and nothing is started. The host
// agent is then spawned under a context that is never cancelled, because
// Lima spawns it with exec.CommandContext: a cancelled context would SIGKILL
// it, hard-powering-off the VM (limactl passes its own never-cancelled
// command context). When ctx ends during the boot, Start returns at once and
// the VM keeps booting.
func (l *Library) Start(ctx context.Context, inst *limatype.Instance, opts StartOptions) error {
	if _, err := instance.Prepare(ctx, inst, opts.GuestAgent); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w %s before it started (%w); `marina up` starts it", limavm.ErrStartInterrupted, inst.Name, ctx.Err())
		}
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w %s before it started (%w); `marina up` starts it", limavm.ErrStartInterrupted, inst.Name, ctx.Err())
	}
	return startDetached(ctx, inst, opts, instance.StartWithPaths)
}

// startFunc is instance.StartWithPaths' signature.
type startFunc func(ctx context.Context, inst *limatype.Instance, foreground, progress bool, hostAgent, guestAgent string) error

// startDetached calls start (Lima's StartWithPaths) under a never-cancelled
// context carrying opts.Timeout, and returns when it does or when ctx ends,
// whichever is first.
func startDetached(ctx context.Context, inst *limatype.Instance, opts StartOptions, start startFunc) error {
	spawnCtx := context.WithoutCancel(ctx)
	if opts.Timeout > 0 {
		spawnCtx = instance.WithWatchHostAgentTimeout(spawnCtx, opts.Timeout)
	}
	done := make(chan error, 1)
	go func() { done <- start(spawnCtx, inst, false, false, opts.HostAgent, opts.GuestAgent) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// The host agent may be being spawned right now: give it the time Lima
	// gives it to write its PID file, so the message below is true.
	pidFile := filepath.Join(inst.Dir, filenames.HostAgentPID)
	deadline := time.NewTimer(limavm.SpawnGrace)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(pidFile); err == nil {
			return fmt.Errorf("%w %s (%w); it keeps booting in the background: `marina status` shows it, `marina up` waits for it",
				limavm.ErrStartInterrupted, inst.Name, ctx.Err())
		}
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			return nil
		case <-deadline.C:
			return fmt.Errorf("%w %s (%w); its host agent had not started: `marina status` shows the VM's state, `marina up` starts it",
				limavm.ErrStartInterrupted, inst.Name, ctx.Err())
		case <-tick.C:
		}
	}
}

func (l *Library) Stop(ctx context.Context, inst *limatype.Instance) error {
	return instance.StopGracefully(ctx, inst, false)
}

func (l *Library) StopForcibly(ctx context.Context, inst *limatype.Instance) error {
	instance.StopForcibly(inst)
	return nil
}

func (l *Library) Delete(ctx context.Context, inst *limatype.Instance) error {
	return instance.Delete(ctx, inst, true)
}

func (l *Library) WaitRunning(ctx context.Context, inst *limatype.Instance, timeout time.Duration) error {
	return WaitRunning(ctx, inst.Dir, timeout)
}

// GuestAgent finds Lima's guest agent next to the running program.
func (l *Library) GuestAgent(guestOS limatype.OS, arch limatype.Arch) (string, error) {
	return usrlocal.GuestAgentBinary(guestOS, arch)
}

// VZ reports whether this engine has Lima's vz driver (a cgo build on macOS).
func (l *Library) VZ(context.Context) (bool, error) { return VZCompiled, nil }

var _ API = (*Library)(nil)
