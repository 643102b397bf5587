// Command plugin serves the registries plugin as a real plugin process, for
// the package's out-of-process tests (marina itself re-executes its own
// binary in plugin mode instead).
package main

import (
	"github.com/bcollard/marina/plugins/registries"
	"github.com/bcollard/marina/sdk"
)

func main() { sdk.Serve(registries.New()) }
