//go:build unix

package kind

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the helper lead a process group of its own, which
// the docker CLIs it starts join.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup kills the helper and every process of its group. os/exec
// calls it before reaping the helper, so the group id is still the helper's.
func killProcessGroup(cmd *exec.Cmd) error {
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
