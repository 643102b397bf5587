package limavm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
)

// EngineName is the program that holds Lima (package limaengine, built from
// cmd/marina-lima): everything marina's lima driver does that needs Lima
// runs there, one request at a time. Lima lives outside the marina binary
// for its weight: its VM drivers pull in user-mode networking
// (gvisor-tap-vsock, gopacket) whose package init alone would cost every
// marina command and every built-in plugin (docs/bench.md).
//
// On macOS the engine is also the program Lima re-executes as the VM's
// host agent (`marina-lima hostagent ...`), which drives
// Virtualization.framework: it is the binary signed with the
// virtualization entitlement.
const EngineName = "marina-lima"

// EngineArg is the engine's first argument for one request: a JSON
// EngineRequest on stdin, JSON EngineEvent lines on stdout.
const EngineArg = "engine"

// Engine operations: each runs the lima driver (core/vm/lima) in the
// engine for the request's config and options.
const (
	OpInfo       = "info"        // what the engine can run (vz, Lima's version)
	OpStatus     = "status"      // the VM's status
	OpUp         = "up"          // create and boot the VM, apply a resize (Start)
	OpDown       = "down"        // stop the VM
	OpDestroy    = "destroy"     // delete the VM
	OpPlanResize = "plan-resize" // the change of size the config asks of the VM
	OpSSHTarget  = "ssh-target"  // where the guest's SSH server answers
)

// EngineProtocol is the version of the request/event protocol between
// marina and marina-lima. Both sides check it: a marina and a marina-lima
// from different releases (one upgraded by `go install`, the other not)
// fail on the first request with an error that says so, rather than
// misreading each other. Bump it on any incompatible change.
const EngineProtocol = 2

// ErrEngineProtocol: marina and marina-lima speak different protocols.
var ErrEngineProtocol = errors.New("marina and marina-lima are from different releases")

// EngineRequest is one request to the engine.
type EngineRequest struct {
	// Protocol is EngineProtocol as marina knows it.
	Protocol int    `json:"protocol"`
	Op       string `json:"op"`
	// Home is the user's home directory: the VM's state lives under it
	// (LimaHome, ~/.marina/lima).
	Home string `json:"home,omitempty"`
	// Config is marina's effective configuration.
	Config *config.Config `json:"config,omitempty"`
	// Options are the driver's settings beyond the config.
	Options Options `json:"options,omitzero"`
}

// EngineEvent is one line the engine writes: a progress line, or the last
// line, the result.
type EngineEvent struct {
	// Protocol is the engine's EngineProtocol, on the result.
	Protocol int    `json:"protocol,omitempty"`
	Progress string `json:"progress,omitempty"`
	Done     bool   `json:"done,omitempty"`
	Error    string `json:"error,omitempty"`
	// Interrupted: the error is ErrStartInterrupted (the request's context
	// ended: the engine got SIGINT or SIGTERM).
	Interrupted bool `json:"interrupted,omitempty"`
	// Info's answer.
	VZ          bool   `json:"vz,omitempty"`
	LimaVersion string `json:"limaVersion,omitempty"`
	// Status: the VM's status (status, up).
	Status *vm.Status `json:"status,omitempty"`
	// Pending is what up left unapplied on a running VM (Options.Restart
	// unset), with the command that applies it.
	Pending string `json:"pending,omitempty"`
	// Resize is plan-resize's answer.
	Resize *Resize `json:"resize,omitempty"`
	// SSH is ssh-target's answer.
	SSH *SSHTarget `json:"ssh,omitempty"`
}

// SSHTarget is where the guest's SSH server is reachable: Lima's loopback
// forward of the running instance, with Lima's key for marina's LIMA_HOME,
// and the guest user to log in as.
type SSHTarget struct {
	Addr    string `json:"addr"`
	KeyFile string `json:"keyFile"`
	User    string `json:"user"`
}

// SpawnGrace is how long an interrupted start still waits for the host
// agent it may be spawning to announce itself (its PID file), so that it
// can say whether the VM keeps booting. Lima itself waits 5 s for that file.
const SpawnGrace = 6 * time.Second

// ErrStartInterrupted: a start stopped waiting because its context ended.
// Whether the VM keeps booting is in the message; the error also wraps the
// context's error.
var ErrStartInterrupted = errors.New("stopped waiting for the VM")

// ErrUnknownEngineOp: the request names no operation the engine knows.
var ErrUnknownEngineOp = errors.New("unknown engine operation")

// maxEngineLine bounds one line of the engine's output.
const maxEngineLine = 1 << 20

