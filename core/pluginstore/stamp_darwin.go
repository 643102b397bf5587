package pluginstore

import "syscall"

func stampFrom(st *syscall.Stat_t) fileStamp {
	return fileStamp{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mode: uint32(st.Mode),
		MtimeNano: syscall.TimespecToNsec(st.Mtimespec), CtimeNano: syscall.TimespecToNsec(st.Ctimespec)}
}
