//go:build unix && !linux

package kubetest

import (
	"errors"
	"syscall"
)

// sysProcAttr puts the child in its own process group. There is no parent-death
// signal outside Linux: a test process killed by a timeout leaves its etcd and
// kube-apiserver running (kill them by the pids in the test's log).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupMembers reports the group as one unnamed member (-1) while kill(-pgid, 0)
// finds any process in it.
func groupMembers(pgid int) ([]int, error) {
	err := syscall.Kill(-pgid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return nil, nil
	case err == nil, errors.Is(err, syscall.EPERM):
		return []int{-1}, nil
	default:
		return nil, err
	}
}
