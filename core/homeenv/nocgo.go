//go:build (!cgo && !darwin) || osusergo

package homeenv

// cgoLookup: os/user's pure-Go Current falls back to $USER and $HOME,
// which init has set, so it cannot fail and need not be asked (reading
// /etc/passwd again was a tenth of the front's package init).
const cgoLookup = false
