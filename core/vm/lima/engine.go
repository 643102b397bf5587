package lima

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

	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/sirupsen/logrus"
)

// EngineName is the program that holds the parts of Lima that boot, stop
// and delete VMs and run their host agents (package limaengine, built from
// cmd/marina-lima). They live outside the marina binary because Go runs
// every linked package's init at start: Lima's VM drivers pull in
// user-mode networking (gvisor-tap-vsock, gopacket) whose init alone cost
// ~90 ms, paid by every marina command and every built-in plugin. marina
// runs the engine only to change the VM's state (`marina up`, `down`,
// `destroy`); status and inspection read Lima's files in-process.
//
// On macOS the engine is also the program Lima re-executes as the VM's
// host agent (`marina-lima hostagent ...`), which drives
// Virtualization.framework: it is the binary signed with the
// virtualization entitlement.
const EngineName = "marina-lima"

// EngineArg is the engine's first argument for one request: a JSON
// EngineRequest on stdin, JSON EngineEvent lines on stdout.
const EngineArg = "engine"

// Engine operations.
const (
	OpInfo         = "info"
	OpCreate       = "create"
	OpStart        = "start"
	OpStop         = "stop"
	OpStopForcibly = "stop-forcibly"
	OpDelete       = "delete"
)

// EngineProtocol is the version of the request/event protocol between
// marina and marina-lima. Both sides check it: a marina and a marina-lima
// from different releases (one upgraded by `go install`, the other not)
// fail on the first request with an error that says so, rather than
// misreading each other. Bump it on any incompatible change.
const EngineProtocol = 1

// ErrEngineProtocol: marina and marina-lima speak different protocols.
var ErrEngineProtocol = errors.New("marina and marina-lima are from different releases")

// EngineRequest is one request to the engine.
type EngineRequest struct {
	// Protocol is EngineProtocol as marina knows it.
	Protocol int    `json:"protocol"`
	Op       string `json:"op"`
	// LimaHome is marina's LIMA_HOME; the engine (and the host agent it
	// spawns) run under it.
	LimaHome string `json:"limaHome"`
	Instance string `json:"instance,omitempty"`
	// YAML is the instance's lima.yaml (create).
	YAML  []byte       `json:"yaml,omitempty"`
	Start StartOptions `json:"start,omitzero"`
}

// EngineEvent is one line the engine writes: a progress line (Lima's log),
// or the last line, the result.
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
}

// maxEngineLine bounds one line of the engine's output.
const maxEngineLine = 1 << 20

// engineStopGrace is how long an engine whose context was cancelled (it
// got SIGINT) has to answer before it is killed: an interrupted Start waits
// up to spawnGrace for the host agent's PID file.
const engineStopGrace = spawnGrace + 10*time.Second

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

// runEngine sends req to the engine at exe and returns its result. Lima's
// log lines the engine forwards are logged here through logrus at Info, so
// captureLimaLogs routes them as it did when Lima ran in this process.
// When ctx ends, the engine gets SIGINT (its request's context ends, as
// Lima's would have) and engineStopGrace to answer, then SIGKILL.
func runEngine(ctx context.Context, exe string, req EngineRequest) (EngineEvent, error) {
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
	cmd.Env = append(os.Environ(), "LIMA_HOME="+req.LimaHome)
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
		if ev.Progress != "" {
			logrus.Info(ev.Progress)
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

// engineLima is the part of limaAPI that changes a VM, run by the engine.
type engineLima struct {
	limaHome string
	// exe is the engine (Driver.Executable); "" finds it (enginePath).
	exe string
}

func (e engineLima) do(ctx context.Context, req EngineRequest) (EngineEvent, error) {
	req.LimaHome = e.limaHome
	return runEngine(ctx, e.exe, req)
}

func (e engineLima) create(ctx context.Context, name string, yaml []byte) error {
	_, err := e.do(ctx, EngineRequest{Op: OpCreate, Instance: name, YAML: yaml})
	return err
}

func (e engineLima) start(ctx context.Context, inst *limatype.Instance, opts StartOptions) error {
	_, err := e.do(ctx, EngineRequest{Op: OpStart, Instance: inst.Name, Start: opts})
	return err
}

func (e engineLima) stop(ctx context.Context, inst *limatype.Instance, op string) error {
	_, err := e.do(ctx, EngineRequest{Op: op, Instance: inst.Name})
	return err
}

// info asks the engine what it can run.
func (e engineLima) info(ctx context.Context) (EngineEvent, error) {
	return e.do(ctx, EngineRequest{Op: OpInfo})
}

// ErrUnknownEngineOp: the request names no operation the engine knows.
var ErrUnknownEngineOp = errors.New("unknown engine operation")
