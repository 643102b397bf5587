package main

import (
	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/plugins/certmanager"
	"github.com/bcollard/marina/plugins/coredns"
	"github.com/bcollard/marina/plugins/externaldns"
	"github.com/bcollard/marina/plugins/localdns"
	"github.com/bcollard/marina/plugins/metallb"
	"github.com/bcollard/marina/plugins/registries"
)

// builtins returns the plugins compiled into this binary: the one place
// built-ins are wired in. Each still runs out of process: marina re-executes
// itself as `marina plugin-server NAME`, the path third-party plugins take.
func builtins() pluginset.Builtins {
	return pluginset.Builtins{
		"certmanager": certmanager.New,
		"coredns":     coredns.New,
		"externaldns": externaldns.New,
		"localdns":    localdns.New,
		"metallb":     metallb.New,
		"registries":  registries.New,
	}
}
