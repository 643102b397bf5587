// Command plugin serves the localdns plugin as a real marina plugin process,
// for the out-of-process tier-2 test (marina itself serves built-ins by
// re-executing its own binary).
package main

import (
	"github.com/bcollard/marina/plugins/localdns"
	"github.com/bcollard/marina/sdk"
)

func main() { sdk.Serve(localdns.New()) }
