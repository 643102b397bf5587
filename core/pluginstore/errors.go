package pluginstore

import "errors"

// Error kinds, for errors.Is. Every error the store returns carries a full
// message naming the plugin, the file and the fix; the kinds let callers
// (exit codes, `plugin list` STATUS) classify them.
var (
	// ErrNotInstalled: the plugin or version is not in the store.
	ErrNotInstalled = errors.New("plugin not installed")
	// ErrSourceNotFound: the install source (path, URL, registry tag) does not exist.
	ErrSourceNotFound = errors.New("plugin source not found")
	// ErrNoMatch: no installed version (or OCI tag) satisfies the constraint.
	ErrNoMatch = errors.New("no installed plugin version matches")
	// ErrModified: an installed binary no longer has the sha256 recorded in its manifest.
	ErrModified = errors.New("plugin binary modified after install")
	// ErrUntrusted: pluginTrust refuses the plugin: the policy is enforce
	// and no trusted key signed it, or it declares a capability that
	// pluginTrust.capabilities does not allow for its source.
	ErrUntrusted = errors.New("plugin refused by pluginTrust")
	// ErrNotGranted: the plugin declares capabilities no installed version
	// of it declared, and the user did not grant them.
	ErrNotGranted = errors.New("plugin capabilities not granted")
	// ErrLockMismatch: an installed binary is not the build the lock file pins.
	ErrLockMismatch = errors.New("plugin binary does not match the lock file")
	// ErrChecksum: the downloaded or copied artifact does not have the expected sha256.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrChecksumRequired: an https install without --sha256 or InsecureSkipChecksum.
	ErrChecksumRequired = errors.New("checksum required")
	// ErrProtocol: the plugin speaks a protocol this marina cannot.
	ErrProtocol = errors.New("unsupported plugin protocol")
	// ErrPlatform: the binary is built for another OS or CPU.
	ErrPlatform = errors.New("plugin built for another platform")
	// ErrNotPlugin: the artifact is not a plugin binary or archive (HTML, JSON, zip...).
	ErrNotPlugin = errors.New("not a plugin binary or archive")
	// ErrInvalid: a manifest or description is malformed or inconsistent.
	ErrInvalid = errors.New("invalid plugin")
	// ErrBuiltinName: the plugin has the name of a plugin built into marina.
	ErrBuiltinName = errors.New("plugin name taken by a built-in plugin")
	// ErrVersionExists: a different build of the same version is installed.
	ErrVersionExists = errors.New("a different build of this plugin version is installed")
)

// kindError is an error with a message of its own and a kind for errors.Is.
type kindError struct {
	kind error
	msg  string
	err  error // optional cause
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }
func (e *kindError) Unwrap() error        { return e.err }

func newError(kind error, msg string) error { return &kindError{kind: kind, msg: msg} }

func wrapError(kind error, msg string, cause error) error {
	return &kindError{kind: kind, msg: msg, err: cause}
}
