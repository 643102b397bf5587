// Command marina-lima is marina's Lima engine (package
// core/vm/lima/limaengine): marina runs it to create, start, stop and
// delete its VM, and Lima runs it as the VM's host agent. It ships beside
// the marina binary; users never run it themselves.
package main

import (
	"os"

	// Before Lima's packages: a sane $HOME and $USER (see its doc).
	_ "github.com/bcollard/marina/core/homeenv"
	"github.com/bcollard/marina/core/vm/lima/limaengine"
)

func main() {
	os.Exit(limaengine.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
