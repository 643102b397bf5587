//go:build tools

// Package node pins the programs build.sh compiles into the tests' kind node
// image, at the versions kind v0.33.0's own node image ships (its
// images/base/Dockerfile): containerd v2.3.4 (containerd, its runc shim, ctr),
// runc v1.4.3 and the CNI plugins v1.9.1 kind's node uses (host-local,
// loopback, ptp, portmap). Nothing imports this package; it keeps the modules
// in go.mod for `go mod tidy`.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/main/ptp"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/opencontainers/runc"
)
