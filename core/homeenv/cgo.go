//go:build (cgo || darwin) && !osusergo

package homeenv

// cgoLookup: os/user asks the C library (on macOS, without cgo too, through
// libSystem), whose Current can fail for a uid the user database does not
// know, whatever $USER and $HOME say.
const cgoLookup = true
