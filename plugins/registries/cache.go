package registries

import (
	"os"
	"strings"

	"github.com/bcollard/marina/sdk"
)

// prepareCache creates m's host cache directory when the plugin can see it
// (the cache directory is shared with the VM at the same path). When it
// cannot, Docker must find the directory on its side: a bind mount through
// the Engine API does not create its source.
func prepareCache(env sdk.Env, m mirror, debug func(msg string, args ...any)) {
	if env.RegistryCacheStorage != "host" {
		return
	}
	dir := cacheName(env, m)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		debug("cache directory not created from the plugin's side; Docker must find it", "dir", dir, "error", err.Error())
	}
}

// cacheHint adds the fix to an Ensure error caused by a missing host cache
// directory.
func cacheHint(env sdk.Env, m mirror, err error) string {
	if env.RegistryCacheStorage != "host" || !strings.Contains(err.Error(), "does not exist") {
		return ""
	}
	return "; the cache directory " + cacheName(env, m) + " must exist in the VM: registries.cacheDir has to be shared with the VM at the same path (or set registries.cacheStorage: guest)"
}
