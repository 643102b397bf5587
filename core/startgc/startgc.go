// Package startgc keeps the garbage collector off while a marina process
// starts (imported for its init, first thing in cmd/marina).
package startgc

import (
	"os"
	"runtime/debug"
	"time"
)

// Start-up without a collection: most marina commands live a few
// milliseconds, and the first GC cycle (at a 4 MB heap, reached just after
// package init) costs ~1.3 ms of an 11.6 ms `marina version` here: marking
// the roots of a large binary's data and bss. So the collector is off for
// the first gcStartWindow of a process, with a memory limit as the
// backstop (the collector runs if the heap nears it), then back to the
// defaults: a command that works longer collects as usual. A GOGC or
// GOMEMLIMIT set by the user is left alone.
const (
	gcStartWindow = 200 * time.Millisecond
	gcStartLimit  = 256 << 20
)

// init applies the start-up policy above. It runs before most of marina's
// dependencies initialise (packages initialise in import-path order once
// their own dependencies have), so their allocations do not start a cycle.
func init() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	old := debug.SetGCPercent(-1)
	oldLimit := debug.SetMemoryLimit(gcStartLimit)
	time.AfterFunc(gcStartWindow, func() {
		debug.SetGCPercent(old)
		debug.SetMemoryLimit(oldLimit)
	})
}
