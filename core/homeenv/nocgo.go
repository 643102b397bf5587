//go:build (!cgo && !darwin) || osusergo

package homeenv

// cgoLookup: os/user's pure-Go Current falls back to $USER and $HOME,
// which init has set, so it cannot fail and need not be asked (and reading
// /etc/passwd again would cost every start).
const cgoLookup = false
