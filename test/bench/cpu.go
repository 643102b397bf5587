//go:build unix

package bench

import (
	"syscall"
	"time"
)

// CPUTime is the user+system CPU time of this process and of its reaped
// children (plugin processes, commands), so far: the difference over a
// measured run is what the run cost the machine's CPUs.
func CPUTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}
