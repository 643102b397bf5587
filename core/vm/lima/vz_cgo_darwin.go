//go:build darwin && cgo

package lima

// Lima's vz driver (Virtualization.framework) is cgo code; importing it
// registers it with Lima's driver registry, as limactl does.
import _ "github.com/lima-vm/lima/v2/pkg/driver/vz"

const VZCompiled = true
