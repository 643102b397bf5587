//go:build unix

package main

import "syscall"

// unknownUser runs a child as uid (and gid) with no supplementary groups.
func unknownUser(uid uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, NoSetGroups: false, Groups: []uint32{}}}
}
