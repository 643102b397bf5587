// Command registry is distribution's registry (cmd/registry of
// github.com/distribution/distribution/v3) with only the storage drivers the tests
// need: filesystem and inmemory. The pull-through cache (proxy.remoteurl) and
// htpasswd/token auth are linked in, as in the upstream command.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/proxy"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// RootCmd exits the process with a non-zero code itself when serve fails.
	_ = registry.RootCmd.Execute()
}
