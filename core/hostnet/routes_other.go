//go:build !linux && !darwin

package hostnet

import (
	"context"
	"errors"
)

func readRoutes(context.Context) ([]HostRoute, error) {
	return nil, errors.New("reading the routing table is supported on Linux and macOS only")
}
