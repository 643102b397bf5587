// Package hostvm is the vm.Driver for a machine that runs Docker itself
// (driver "host", Linux).
package hostvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/core/vm"
)

// Host is the driver for a machine that runs Docker itself (Linux): there
// is no VM to create, start or stop, and no route is needed because the
// bridge is local. Start only checks that Docker answers.
type Host struct {
	// VMName is the config's vm.name (reported in Status).
	VMName string
	// DockerHost is the endpoint; empty means docker.DefaultHost().
	DockerHost string
	// ExecTimeout bounds Exec when ctx has no deadline (default 2 minutes).
	ExecTimeout time.Duration
}

// Name returns "host".
func (h *Host) Name() string { return "host" }

func (h *Host) endpoint() string {
	if h.DockerHost != "" {
		return h.DockerHost
	}
	return docker.DefaultHost()
}

// Status reports Running when the Docker engine answers, Stopped otherwise.
func (h *Host) Status(ctx context.Context) (vm.Status, error) {
	st := vm.Status{Driver: "host", Name: h.VMName, DockerHost: h.endpoint(), Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := docker.Open(pctx, st.DockerHost)
	if err != nil {
		st.State, st.Detail = vm.Stopped, err.Error()
		return st, nil
	}
	_ = c.Close()
	st.State = vm.Running
	return st, nil
}

// Start checks that Docker answers; the host driver never starts Docker
// itself (it is the machine owner's service).
func (h *Host) Start(ctx context.Context, progress func(string)) (vm.Status, error) {
	st, err := h.Status(ctx)
	if err != nil {
		return st, err
	}
	if st.State != vm.Running {
		return st, fmt.Errorf("%s.\nThe host driver uses the Docker engine of this machine: start it "+
			"(e.g. `sudo systemctl start docker`, or `sudo dockerd &`), or point DOCKER_HOST at one", st.Detail)
	}
	return st, nil
}

// Stop does nothing: the host driver does not own Docker.
func (h *Host) Stop(ctx context.Context) error { return nil }

// Delete does nothing: there is no VM.
func (h *Host) Delete(ctx context.Context) error { return nil }

// Exec runs argv on this machine (as root: via sudo -n when marina is not root).
func (h *Host) Exec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("exec: empty command")
	}
	if _, ok := ctx.Deadline(); !ok {
		d := h.ExecTimeout
		if d <= 0 {
			d = 2 * time.Minute
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if os.Geteuid() != 0 {
		argv = append([]string{"sudo", "-n", "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if ctx.Err() != nil {
			return out.Bytes(), fmt.Errorf("%s: %w (%v) %s", strings.Join(argv, " "), ctx.Err(), err, msg)
		}
		return out.Bytes(), fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, msg)
	}
	return out.Bytes(), nil
}

// Shell runs argv (or $SHELL) on this machine with the given streams.
func (h *Host) Shell(ctx context.Context, argv []string, in io.Reader, out, errOut io.Writer) error {
	if len(argv) == 0 {
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, errOut
	return cmd.Run()
}
