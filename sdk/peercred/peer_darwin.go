package peercred

import "golang.org/x/sys/unix"

const supported = true

func peerOf(fd int) (Peer, error) {
	xu, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Peer{}, err
	}
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return Peer{}, err
	}
	return Peer{PID: pid, UID: int(xu.Uid)}, nil
}
