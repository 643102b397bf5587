// Command plugin is a minimal marina plugin used by core/pluginstore's tests.
// Its name and version are injected at build time so one source yields the
// versions the tests install side by side:
//
//	go build -ldflags "-X main.name=acme -X main.version=1.2.0" ./core/pluginstore/testdata/plugin
package main

import (
	"context"
	"strings"

	"github.com/bcollard/marina/sdk"
)

var (
	name    = "acme"
	version = "0.0.0"
	// description is set at link time by tests of what marina shows of it.
	description = "pluginstore test plugin"
	// capabilities, comma-separated, are set at link time by tests of
	// capability grants and limits.
	capabilities = ""
	// required, when set at link time, gives the plugin a config with a
	// required field of that name.
	required = ""
)

// requiredConfig is the config of a plugin built with -X main.required=quota.
type requiredConfig struct {
	Quota string `json:"quota" marina:"required" doc:"a required field"`
}

type plugin struct{}

// Info says who the plugin is.
func (plugin) Info() sdk.Info {
	info := sdk.Info{Name: name, Version: version, Description: description}
	if capabilities != "" {
		info.Capabilities = strings.Split(capabilities, ",")
	}
	if required == "quota" {
		info.Config = &requiredConfig{}
	}
	return info
}

// PostCluster does nothing; a plugin must implement at least one hook.
func (plugin) PostCluster(context.Context, *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{}, nil
}

func main() { sdk.Serve(plugin{}) }
