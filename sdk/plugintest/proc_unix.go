//go:build unix

package plugintest

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this pid exists (signal 0
// checks without sending anything; EPERM means it exists but is not ours).
func processAlive(pid int) bool {
	if pid <= 0 { // 0 and -1 would address process groups
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sysProcAttr puts the plugin in its own process group, as marina does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to process group pgid (the plugin's pid).
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
