package lima

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	hostagentevents "github.com/lima-vm/lima/v2/pkg/hostagent/events"
	"github.com/lima-vm/lima/v2/pkg/instance"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"
	"github.com/lima-vm/lima/v2/pkg/store"
	"github.com/lima-vm/lima/v2/pkg/usrlocal"
	"github.com/lima-vm/lima/v2/pkg/version"
	"github.com/sirupsen/logrus"

	// Lima's qemu driver, on every platform (Lima's vmType on Linux).
	_ "github.com/lima-vm/lima/v2/pkg/driver/qemu"
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

// limaAPI is the part of Lima the driver uses; tests replace it.
type limaAPI interface {
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
}

// library is limaAPI on the real Lima packages, all under marina's LIMA_HOME.
type library struct{ limaHome string }

// limaHomeMu serialises the process-wide LIMA_HOME: Lima reads it from the
// environment on every call, and the host agent it spawns inherits it.
var limaHomeMu sync.Mutex

// with runs fn with LIMA_HOME set to marina's. One marina process uses one
// LIMA_HOME, so only setting it is serialised, not the (long) Lima calls.
func (l *library) with(fn func() error) error {
	limaHomeMu.Lock()
	if err := os.MkdirAll(l.limaHome, 0o700); err != nil {
		limaHomeMu.Unlock()
		return fmt.Errorf("create marina's Lima directory: %w", err)
	}
	err := os.Setenv("LIMA_HOME", l.limaHome)
	limaHomeMu.Unlock()
	if err != nil {
		return err
	}
	return fn()
}

func (l *library) Inspect(ctx context.Context, name string) (inst *limatype.Instance, err error) {
	err = l.with(func() error {
		inst, err = store.Inspect(ctx, name)
		return err
	})
	return inst, err
}

func (l *library) Create(ctx context.Context, name string, yaml []byte) (inst *limatype.Instance, err error) {
	err = l.with(func() error {
		inst, err = instance.Create(ctx, name, yaml, false)
		return err
	})
	return inst, err
}

// StartOptions are what Start passes on to Lima.
type StartOptions struct {
	// HostAgent is the program Lima runs as the host agent.
	HostAgent string
	// GuestAgent is Lima's guest agent binary.
	GuestAgent string
	// Timeout bounds the wait for the VM to come up (Lima's `limactl start
	// --timeout`); 0 means Lima's default (10 minutes).
	Timeout time.Duration
}

// spawnGrace is how long an interrupted Start still waits for the host agent
// it may be spawning to announce itself (its PID file), so that it can say
// whether the VM keeps booting. Lima itself waits 5 s for that file.
const spawnGrace = 6 * time.Second

// ErrStartInterrupted: Start stopped waiting because its context ended.
// Whether the VM keeps booting is in the message; the error also wraps the
// context's error.
var ErrStartInterrupted = errors.New("stopped waiting for the VM")

// Start runs Lima's start in two parts. Prepare (image download, disk) runs
// under ctx, so an interrupt there stops it and nothing is started. The host
// agent is then spawned under a context that is never cancelled, because
// Lima spawns it with exec.CommandContext: a cancelled context would SIGKILL
// it, hard-powering-off the VM (limactl passes its own never-cancelled
// command context). When ctx ends during the boot, Start returns at once and
// the VM keeps booting.
func (l *library) Start(ctx context.Context, inst *limatype.Instance, opts StartOptions) error {
	return l.with(func() error {
		if _, err := instance.Prepare(ctx, inst, opts.GuestAgent); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w %s before it started (%w); `marina up` starts it", ErrStartInterrupted, inst.Name, ctx.Err())
			}
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w %s before it started (%w); `marina up` starts it", ErrStartInterrupted, inst.Name, ctx.Err())
		}
		return startDetached(ctx, inst, opts, instance.StartWithPaths)
	})
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
	deadline := time.NewTimer(spawnGrace)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(pidFile); err == nil {
			return fmt.Errorf("%w %s (%w); it keeps booting in the background: `marina status` shows it, `marina up` waits for it",
				ErrStartInterrupted, inst.Name, ctx.Err())
		}
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			return nil
		case <-deadline.C:
			return fmt.Errorf("%w %s (%w); its host agent had not started: `marina status` shows the VM's state, `marina up` starts it",
				ErrStartInterrupted, inst.Name, ctx.Err())
		case <-tick.C:
		}
	}
}

func (l *library) WaitRunning(ctx context.Context, inst *limatype.Instance, timeout time.Duration) error {
	return l.with(func() error {
		return waitRunning(ctx, inst.Dir, timeout)
	})
}

// waitRunning reads the host agent's events (ha.stdout.log) from the
// beginning until one says the VM runs or the agent exits.
func waitRunning(ctx context.Context, instDir string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = instance.DefaultWatchHostAgentEventsTimeout
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
		return fmt.Errorf("%w (%w); it keeps booting in the background", ErrStartInterrupted, ctx.Err())
	default:
		return fmt.Errorf("the VM did not come up within %s (vm.startTimeout; see %s)", timeout, stderr)
	}
}

func (l *library) Stop(ctx context.Context, inst *limatype.Instance) error {
	return l.with(func() error { return instance.StopGracefully(ctx, inst, false) })
}

func (l *library) StopForcibly(ctx context.Context, inst *limatype.Instance) error {
	return l.with(func() error {
		instance.StopForcibly(inst)
		return nil
	})
}

func (l *library) Delete(ctx context.Context, inst *limatype.Instance) error {
	return l.with(func() error { return instance.Delete(ctx, inst, true) })
}

func (l *library) GuestAgent(guestOS limatype.OS, arch limatype.Arch) (string, error) {
	return usrlocal.GuestAgentBinary(guestOS, arch)
}

// captureLimaLogs routes Lima's log lines (logrus) to progress, instead of
// stderr, until the returned function restores the logger.
func captureLimaLogs(progress func(string)) (restore func()) {
	logger := logrus.StandardLogger()
	logLock.Lock()
	out, hooks := logger.Out, logger.ReplaceHooks(logrus.LevelHooks{})
	logger.SetOutput(io.Discard)
	if progress != nil {
		logger.AddHook(progressHook(progress))
	}
	return func() {
		logger.SetOutput(out)
		logger.ReplaceHooks(hooks)
		logLock.Unlock()
	}
}

var logLock sync.Mutex

type progressHook func(string)

func (h progressHook) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel, logrus.InfoLevel}
}

func (h progressHook) Fire(e *logrus.Entry) error {
	h(e.Message)
	return nil
}
