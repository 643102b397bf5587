//go:build unix && !linux

package plugin

import (
	"errors"
	"syscall"
)

// sysProcAttr puts the plugin in its own process group. (There is no
// Pdeathsig outside Linux; the SDK's parent watchdog stops a plugin whose
// marina died, and kills the plugin's descendants.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether any process is still in process group pgid.
// launchd reaps orphans promptly, so zombies do not linger here.
func groupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// envHas is false: reading another process's environment needs
// KERN_PROCARGS2, and without a subreaper orphans are launchd's anyway.
func envHas(int, string) bool { return false }

// reap does nothing: marina is no subreaper outside Linux, so it adopts
// no process.
func reap(int) {}

// holdSubreaper does nothing: child subreapers are Linux-only.
func holdSubreaper() (release func()) { return func() {} }

// procTable is the whole process table: without a subreaper, an orphan of
// the plugin may be anywhere.
func procTable(_, _ int) []procEntry { return listProcs() }

// noChildren is false: without a subreaper, marina having no child says
// nothing about the plugin's orphans (they are launchd's).
func noChildren() bool { return false }
