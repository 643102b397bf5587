package limaengine

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lima-vm/lima/v2/pkg/driver"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/registry"
	"github.com/sirupsen/logrus"

	"github.com/bcollard/marina/core/vm/lima"
	"github.com/bcollard/marina/core/vm/limavm"
)

// testVMType is a Lima VM driver registered in Lima's own registry by the
// tests below, so that Lima's real start path (Prepare, the host agent
// spawn with exec.CommandContext, the event watch) and its real host agent
// run end to end with nothing but the VM itself replaced: the VM boundary.
const testVMType = "marina-test"

// testVM is that driver. It records the context its Stop got, which is what
// a clean shutdown runs under.
type testVM struct {
	mu      sync.Mutex
	inst    *limatype.Instance
	started chan struct{}
	stopErr error // ctx.Err() of the context Stop was given
	stopped chan struct{}
}

var theTestVM = &testVM{started: make(chan struct{}, 1), stopped: make(chan struct{}, 1)}

func init() { registry.Register(context.Background(), theTestVM) }

func (v *testVM) Validate(context.Context) error   { return nil }
func (v *testVM) Create(context.Context) error     { return nil }
func (v *testVM) CreateDisk(context.Context) error { return nil }
func (v *testVM) Start(ctx context.Context) (chan error, error) {
	select {
	case v.started <- struct{}{}:
	default:
	}
	return make(chan error), nil
}

func (v *testVM) Stop(ctx context.Context) error {
	v.mu.Lock()
	v.stopErr = ctx.Err()
	v.mu.Unlock()
	select {
	case v.stopped <- struct{}{}:
	default:
	}
	return nil
}
func (v *testVM) Delete(context.Context) error                             { return nil }
func (v *testVM) InspectStatus(context.Context, *limatype.Instance) string { return "" }
func (v *testVM) BootScripts(context.Context) (map[string][]byte, error)   { return nil, nil }
func (v *testVM) RunGUI(context.Context) error                             { return nil }
func (v *testVM) ChangeDisplayPassword(context.Context, string) error      { return nil }
func (v *testVM) DisplayConnection(context.Context) (string, error)        { return "", nil }
func (v *testVM) CreateSnapshot(context.Context, string) error             { return errors.ErrUnsupported }
func (v *testVM) ApplySnapshot(context.Context, string) error              { return errors.ErrUnsupported }
func (v *testVM) DeleteSnapshot(context.Context, string) error             { return errors.ErrUnsupported }
func (v *testVM) ListSnapshots(context.Context) (string, error)            { return "", errors.ErrUnsupported }
func (v *testVM) ForwardGuestAgent(context.Context) bool                   { return false }
func (v *testVM) GuestAgentConn(context.Context) (net.Conn, string, error) {
	return nil, "", errors.ErrUnsupported
}
func (v *testVM) SSHAddress(context.Context) (string, error)  { return "127.0.0.1", nil }
func (v *testVM) AdditionalSetupForSSH(context.Context) error { return nil }
func (v *testVM) Info(context.Context) driver.Info            { return driver.Info{Name: testVMType} }
func (v *testVM) Configure(_ context.Context, inst *limatype.Instance) (*driver.ConfiguredDriver, error) {
	v.mu.Lock()
	v.inst = inst
	v.mu.Unlock()
	return &driver.ConfiguredDriver{Driver: v}, nil
}

