// Package limaengine is marina's Lima engine: the lima driver (core/vm/lima,
// on Lima itself) and Lima's host agent, in their own program
// (limavm.EngineName, built from cmd/marina-lima) so that the marina binary
// links no Lima package. Lima's VM drivers pull in its user-mode networking
// (gvisor-tap-vsock, gopacket), whose package init alone would cost every
// marina command and every built-in plugin (docs/bench.md). marina's lima driver
// (core/vm/limavm) sends one limavm.EngineRequest per operation on stdin;
// the engine answers with limavm.EngineEvent lines on stdout (progress, then
// the result); SIGINT or SIGTERM ends the request's context, as Ctrl-C did
// when Lima ran inside marina.
//
// On macOS the engine is also Lima's host agent (`marina-lima hostagent
// ...`, RunHostAgent): it needs cgo and the
// com.apple.security.virtualization entitlement (the release signs it).
package limaengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/lima"
	"github.com/bcollard/marina/core/vm/limavm"
)

// maxRequest bounds the request read from stdin (a lima.yaml is a few KiB).
const maxRequest = 4 << 20

// Main runs the engine for args (os.Args[1:]) and returns the exit status:
// `hostagent ...` (Lima's host agent), `engine` (one request), `version`.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case lima.IsHostAgentInvocation(args):
		// Its context is never cancelled: SIGINT/SIGTERM reach the agent
		// through its own signal channel and shut the VM down cleanly.
		if err := RunHostAgent(context.Background(), args, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "%s hostagent: %v\n", limavm.EngineName, err)
			return exitcode.Failure
		}
		return exitcode.OK
	case len(args) == 1 && args[0] == limavm.EngineArg:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serve(ctx, stdin, stdout)
	case len(args) == 1 && (args[0] == "version" || args[0] == "--version"):
		fmt.Fprintf(stdout, "%s (Lima %s, vz %v)\n", limavm.EngineName, lima.LimaVersion, lima.VZCompiled)
		return exitcode.OK
	default:
		fmt.Fprintf(stderr, "%s is marina's Lima engine; marina runs it (`%s engine` with a JSON request on stdin, `%s hostagent ...` as Lima's host agent), not you.\n",
			limavm.EngineName, limavm.EngineName, limavm.EngineName)
		return exitcode.Usage
	}
}

// serve reads one request from stdin, runs it under ctx and writes Lima's
// log lines and the result to stdout. The exit status is 0 when the result
// was written (success or failure alike: the result says which).
func serve(ctx context.Context, stdin io.Reader, stdout io.Writer) int {
	w := &eventWriter{enc: json.NewEncoder(stdout)}
	var req limavm.EngineRequest
	b, err := io.ReadAll(io.LimitReader(stdin, maxRequest+1))
	switch {
	case err != nil:
		return w.result(nil, fmt.Errorf("read the request: %w", err))
	case len(b) > maxRequest:
		return w.result(nil, fmt.Errorf("the request is larger than %d bytes", maxRequest))
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return w.result(nil, fmt.Errorf("the request is not JSON: %w", err))
	}
	if req.Protocol != limavm.EngineProtocol {
		exe, _ := os.Executable()
		return w.result(nil, fmt.Errorf("%w: %s speaks engine protocol %d, the marina that ran it %d; "+
			"install both from the same release (make install, the release archive or Homebrew: README, Install)",
			limavm.ErrEngineProtocol, exe, limavm.EngineProtocol, req.Protocol))
	}
	if req.Op == limavm.OpInfo {
		return w.result(&limavm.EngineEvent{VZ: lima.VZCompiled, LimaVersion: lima.LimaVersion}, nil)
	}
	if req.Home == "" || req.Config == nil {
		return w.result(nil, fmt.Errorf("the %s request has no home directory or config", req.Op))
	}
	limaHome := vm.LimaHome(req.Home)
	if err := os.MkdirAll(limaHome, 0o700); err != nil {
		return w.result(nil, fmt.Errorf("create marina's Lima directory: %w", err))
	}
	// Lima reads LIMA_HOME from the environment; the host agent it spawns
	// inherits it.
	if err := os.Setenv("LIMA_HOME", limaHome); err != nil {
		return w.result(nil, err)
	}
	// Lima's log lines become progress lines.
	logger := logrus.StandardLogger()
	logger.SetOutput(io.Discard)
	logger.AddHook(progressHook{w})
	progress := func(s string) { w.write(limavm.EngineEvent{Progress: s}) }

	ev := &limavm.EngineEvent{}
	err = func() error {
		d := lima.New(req.Config, req.Home, &lima.Library{})
		d.Options = req.Options
		switch req.Op {
		case limavm.OpStatus:
			st, err := d.Status(ctx)
			ev.Status = &st
			return err
		case limavm.OpUp:
			st, err := d.Start(ctx, progress)
			if err != nil {
				return err
			}
			ev.Status, ev.Pending = &st, d.Pending()
			return nil
		case limavm.OpDown:
			return d.Stop(ctx)
		case limavm.OpDestroy:
			return d.Delete(ctx)
		case limavm.OpPlanResize:
			r, err := d.PlanResize(ctx)
			ev.Resize = &r
			return err
		case limavm.OpSSHTarget:
			t, err := d.SSHTarget(ctx)
			ev.SSH = &t
			return err
		}
		return fmt.Errorf("%w %q", limavm.ErrUnknownEngineOp, req.Op)
	}()
	return w.result(ev, err)
}

// eventWriter writes EngineEvent lines; Lima logs from several goroutines.
type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) write(ev limavm.EngineEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(ev)
}

// result writes the last line: ev (or an empty one) marked done, or err.
func (w *eventWriter) result(ev *limavm.EngineEvent, err error) int {
	out := limavm.EngineEvent{Done: true}
	if ev != nil {
		out = *ev
		out.Done = true
	}
	if err != nil {
		out = limavm.EngineEvent{Error: err.Error(), Interrupted: errors.Is(err, limavm.ErrStartInterrupted)}
	}
	out.Protocol = limavm.EngineProtocol
	w.write(out)
	return exitcode.OK
}

// progressHook sends Lima's log lines (Info and above) as progress.
type progressHook struct{ w *eventWriter }

func (h progressHook) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel, logrus.InfoLevel}
}

func (h progressHook) Fire(e *logrus.Entry) error {
	h.w.write(limavm.EngineEvent{Progress: e.Message})
	return nil
}
