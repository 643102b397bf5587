// Package lima is marina's "lima" VM driver (the default on macOS): one Lima
// VM, managed through Lima itself used as a library
// (github.com/lima-vm/lima/v2, pinned at v2.2.0), that runs Docker and every
// kind cluster.
//
// What it owns:
//   - the VM template (Template, Render): Lima's own typed configuration —
//     vz + vzNAT + virtiofs on macOS, qemu on Linux; cpus/memory/disk from
//     the config; Rosetta on Apple silicon when asked; the registry cache
//     shared from the host; the Docker socket forwarded to
//     ~/.<vm name>.docker.sock; Lima's port mirroring off unless the config
//     turns it on;
//   - the VM's provisioning at every boot (limavm.Provision: idempotent,
//     every download pinned by SHA-256 in core/vm/limavm/pins.go);
//   - the instance state, kept under its own LIMA_HOME (~/.marina/lima) so
//     that marina's VM coexists with Colima, Rancher Desktop, or any other
//     Lima user;
//   - where the guest's SSH server answers (Driver.SSHTarget), for guest
//     commands (limavm.Guest);
//   - Lima itself (Library): its instance operations, in process.
//
// This package runs only in marina's Lima engine, marina-lima (package
// limaengine, cmd/marina-lima): Lima's VM drivers, its instance operations
// and its host agent are heavy (the vz and qemu drivers, usernet's gVisor
// stack and gopacket, whose package init alone is heavy), so the marina program links
// none of it and asks the engine (core/vm/limavm: one JSON request on
// stdin, progress and one result on stdout) to run this driver. Lima runs
// the VM's host agent by re-executing the engine as `marina-lima hostagent
// ...`.
//
// On macOS the vz driver needs cgo and the com.apple.security.virtualization
// entitlement, both for marina-lima only; a marina-lima built with
// CGO_ENABLED=0 compiles (and vets) but refuses to start a vz VM, with an
// error that says so.
package lima
