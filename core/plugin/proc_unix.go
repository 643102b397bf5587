//go:build unix && !linux

package plugin

import "syscall"

// sysProcAttr puts the plugin in its own process group. (There is no
// Pdeathsig outside Linux; the SDK's parent watchdog stops a plugin whose
// marina died.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether any process is still in process group pgid.
// launchd reaps orphans promptly, so zombies do not linger here.
func groupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	return syscall.Kill(-pgid, 0) == nil
}