// testInstance writes a Lima instance of the test VM type under a scratch
// LIMA_HOME, as Lima would have created it (lima.yaml, lima-version, the
// downloaded image), and returns the lima.Library and the instance as Lima
// inspects it.
func testInstance(t *testing.T) (*lima.Library, *limatype.Instance) {
	t.Helper()
	// Short: the host agent's socket path must fit UNIX_PATH_MAX.
	home, err := os.MkdirTemp("", "mlt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	old, had := os.LookupEnv("LIMA_HOME")
	t.Cleanup(func() {
		if had {
			_ = os.Setenv("LIMA_HOME", old)
		} else {
			_ = os.Unsetenv("LIMA_HOME")
		}
	})
	lib := &lima.Library{}
	limaHome := filepath.Join(home, "lima")
	if err := os.Setenv("LIMA_HOME", limaHome); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(limaHome, "vm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	y := "vmType: " + testVMType + `
os: Linux
arch: ` + limatype.NewArch("amd64") + `
images:
- location: /nonexistent/image.img
cpus: 1
memory: 1GiB
disk: 10GiB
mounts: []
mountType: 9p
user:
  name: lima
  uid: 1000
containerd:
  system: false
  user: false
`
	for name, content := range map[string]string{"lima.yaml": y, "lima-version": lima.LimaVersion + "\n", "image": "not a real disk image"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inst, err := lib.Inspect(context.Background(), "vm")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != limatype.StatusStopped || len(inst.Errors) != 0 {
		t.Fatalf("the test instance is %q %v, want Stopped", inst.Status, inst.Errors)
	}
	return lib, inst
}

// fakeHostAgent writes a program that Lima can spawn as the host agent: it
// writes its PID file as the real one does, records every SIGINT/SIGTERM it
// gets, and otherwise waits (SIGKILL, which it cannot record, ends it).
func fakeHostAgent(t *testing.T, dir string) (agent, signals string) {
	t.Helper()
	agent, signals = filepath.Join(dir, "agent.sh"), filepath.Join(dir, "signals")
	script := `#!/bin/sh
# argv: hostagent --pidfile P --socket S [...] INSTANCE
pidfile=""
while [ $# -gt 0 ]; do
	case "$1" in --pidfile) pidfile="$2"; shift ;; esac
	shift
done
trap 'echo INT >>` + signals + `' INT
trap 'echo TERM >>` + signals + `' TERM
echo $$ >"$pidfile"
while :; do sleep 0.05; done
`
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return agent, signals
}

// agentPID waits for the host agent's PID file and returns the PID, and
// kills that process when the test ends.
func agentPID(t *testing.T, inst *limatype.Instance) int {
	t.Helper()
	path := filepath.Join(inst.Dir, "ha.pid")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no host agent PID file at %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	// A zombie (killed, not yet reaped by Lima's Wait) still accepts
	// signal 0; /proc says whether it is one.
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestStartInterruptedLeavesTheHostAgentRunning: cancelling the context of
// a start (Ctrl-C in `marina up`) while Lima waits for the boot returns at
// once, saying the VM keeps booting, and leaves the host agent Lima spawned
// running, unsignalled. (Lima spawns it with exec.CommandContext: the
// command's own context would SIGKILL it.)
func TestStartInterruptedLeavesTheHostAgentRunning(t *testing.T) {
	lib, inst := testInstance(t)
	agent, signals := fakeHostAgent(t, t.TempDir())
	ga := filepath.Join(t.TempDir(), "lima-guestagent")
	if err := os.WriteFile(ga, nil, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- lib.Start(ctx, inst, lima.StartOptions{HostAgent: agent, GuestAgent: ga, Timeout: time.Minute})
	}()
	pid := agentPID(t, inst)
	select {
	case err := <-errc:
		t.Fatalf("Start returned before the VM was up and before it was interrupted: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context was cancelled")
	}
	if !errors.Is(err, limavm.ErrStartInterrupted) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "keeps booting") {
		t.Errorf("Start after cancel = %v; want limavm.ErrStartInterrupted wrapping context.Canceled, saying the VM keeps booting", err)
	}
	// Give a kill (which Go's exec sends at once on cancel) time to land.
	time.Sleep(500 * time.Millisecond)
	if !alive(pid) {
		t.Fatalf("the host agent (pid %d) died when the start was interrupted", pid)
	}
	if b, _ := os.ReadFile(signals); len(b) != 0 {
		t.Errorf("the host agent got signals: %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// TestStartTimeoutReachesLima: lima.StartOptions.Timeout is the time Lima waits
// for the VM to report running (limactl start --timeout): a host agent that
// never reports gives up after it, not after Lima's 10 minutes.
func TestStartTimeoutReachesLima(t *testing.T) {
	lib, inst := testInstance(t)
	agent, _ := fakeHostAgent(t, t.TempDir())
	ga := filepath.Join(t.TempDir(), "lima-guestagent")
	if err := os.WriteFile(ga, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	errc := make(chan error, 1)
	go func() {
		errc <- lib.Start(context.Background(), inst, lima.StartOptions{HostAgent: agent, GuestAgent: ga, Timeout: 2 * time.Second})
	}()
	pid := agentPID(t, inst)
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not give up after its 2s timeout")
	}
	if err == nil || errors.Is(err, limavm.ErrStartInterrupted) || !strings.Contains(err.Error(), "running") {
		t.Errorf("Start with a silent host agent = %v; want Lima's `did not receive an event with the running status`", err)
	}
	if took := time.Since(begin); took < 2*time.Second {
		t.Errorf("gave up after %s, before the 2s timeout", took)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// TestStartInterruptedBeforeTheSpawn: interrupted while Lima still
// prepares (here: before Start is even called), nothing is spawned and the
// error says so.
func TestStartInterruptedBeforeTheSpawn(t *testing.T) {
	lib, inst := testInstance(t)
	agent, _ := fakeHostAgent(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := lib.Start(ctx, inst, lima.StartOptions{HostAgent: agent, GuestAgent: agent})
	if !errors.Is(err, limavm.ErrStartInterrupted) || !strings.Contains(err.Error(), "before it started") {
		t.Errorf("Start on a cancelled context = %v", err)
	}
	if _, err := os.Stat(filepath.Join(inst.Dir, "ha.pid")); !os.IsNotExist(err) {
		t.Errorf("a host agent was spawned: %v", err)
	}
}

// TestRunHostAgentShutsDownOnASignalNotOnItsContext runs marina's host
// agent entry point (Lima's real host agent) for the test VM: cancelling the
// context it was given does not stop the VM, and SIGINT (what Lima's
// graceful stop sends) stops it under a live context, so the driver can
// shut the guest down instead of killing it.
func TestRunHostAgentShutsDownOnASignalNotOnItsContext(t *testing.T) {
	_, inst := testInstance(t)
	ga := filepath.Join(t.TempDir(), "lima-guestagent")
	if err := os.WriteFile(ga, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for len(theTestVM.started) > 0 {
		<-theTestVM.started
	}
	for len(theTestVM.stopped) > 0 {
		<-theTestVM.stopped
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"hostagent", "--pidfile", filepath.Join(inst.Dir, "ha.pid"), "--socket", filepath.Join(inst.Dir, "ha.sock"),
		"--guestagent", ga, inst.Name}
	stdout, err := os.Create(filepath.Join(inst.Dir, "ha.stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(inst.Dir, "ha.stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	// RunHostAgent points the process's logger at stderr, as JSON; the
	// agent's goroutines may still log after it returned.
	t.Cleanup(func() {
		logrus.SetOutput(os.Stderr)
		logrus.SetFormatter(new(logrus.TextFormatter))
		logrus.SetLevel(logrus.InfoLevel)
		_ = stdout.Close()
		_ = stderr.Close()
	})
	errc := make(chan error, 1)
	go func() { errc <- RunHostAgent(ctx, args, stdout, stderr) }()
	select {
	case <-theTestVM.started:
	case err := <-errc:
		b, _ := os.ReadFile(stderr.Name())
		t.Fatalf("the host agent ended before starting the VM: %v\n%s", err, b)
	case <-time.After(60 * time.Second):
		t.Fatal("the host agent did not start the VM")
	}

	cancel()
	select {
	case err := <-errc:
		t.Fatalf("the host agent ended when its context was cancelled: %v", err)
	case <-theTestVM.stopped:
		t.Fatal("the VM was stopped when the host agent's context was cancelled")
	case <-time.After(time.Second):
	}

	// What Lima's graceful stop does: SIGINT to the host agent. RunHostAgent
	// has it on its signal channel, so this process is not interrupted.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-theTestVM.stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("SIGINT did not stop the VM")
	}
	theTestVM.mu.Lock()
	stopErr := theTestVM.stopErr
	theTestVM.mu.Unlock()
	if stopErr != nil {
		t.Errorf("the VM was stopped under a dead context (%v): no clean shutdown", stopErr)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("RunHostAgent after SIGINT = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the host agent did not exit after stopping the VM")
	}
	if _, err := os.Stat(filepath.Join(inst.Dir, "ha.pid")); !os.IsNotExist(err) {
		t.Errorf("the PID file is left behind: %v", err)
	}
}
