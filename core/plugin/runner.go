package plugin

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
)

// procRunner is the go-plugin runner.Runner marina uses for every plugin. It
// differs from go-plugin's own command runner in what supervision needs:
//
//   - the plugin gets its own process group (and, on Linux, SIGTERM when
//     marina dies), so that killing the group also kills whatever the plugin
//     spawned;
//   - stdin is /dev/null: a plugin in a background process group that read
//     the terminal would be stopped by SIGTTIN;
//   - stdout and stderr are plain pipes and the process is reaped by a
//     goroutine of our own as soon as it exits, so marina learns that the
//     plugin exited even while a grandchild still holds the pipes open
//     (go-plugin only calls Wait after both pipes reach EOF);
//   - Kill signals the whole group, never just the direct pid.
type procRunner struct {
	path string
	args []string
	env  []string
	// token is the environment entry that names this plugin's socket dir
	// (PLUGIN_UNIX_SOCKET_DIR=...): every descendant that keeps its
	// environment carries it, which is how marina recognises the orphans
	// it adopted.
	token string

	stdoutR, stderrR *os.File
	stderrEOF        chan struct{}
	stderrOnce       sync.Once

	mu      sync.Mutex
	pid     int
	started bool
	refused bool // Kill came before Start: never start

	done    chan struct{} // closed when the direct process has been reaped
	waitErr error
	state   *os.ProcessState
}

var _ runner.Runner = (*procRunner)(nil)

func newProcRunner(path string, args, env []string, socketDir string) *procRunner {
	token := ""
	if socketDir != "" {
		token = goplugin.EnvUnixSocketDir + "=" + socketDir
	}
	return &procRunner{path: path, args: args, env: env, token: token, done: make(chan struct{}), stderrEOF: make(chan struct{})}
}

// Start starts the plugin process in its own process group.
func (r *procRunner) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused {
		return errors.New("start cancelled")
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return err
	}
	cmd := exec.Command(r.path, r.args...)
	cmd.Env = r.env
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	// The child has its own copies of the write ends; ours must be closed so
	// that the readers see EOF once every process holding them has exited.
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		return err
	}
	r.stdoutR, r.stderrR = outR, errR
	r.pid = cmd.Process.Pid
	r.started = true
	livePlugins.add(r.pid)
	go func() {
		err := cmd.Wait()
		livePlugins.remove(r.pid)
		r.mu.Lock()
		r.waitErr, r.state = err, cmd.ProcessState
		r.mu.Unlock()
		close(r.done)
	}()
	return nil
}

// livePlugins are the pids of the plugin processes marina started and has
// not reaped yet: a stop's process-tree walk skips the other plugins'
// subtrees (procTable).
var livePlugins = pidSet{pids: map[int]bool{}}

// pidSet is a set of pids safe for concurrent use.
type pidSet struct {
	mu   sync.Mutex
	pids map[int]bool
}

func (s *pidSet) add(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids[pid] = true
}

func (s *pidSet) remove(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pids, pid)
}

func (s *pidSet) has(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[pid]
}

// Wait blocks until the plugin process has exited and returns its exit error.
func (r *procRunner) Wait(context.Context) error {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitErr
}

// Kill sends SIGKILL to the plugin's process group. go-plugin calls it when
// the handshake fails; marina's own supervision (terminate) is gentler.
func (r *procRunner) Kill(context.Context) error {
	r.mu.Lock()
	if !r.started {
		r.refused = true
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	r.signalGroup(syscall.SIGKILL)
	return nil
}

// signalGroup sends sig to the plugin's process group; a group that is
// already gone is not an error.
func (r *procRunner) signalGroup(sig syscall.Signal) {
	r.mu.Lock()
	pid, started := r.pid, r.started
	r.mu.Unlock()
	if !started || pid <= 0 {
		return
	}
	// The group id is the plugin's pid (Setpgid with Pgid 0).
	_ = syscall.Kill(-pid, sig)
}

// Stdout returns the pipe go-plugin reads the handshake line from.
func (r *procRunner) Stdout() io.ReadCloser { return r.stdoutR }

// Stderr returns the plugin's stderr; EOF or a read error is recorded so
// that error reports can wait for the last lines to arrive.
func (r *procRunner) Stderr() io.ReadCloser { return &eofReader{File: r.stderrR, r: r} }

// Name is the executable's path.
func (r *procRunner) Name() string { return r.path }

// ID is the plugin's pid, or "" before it started.
func (r *procRunner) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return ""
	}
	return strconv.Itoa(r.pid)
}

// Diagnose adds nothing: marina maps start failures to its own messages.
func (r *procRunner) Diagnose(context.Context) string { return "" }

// PluginToHost returns the address unchanged (the plugin runs on this host).
func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin returns the address unchanged (the plugin runs on this host).
func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// isStarted reports whether the process was started.
func (r *procRunner) isStarted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// exited reports whether the direct process has exited and been reaped.
func (r *procRunner) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the direct process to exit.
func (r *procRunner) waitExit(d time.Duration) bool {
	if r.exited() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
		return false
	}
}

// exitState returns how the process ended ("exit status 3", "signal:
// killed"), or "" if it has not.
func (r *procRunner) exitState() string {
	if !r.exited() {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != nil {
		return r.state.String()
	}
	if r.waitErr != nil {
		return r.waitErr.Error()
	}
	return "exit status 0"
}

// waitStderr waits up to d for the plugin's stderr to reach EOF, so that
// an error report carries the last lines the plugin wrote.
func (r *procRunner) waitStderr(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.stderrEOF:
	case <-t.C:
	}
}

// closePipes closes marina's ends of the plugin's pipes, unblocking
// go-plugin's readers when a process that escaped the group still holds
// the other ends.
func (r *procRunner) closePipes() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stdoutR != nil {
		_ = r.stdoutR.Close()
	}
	if r.stderrR != nil {
		_ = r.stderrR.Close()
	}
}

// pgid returns the plugin's process group id (its pid), or 0.
func (r *procRunner) pgid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return 0
	}
	return r.pid
}

type eofReader struct {
	*os.File
	r *procRunner
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.File.Read(p)
	if err != nil {
		e.r.stderrOnce.Do(func() { close(e.r.stderrEOF) })
	}
	return n, err
}
