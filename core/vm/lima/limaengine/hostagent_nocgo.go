//go:build darwin && !cgo

package limaengine

import (
	"context"
	"errors"
	"io"

	"github.com/bcollard/marina/core/vm/lima"
)

// RunHostAgent cannot run in a macOS build without cgo: Lima's host agent
// (its file watcher, and the vz driver it drives) needs cgo there.
func RunHostAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if _, err := lima.ParseHostAgentArgs(args); err != nil {
		return err
	}
	return errors.New("hostagent: this marina binary was built without cgo; on macOS Lima's host agent needs a cgo build (CGO_ENABLED=1)")
}
