//go:build darwin

package plugin

import "golang.org/x/sys/unix"

// listProcs reads the process table with sysctl kern.proc.all.
func listProcs() []procEntry {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	out := make([]procEntry, 0, len(kps))
	for i := range kps {
		kp := &kps[i]
		out = append(out, procEntry{
			pid: int(kp.Proc.P_pid), ppid: int(kp.Eproc.Ppid), pgid: int(kp.Eproc.Pgid),
			start:  uint64(kp.Proc.P_starttime.Sec),
			zombie: kp.Proc.P_stat == 5, // SZOMB
		})
	}
	return out
}

// procStart returns the start time of process pid, in seconds since the
// epoch (short, for socket paths; a pid is not reused within a second).
func procStart(pid int) (uint64, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid || kp.Proc.P_stat == 5 {
		return 0, false
	}
	return uint64(kp.Proc.P_starttime.Sec), true
}
