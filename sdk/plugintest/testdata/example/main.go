// Command example serves the example plugin (internal/exampleplugin) as a
// real marina plugin process, for plugintest's out-of-process tests.
package main

import (
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest/internal/exampleplugin"
)

func main() { sdk.Serve(exampleplugin.Plugin{}) }
