package limavm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
)

// Driver is the lima driver (vm.Driver) for marina's Lima VM: every
// operation that needs Lima is one request to the engine (EngineName);
// guest commands run over SSH from this process, on one reused connection.
type Driver struct {
	Options
	// Executable is marina's Lima engine (EngineName); empty means the one
	// next to this program (enginePath), else on PATH.
	Executable string
	// ExecTimeout bounds Exec when ctx has no deadline (default 2 minutes).
	ExecTimeout time.Duration

	cfg   *config.Config
	home  string
	guest *Guest
	// target is where the VM's SSH server answers (the engine says; tests
	// replace it).
	target func(ctx context.Context) (SSHTarget, error)
	// pending is what the last Start left unapplied on a running VM.
	pending string
}

var _ vm.Driver = (*Driver)(nil)

// New returns the lima driver for cfg (a loaded, validated config) and the
// user's home directory home, under which the VM's state lives
// (~/.marina/lima, Lima's LIMA_HOME for marina).
func New(cfg *config.Config, home string) *Driver {
	d := &Driver{cfg: cfg, home: home}
	d.target = d.sshTarget
	d.guest = NewGuest(func(ctx context.Context) (SSHTarget, error) { return d.target(ctx) })
	return d
}

// Name returns "lima".
func (d *Driver) Name() string { return "lima" }

// request runs op in the engine for this driver's config and options.
func (d *Driver) request(ctx context.Context, op string, progress func(string)) (EngineEvent, error) {
	return runEngine(ctx, d.Executable, EngineRequest{Op: op, Home: d.home, Config: d.cfg, Options: d.Options}, progress)
}

// status is the status an answer carries.
func status(ev EngineEvent, op string) (vm.Status, error) {
	if ev.Status == nil {
		return vm.Status{}, fmt.Errorf("%s %s answered without the VM's status", EngineName, op)
	}
	return *ev.Status, nil
}

// Status inspects the VM without changing it.
func (d *Driver) Status(ctx context.Context) (vm.Status, error) {
	ev, err := d.request(ctx, OpStatus, nil)
	if err != nil {
		return vm.Status{}, err
	}
	return status(ev, OpStatus)
}

// Start creates the VM when absent and boots it when stopped, applying a
// changed size (a running VM only with Options.Restart), and returns once
// Docker answers. progress receives Lima's progress lines. Cancelling ctx
// stops the wait, never the VM: the error (which wraps ctx.Err() and
// ErrStartInterrupted) says so.
func (d *Driver) Start(ctx context.Context, progress func(string)) (vm.Status, error) {
	ev, err := d.request(ctx, OpUp, progress)
	if err != nil {
		return vm.Status{}, err
	}
	d.pending = ev.Pending
	return status(ev, OpUp)
}

// Pending is what the last Start left unapplied on a running VM
// (Options.Restart unset), with the command that applies it; "" when
// nothing.
func (d *Driver) Pending() string { return d.pending }

// Stop stops the VM gracefully, keeping everything in it (a Broken VM is
// stopped forcibly). A VM that is absent or stopped is left as it is.
func (d *Driver) Stop(ctx context.Context) error {
	_ = d.guest.Close()
	_, err := d.request(ctx, OpDown, nil)
	return err
}

// Delete removes the VM and everything in it (running or not). The host
// registry cache (~/.marina/registry-cache) is kept: it outlives the VM.
func (d *Driver) Delete(ctx context.Context) error {
	_ = d.guest.Close()
	_, err := d.request(ctx, OpDestroy, nil)
	return err
}

// PlanResize reports the change of size the config asks of the existing VM
// (Empty when none, or when there is no VM). A smaller vm.disk is an error.
func (d *Driver) PlanResize(ctx context.Context) (Resize, error) {
	ev, err := d.request(ctx, OpPlanResize, nil)
	if err != nil {
		return Resize{}, err
	}
	if ev.Resize == nil {
		return Resize{}, fmt.Errorf("%s %s answered without a resize", EngineName, OpPlanResize)
	}
	return *ev.Resize, nil
}

// PendingResize is PlanResize for the up pipeline's plan (Resize.Planned).
func (d *Driver) PendingResize(ctx context.Context) (change string, restart bool, err error) {
	r, err := d.PlanResize(ctx)
	if err != nil {
		return "", false, err
	}
	change, restart = r.Planned(d.Restart)
	return change, restart, nil
}

