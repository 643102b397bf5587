//go:build !unix

package plugintest

import (
	"os"
	"syscall"
)

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

// sysProcAttr is the default: there are no process groups here.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills process pid (there are no process groups here).
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
