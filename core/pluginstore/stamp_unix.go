//go:build linux || darwin

package pluginstore

import (
	"os"
	"syscall"
)

// fileStamp identifies a file's content without reading it: its inode and
// the status the kernel updates on every change to it. ctime cannot be
// set by a user (touch, utimes and copies that keep times set only atime
// and mtime); any write, truncation, chmod or link change sets it to now.
type fileStamp struct {
	Dev       uint64 `json:"dev"`
	Ino       uint64 `json:"ino"`
	Size      int64  `json:"size"`
	Mode      uint32 `json:"mode"`
	MtimeNano int64  `json:"mtimeUnixNano"`
	CtimeNano int64  `json:"ctimeUnixNano"`
}

// stampOf is f's stamp; false where the platform's status has no ctime.
func stampOf(f *os.File) (fileStamp, bool) {
	fi, err := f.Stat()
	if err != nil {
		return fileStamp{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return fileStamp{}, false
	}
	return stampFrom(st), true
}
