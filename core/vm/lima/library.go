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
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"
	"github.com/lima-vm/lima/v2/pkg/store"
	"github.com/lima-vm/lima/v2/pkg/usrlocal"
	"github.com/lima-vm/lima/v2/pkg/version"
	"github.com/sirupsen/logrus"
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
	// VZ reports whether Lima's vz driver can run (the engine was built
	// with cgo on macOS).
	VZ(ctx context.Context) (bool, error)
}

// library is limaAPI on the real Lima: what reads an instance runs here
// (Lima's store, its host agent's event log); what changes one runs in the
// engine (EngineName), all under marina's LIMA_HOME.
type library struct {
	limaHome string
	// exe is the engine to run (Driver.Executable, read at each call);
	// nil or "" finds it next to marina.
	exe func() string
}

func (l *library) engine() engineLima {
	e := engineLima{limaHome: l.limaHome}
	if l.exe != nil {
		e.exe = l.exe()
	}
	return e
}

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
	registerStatusDrivers(ctx)
	err = l.with(func() error {
		inst, err = store.Inspect(ctx, name)
		return err
	})
	return inst, err
}

// Create has the engine create the instance, then reads it.
func (l *library) Create(ctx context.Context, name string, yaml []byte) (*limatype.Instance, error) {
	if err := l.engine().create(ctx, name, yaml); err != nil {
		return nil, err
	}
	return l.Inspect(ctx, name)
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

// spawnGrace is how long an interrupted Start still waits for the host agent
// it may be spawning to announce itself (its PID file), so that it can say
// whether the VM keeps booting. Lima itself waits 5 s for that file.
const spawnGrace = 6 * time.Second

// SpawnGrace is spawnGrace for the engine.
const SpawnGrace = spawnGrace

// ErrStartInterrupted: Start stopped waiting because its context ended.
// Whether the VM keeps booting is in the message; the error also wraps the
// context's error.
var ErrStartInterrupted = errors.New("stopped waiting for the VM")

// Start has the engine run Lima's start (limaengine: Prepare under ctx,
// the host agent spawned under a context that is never cancelled). When
// ctx ends, the engine is interrupted: it returns at once and the VM keeps
// booting, as the error says.
func (l *library) Start(ctx context.Context, inst *limatype.Instance, opts StartOptions) error {
	return l.engine().start(ctx, inst, opts)
}

func (l *library) WaitRunning(ctx context.Context, inst *limatype.Instance, timeout time.Duration) error {
	return l.with(func() error {
		return waitRunning(ctx, inst.Dir, timeout)
	})
}

// defaultWaitRunning is Lima's default wait for a VM to come up
// (instance.DefaultWatchHostAgentEventsTimeout).
const defaultWaitRunning = 10 * time.Minute

// waitRunning reads the host agent's events (ha.stdout.log) from the
// beginning until one says the VM runs or the agent exits.
func waitRunning(ctx context.Context, instDir string, timeout time.Duration) error {
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
		return fmt.Errorf("%w (%w); it keeps booting in the background", ErrStartInterrupted, ctx.Err())
	default:
		return fmt.Errorf("the VM did not come up within %s (vm.startTimeout; see %s)", timeout, stderr)
	}
}

func (l *library) Stop(ctx context.Context, inst *limatype.Instance) error {
	return l.engine().stop(ctx, inst, OpStop)
}

func (l *library) StopForcibly(ctx context.Context, inst *limatype.Instance) error {
	return l.engine().stop(ctx, inst, OpStopForcibly)
}

func (l *library) Delete(ctx context.Context, inst *limatype.Instance) error {
	return l.engine().stop(ctx, inst, OpDelete)
}

// VZ reports whether the engine has Lima's vz driver (a cgo build on
// macOS).
func (l *library) VZ(ctx context.Context) (bool, error) {
	ev, err := l.engine().info(ctx)
	return ev.VZ, err
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