// engineStopGrace is how long an engine whose context was cancelled (it
// got SIGINT) has to answer before it is killed: an interrupted Start waits
// up to spawnGrace for the host agent's PID file.
const engineStopGrace = SpawnGrace + 10*time.Second

// engineDrain is how long, once the engine has exited, marina keeps reading
// what it wrote while a process it left behind still holds its output.
const engineDrain = 2 * time.Second

// engineError is a failure the engine reported.
type engineError struct {
	msg         string
	interrupted bool
	ctxErr      error
}

func (e *engineError) Error() string { return e.msg }

func (e *engineError) Unwrap() []error {
	var errs []error
	if e.interrupted {
		errs = append(errs, ErrStartInterrupted)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// enginePath finds the engine: exe when set (Driver.Executable), else
// next to the running marina (the real file a Homebrew symlink points to,
// then the symlink's directory), else on PATH.
func enginePath(exe string) (string, error) {
	if exe != "" {
		return exe, nil
	}
	var tried []string
	if self, err := os.Executable(); err == nil {
		dirs := []string{filepath.Dir(self)}
		if real, err := filepath.EvalSymlinks(self); err == nil && filepath.Dir(real) != dirs[0] {
			dirs = append([]string{filepath.Dir(real)}, dirs...)
		}
		for _, dir := range dirs {
			p := filepath.Join(dir, EngineName)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	if p, err := exec.LookPath(EngineName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s, marina's Lima engine (it boots, stops and deletes the VM), was not found at %s nor on PATH; it ships beside marina in every release: reinstall marina (brew reinstall marina), or build both with `make build`",
		EngineName, strings.Join(tried, " or "))
}

// runEngine sends req to the engine at exe and returns its result; the
// progress lines the engine forwards (Lima's log, the driver's steps) go to
// progress (may be nil). When ctx ends, the engine gets SIGINT (its request's context ends, as
// Lima's would have) and engineStopGrace to answer, then SIGKILL.
func runEngine(ctx context.Context, exe string, req EngineRequest, progress func(string)) (EngineEvent, error) {
	path, err := enginePath(exe)
	if err != nil {
		return EngineEvent{}, err
	}
	req.Protocol = EngineProtocol
	in, err := json.Marshal(req)
	if err != nil {
		return EngineEvent{}, err
	}
	cmd := exec.Command(path, EngineArg)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "LIMA_HOME="+vm.LimaHome(req.Home))
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	// stdout is a pipe marina owns rather than cmd.StdoutPipe: a process
	// the engine leaves running (the host agent it spawns, a stray child)
	// may hold the write end, so reading to EOF alone could wait forever.
	// Once the engine has exited, what it wrote is drained and the read
	// gives up after a short deadline; WaitDelay bounds stderr the same way.
	out, pw, err := os.Pipe()
	if err != nil {
		return EngineEvent{}, err
	}
	defer out.Close()
	cmd.Stdout = pw
	cmd.WaitDelay = engineDrain
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		return EngineEvent{}, fmt.Errorf("start %s: %w", path, err)
	}
	_ = pw.Close()
	waited := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		_ = out.SetReadDeadline(time.Now().Add(engineDrain))
		close(waited)
		exited <- err
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-waited:
			case <-time.After(engineStopGrace):
				_ = cmd.Process.Kill()
			}
		case <-waited:
		}
	}()
	var result *EngineEvent
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), maxEngineLine)
	for sc.Scan() {
		var ev EngineEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // not the engine's protocol: ignored, like any stray output
		}
		if ev.Progress != "" && progress != nil {
			progress(ev.Progress)
		}
		if ev.Done || ev.Error != "" {
			result = &ev
			break // the result is the engine's last line
		}
	}
	werr := <-exited
	switch {
	case result != nil && result.Protocol != EngineProtocol:
		return EngineEvent{}, fmt.Errorf("%w: %s speaks engine protocol %d, this marina %d; "+
			"install both from the same release (make install, the release archive or Homebrew: README, Install)",
			ErrEngineProtocol, path, result.Protocol, EngineProtocol)
	case result != nil && result.Error != "":
		return *result, &engineError{msg: result.Error, interrupted: result.Interrupted, ctxErr: ctx.Err()}
	case result != nil:
		return *result, nil
	case ctx.Err() != nil:
		return EngineEvent{}, fmt.Errorf("%s %s stopped (%w)", EngineName, req.Op, ctx.Err())
	default:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		return EngineEvent{}, fmt.Errorf("%s %s ended without a result (%v): %s", path, req.Op, werr, lastLines(msg, 10))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
