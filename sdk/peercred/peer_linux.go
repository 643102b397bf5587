package peercred

import "golang.org/x/sys/unix"

const supported = true

func peerOf(fd int) (Peer, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Peer{}, err
	}
	return Peer{PID: int(u.Pid), UID: int(u.Uid)}, nil
}
