//go:build darwin && !cgo

package lima

import (
	"context"
	"errors"
	"io"
)

// RunHostAgent cannot run in a macOS build without cgo: Lima's host agent
// (its file watcher, and the vz driver it drives) needs cgo there.
func RunHostAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if _, err := ParseHostAgentArgs(args); err != nil {
		return err
	}
	return errors.New("hostagent: this marina binary was built without cgo; on macOS Lima's host agent needs a cgo build (CGO_ENABLED=1)")
}
