package lima

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/lima-vm/lima/v2/pkg/instance"
	"github.com/lima-vm/lima/v2/pkg/limatype"
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
	// probes passed; hostAgent is the program Lima runs as the host agent.
	Start(ctx context.Context, inst *limatype.Instance, hostAgent, guestAgent string) error
	Stop(ctx context.Context, inst *limatype.Instance) error
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

func (l *library) Start(ctx context.Context, inst *limatype.Instance, hostAgent, guestAgent string) error {
	return l.with(func() error {
		return instance.StartWithPaths(ctx, inst, false, false, hostAgent, guestAgent)
	})
}

func (l *library) Stop(ctx context.Context, inst *limatype.Instance) error {
	return l.with(func() error { return instance.StopGracefully(ctx, inst, false) })
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
