//go:build linux

package hostnet

import "unsafe"

// unsafePointer is the address of b's first byte, to read a kernel struct
// (netlink's rtmsg) that b holds.
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
