//go:build !unix

package sdk

import "time"

// becomeSubreaper does nothing on this OS.
func becomeSubreaper() {}

// killDescendants does nothing on this OS.
func killDescendants(time.Duration, time.Duration) {}
