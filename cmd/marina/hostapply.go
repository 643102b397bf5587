package main

import (
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/vm"
)

// newHostApplier returns what applies plugins' host changes for driver, or
// nil when this build makes none (the user is told what to do by hand).
func newHostApplier(a *app, driver vm.Driver) lab.HostApplier {
	return nil
}
