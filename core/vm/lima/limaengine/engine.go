// Package limaengine is marina's Lima engine: the parts of Lima that
// create, boot, stop and delete a VM and run its host agent, in their own
// program (lima.EngineName, built from cmd/marina-lima) so that the marina
// binary does not link them. Lima's VM drivers pull in its user-mode
// networking (gvisor-tap-vsock, gopacket), whose package init alone cost
// every marina command and every built-in plugin ~90 ms; marina starts the
// engine only to change the VM's state. The protocol is lima.EngineRequest
// on stdin, lima.EngineEvent lines on stdout (Lima's log lines as progress,
// then the result); SIGINT or SIGTERM ends the request's context, as
// Ctrl-C did when Lima ran inside marina.
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
	"github.com/bcollard/marina/core/vm/lima"
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
			fmt.Fprintf(stderr, "%s hostagent: %v\n", lima.EngineName, err)
			return exitcode.Failure
		}
		return exitcode.OK
	case len(args) == 1 && args[0] == lima.EngineArg:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serve(ctx, stdin, stdout)
	case len(args) == 1 && (args[0] == "version" || args[0] == "--version"):
		fmt.Fprintf(stdout, "%s (Lima %s, vz %v)\n", lima.EngineName, lima.LimaVersion, vzCompiled)
		return exitcode.OK
	default:
		fmt.Fprintf(stderr, "%s is marina's Lima engine; marina runs it (`%s engine` with a JSON request on stdin, `%s hostagent ...` as Lima's host agent), not you.\n",
			lima.EngineName, lima.EngineName, lima.EngineName)
		return exitcode.Usage
	}
}

// serve reads one request from stdin, runs it under ctx and writes Lima's
// log lines and the result to stdout. The exit status is 0 when the result
// was written (success or failure alike: the result says which).
func serve(ctx context.Context, stdin io.Reader, stdout io.Writer) int {
	w := &eventWriter{enc: json.NewEncoder(stdout)}
	var req lima.EngineRequest
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
	if req.Protocol != lima.EngineProtocol {
		exe, _ := os.Executable()
		return w.result(nil, fmt.Errorf("%w: %s speaks engine protocol %d, the marina that ran it %d; "+
			"install both from the same release (make install, the release archive or Homebrew: README, Install)",
			lima.ErrEngineProtocol, exe, lima.EngineProtocol, req.Protocol))
	}
	if req.LimaHome != "" {
		if err := os.MkdirAll(req.LimaHome, 0o700); err != nil {
			return w.result(nil, fmt.Errorf("create marina's Lima directory: %w", err))
		}
		// Lima reads LIMA_HOME from the environment; the host agent it
		// spawns inherits it.
		if err := os.Setenv("LIMA_HOME", req.LimaHome); err != nil {
			return w.result(nil, err)
		}
	}
	stampVersion()
	// Lima's log lines become progress lines.
	logger := logrus.StandardLogger()
	logger.SetOutput(io.Discard)
	logger.AddHook(progressHook{w})

	var l library
	var info *lima.EngineEvent
	err = func() error {
		switch req.Op {
		case lima.OpInfo:
			info = &lima.EngineEvent{VZ: vzCompiled, LimaVersion: lima.LimaVersion}
			return nil
		case lima.OpCreate:
			_, err := l.Create(ctx, req.Instance, req.YAML)
			return err
		}
		if req.Op != lima.OpStart && req.Op != lima.OpStop && req.Op != lima.OpStopForcibly && req.Op != lima.OpDelete {
			return fmt.Errorf("%w %q", lima.ErrUnknownEngineOp, req.Op)
		}
		inst, err := l.Inspect(ctx, req.Instance)
		if err != nil {
			return fmt.Errorf("inspect the Lima instance %s: %w", req.Instance, err)
		}
		switch req.Op {
		case lima.OpStart:
			opts := req.Start
			if opts.HostAgent == "" {
				if opts.HostAgent, err = os.Executable(); err != nil {
					return err
				}
			}
			return l.Start(ctx, inst, opts)
		case lima.OpStop:
			return l.Stop(ctx, inst)
		case lima.OpStopForcibly:
			return l.StopForcibly(ctx, inst)
		default:
			return l.Delete(ctx, inst)
		}
	}()
	return w.result(info, err)
}

// eventWriter writes EngineEvent lines; Lima logs from several goroutines.
type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) write(ev lima.EngineEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(ev)
}

// result writes the last line: ev (or an empty one) marked done, or err.
func (w *eventWriter) result(ev *lima.EngineEvent, err error) int {
	out := lima.EngineEvent{Done: true}
	if ev != nil {
		out = *ev
		out.Done = true
	}
	if err != nil {
		out = lima.EngineEvent{Error: err.Error(), Interrupted: errors.Is(err, lima.ErrStartInterrupted)}
	}
	out.Protocol = lima.EngineProtocol
	w.write(out)
	return exitcode.OK
}

// progressHook sends Lima's log lines (Info and above) as progress.
type progressHook struct{ w *eventWriter }

func (h progressHook) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel, logrus.InfoLevel}
}

func (h progressHook) Fire(e *logrus.Entry) error {
	h.w.write(lima.EngineEvent{Progress: e.Message})
	return nil
}