// sshTarget asks the engine where the running VM's SSH server answers.
func (d *Driver) sshTarget(ctx context.Context) (SSHTarget, error) {
	ev, err := d.request(ctx, OpSSHTarget, nil)
	if err != nil {
		return SSHTarget{}, err
	}
	if ev.SSH == nil {
		return SSHTarget{}, fmt.Errorf("%s %s answered without a target", EngineName, OpSSHTarget)
	}
	return *ev.SSH, nil
}

// Exec runs argv in the VM as root (sudo), with stdin (may be nil), and
// returns its stdout (Guest.Exec, bounded by ExecTimeout when ctx has no
// deadline).
func (d *Driver) Exec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok && d.ExecTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.ExecTimeout)
		defer cancel()
	}
	return d.guest.Exec(ctx, argv, stdin)
}

// ShellArgv is the system ssh command line that Shell runs: Lima's key and
// forwarded port, no host key checks (see sshExecutor), no user ssh config,
// a terminal when tty, and argv quoted for the guest's shell (a login
// shell when argv is empty).
//
// It logs in as the guest user of a VM marina creates (lima); Shell uses
// the user of the VM that is there.
func ShellArgv(keyFile string, port int, argv []string, tty bool) ([]string, error) {
	return shellArgv(GuestUser, keyFile, port, argv, tty)
}

func shellArgv(user, keyFile string, port int, argv []string, tty bool) ([]string, error) {
	ssh := []string{"ssh", "-F", "/dev/null",
		"-i", keyFile, "-p", strconv.Itoa(port),
		"-o", "IdentitiesOnly=yes",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
		"-o", "BatchMode=yes",
	}
	if tty || len(argv) == 0 {
		ssh = append(ssh, "-t")
	}
	ssh = append(ssh, user+"@127.0.0.1")
	if len(argv) > 0 {
		line, err := QuoteArgs(argv)
		if err != nil {
			return nil, err
		}
		ssh = append(ssh, "--", line)
	}
	return ssh, nil
}

// Shell runs argv in the VM as the guest user, interactively, with the
// given streams (a login shell when argv is empty), through the system ssh.
func (d *Driver) Shell(ctx context.Context, argv []string, in io.Reader, out, errOut io.Writer) error {
	t, err := d.target(ctx)
	if err != nil {
		return err
	}
	addr, key, user := t.Addr, t.KeyFile, t.User
	_, portStr, _ := strings.Cut(addr, ":")
	port, _ := strconv.Atoi(portStr)
	tty := false
	if f, ok := in.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	args, err := shellArgv(user, key, port, argv, tty)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, errOut
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run()
}

// Guest runs commands in the VM over SSH, on one reused connection.
type Guest struct {
	ssh *sshExecutor
}

// NewGuest returns a Guest that logs in where target says, asked before
// each new connection (the guest user is the one of the VM there now).
func NewGuest(target func(ctx context.Context) (SSHTarget, error)) *Guest {
	g := &Guest{ssh: newSSHExecutor(GuestUser, nil)}
	// The executor asks for the target holding its lock, and reads user
	// after it.
	g.ssh.target = func(ctx context.Context) (string, string, error) {
		t, err := target(ctx)
		if err != nil {
			return "", "", err
		}
		g.ssh.user = t.User
		return t.Addr, t.KeyFile, nil
	}
	return g
}

// Exec runs argv in the VM as root (sudo), with stdin (may be nil), and
// returns its stdout. It is bounded by ctx (or 2 minutes when ctx has no
// deadline) on both ends: the guest runs it under `timeout`, and
// cancelling ctx signals it and returns at once. A non-zero exit is an
// error that carries stderr.
func (g *Guest) Exec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	cmd, err := remoteCommand(argv, true, time.Until(deadline))
	if err != nil {
		return nil, err
	}
	out, errb, err := g.ssh.Run(ctx, cmd, stdin)
	if err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("in the VM: %s: %w", strings.Join(argv, " "), ctx.Err())
		}
		return out, execError(argv, err, errb)
	}
	return out, nil
}

// Close closes the connection (the next Exec opens one).
func (g *Guest) Close() error { return g.ssh.Close() }
