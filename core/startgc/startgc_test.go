package startgc

import (
	"math"
	"os"
	"runtime/metrics"
	"testing"
	"time"
)

// loaded is when this test binary's packages were initialised.
var loaded = time.Now()

// gcSettings reads the collector's settings without changing them.
func gcSettings() (percent, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestStartWindow: the collector is off while the process starts, with the
// memory limit as a backstop, and runs with the defaults again (GOGC 100,
// no limit) after the window. (With GOGC or GOMEMLIMIT set, init leaves
// everything alone: not this process's case.)
func TestStartWindow(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: the start-up policy stays out of the way")
	}
	if started := time.Since(loaded); started < gcStartWindow/2 {
		// A negative GOGC (off) reads as the uint64 of -1.
		if pct, limit := gcSettings(); pct != math.MaxUint64 || limit != gcStartLimit {
			t.Errorf("%s after start: GOGC %d, limit %d; want off and %d", started, int64(pct), limit, gcStartLimit)
		}
	}
	deadline := time.Now().Add(gcStartWindow + 10*time.Second)
	for {
		pct, limit := gcSettings()
		if pct == 100 && limit == math.MaxInt64 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d, memory limit %d well after the start-up window: the defaults did not come back", pct, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
