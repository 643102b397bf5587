// Command kind-standin stands in for kind behind marina's kind helper
// protocol: `kind-standin kind-helper` reads one request from stdin (as
// marina's KindProvider writes it) and serves it with the stand-in backend
// (test/standin/internal/helper) instead of kind's library. Its clusters
// have a real API server but run no pod; see package standin.
//
// Environment: MARINA_STANDIN_IMAGE (required: the node image),
// DOCKER_HOST, KIND_EXPERIMENTAL_DOCKER_NETWORK (default "kind").
package main

import (
	"fmt"
	"os"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/test/standin/internal/helper"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != kind.HelperArg {
		fmt.Fprintf(os.Stderr, "usage: %s %s  (a request on stdin, as marina's KindProvider writes it)\n", os.Args[0], kind.HelperArg)
		os.Exit(2)
	}
	os.Exit(kind.ServeHelperWith(os.Stdin, os.Stdout, os.Stderr, helper.New))
}
