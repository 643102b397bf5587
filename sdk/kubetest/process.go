package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// StopTimeout is how long cleanup waits for a process group to exit after SIGTERM
// before it sends SIGKILL, and again after SIGKILL before it reports the group as
// left behind.
const StopTimeout = 10 * time.Second

// process is one child process in its own process group, its output in a file.
type process struct {
	name    string
	pid     int // also the process group id (Setpgid)
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when Wait has returned
	waitErr error         // set before done is closed
	logFile *os.File
}

// startProcess starts path with args in a new process group (and, on Linux, with
// SIGKILL as its parent-death signal) with a minimal environment, stdout and
// stderr appended to logPath.
func startProcess(name, path string, args []string, dir, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	// Only what the binaries need: etcd reads any ETCD_* variable as a flag, and a
	// developer's environment must not change the test's cluster.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, logPath: logPath, cmd: cmd, done: make(chan struct{}), logFile: logFile}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited, with its exit error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, SIGKILL after timeout, waits for the
// process to be reaped and checks that no member of its group remains.
func (p *process) stop(timeout time.Duration) error {
	signalGroup(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		signalGroup(p.pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(timeout):
			return fmt.Errorf("%s (pid %d) still running %s after SIGKILL", p.name, p.pid, timeout)
		}
	}
	// The leader is reaped; other members of its group (none are expected) get
	// SIGKILL and a bounded wait.
	deadline := time.Now().Add(timeout)
	for {
		left, err := groupMembers(p.pid)
		if err != nil {
			return fmt.Errorf("%s: list process group %d: %w", p.name, p.pid, err)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: processes %v of its group %d still running %s after SIGKILL", p.name, left, p.pid, timeout)
		}
		signalGroup(p.pid, syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
}

// signalGroup signals every process of group pgid; a group already gone is fine.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	return tail(p.logPath, n)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// addressInUse reports whether the process's log says a port was taken, which
// Start answers by trying other ports.
func (p *process) addressInUse() bool {
	b, _ := os.ReadFile(p.logPath)
	return bytes.Contains(b, []byte("address already in use"))
}

var (
	portsMu sync.Mutex
	// portsGiven keeps two Starts in one test process from getting the same port
	// between the probe and the child's bind.
	portsGiven = map[int]bool{}
)

// freePorts returns n distinct free TCP ports on 127.0.0.1. Another process may
// take one before the child binds it; Start retries with new ports then.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100 {
			return nil, errors.New("no free port on 127.0.0.1 after 100 tries")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}
