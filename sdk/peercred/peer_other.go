//go:build !linux && !darwin

package peercred

const supported = false

func peerOf(int) (Peer, error) { return Peer{}, ErrUnsupported }
