// Command plugin is a minimal marina plugin used by core/pluginstore's tests.
// Its name and version are injected at build time so one source yields the
// versions the tests install side by side:
//
//	go build -ldflags "-X main.name=acme -X main.version=1.2.0" ./core/pluginstore/testdata/plugin
package main

import (
	"context"

	"github.com/bcollard/marina/sdk"
)

var (
	name    = "acme"
	version = "0.0.0"
	// description is set at link time by tests of what marina shows of it.
	description = "pluginstore test plugin"
)

type plugin struct{}

// Info says who the plugin is.
func (plugin) Info() sdk.Info {
	return sdk.Info{Name: name, Version: version, Description: description}
}

// PostCluster does nothing; a plugin must implement at least one hook.
func (plugin) PostCluster(context.Context, *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{}, nil
}

func main() { sdk.Serve(plugin{}) }
