//go:build !darwin || !cgo

package lima

// VZCompiled is false where Lima's vz driver cannot be built: off macOS, or
// without cgo (Start then says how to get a binary that has it).
const VZCompiled = false
