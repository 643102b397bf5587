//go:build darwin

package sdk

import "golang.org/x/sys/unix"

// becomeSubreaper does nothing: macOS has no child subreaper. A
// descendant whose parent exits is re-parented to launchd and leaves the
// tree; one that stayed in the plugin's process group is still killed.
func becomeSubreaper() {}

// listProcs reads the process table with sysctl kern.proc.all.
func listProcs() []proc {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	out := make([]proc, 0, len(kps))
	for i := range kps {
		kp := &kps[i]
		out = append(out, proc{pid: int(kp.Proc.P_pid), ppid: int(kp.Eproc.Ppid), pgid: int(kp.Eproc.Pgid), zombie: kp.Proc.P_stat == 5})
	}
	return out
}
