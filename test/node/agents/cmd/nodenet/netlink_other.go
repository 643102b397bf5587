//go:build !linux

package main

import "errors"

// netlinkRoutes is only implemented on Linux; elsewhere nodenet builds (so
// its unit tests run on a developer's machine) but cannot manage routes.
type netlinkRoutes struct{}

var errNotLinux = errors.New("routes can only be managed on Linux")

func (netlinkRoutes) Replace(Route) error    { return errNotLinux }
func (netlinkRoutes) Delete(Route) error     { return errNotLinux }
func (netlinkRoutes) List() ([]Route, error) { return nil, errNotLinux }
