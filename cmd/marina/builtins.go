package main

import (
	"github.com/bcollard/marina/core/pluginset"
)

// builtins returns the plugins compiled into this binary: the one place
// built-ins are wired in. Each still runs out of process: marina re-executes
// itself as `marina plugin-server NAME`, the path third-party plugins take.
// The built-in registries, localdns, metallb, coredns and externaldns plugins
// are added here as they land (plugins/<name>).
func builtins() pluginset.Builtins {
	return pluginset.Builtins{}
}
