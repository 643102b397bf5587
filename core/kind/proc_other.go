//go:build !unix

package kind

import "os/exec"

// setProcessGroup does nothing where there are no process groups.
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the helper only.
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
