// Command metrics-server is the worked example of docs/plugins.md: a marina
// plugin that installs metrics-server in every cluster. Every Go block of
// docs/plugins.md is quoted from this package (TestDocsQuoteTheExample), so
// the guide's code compiles and its tests run.
package main

import "github.com/bcollard/marina/sdk"

func main() { sdk.Serve(&Plugin{}) }
