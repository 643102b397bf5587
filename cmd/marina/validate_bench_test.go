package main

// BenchmarkConfigValidate (issue 14, goal 2): `marina config validate` of
// the default config (no file: the five built-ins enabled), run as users
// run it (exec of the real binary TestMain built), against `marina
// version` (the cost of starting marina at all) measured in the same run.
// Goal: config validate in at most 100 ms, reported, never asserted. Run:
//
//	go test -run '^$' -bench ConfigValidate ./cmd/marina

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/test/bench"
)

// BenchmarkConfigValidate times `marina config validate` (ns/op and
// validate-ms) and, between runs with the timer stopped, `marina version`
// as the baseline. validate-ms, version-ms and validate-vs-version are
// medians of the same run.
func BenchmarkConfigValidate(b *testing.B) {
	home := b.TempDir()
	timed := func(args ...string) time.Duration {
		start := time.Now()
		out, err := runMarina(home, args...)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if args[0] == "config" && !strings.Contains(string(out), "defaults are valid") {
			b.Fatalf("config validate: %s", out)
		}
		return d
	}
	// One untimed warm-up of each (page cache, ~/.marina created).
	timed("config", "validate")
	timed("version")
	var validate, version []time.Duration
	for b.Loop() {
		validate = append(validate, timed("config", "validate"))
		b.StopTimer()
		version = append(version, timed("version"))
		b.StartTimer()
	}
	v, base := medianMS(validate), medianMS(version)
	b.ReportMetric(v, "validate-ms")
	b.ReportMetric(base, "version-ms")
	b.ReportMetric(v/base, "validate-vs-version")
	b.Logf("medians of %d runs: config validate (default config) %.1f ms, version %.1f ms, ratio %.2fx",
		len(validate), v, base, v/base)
	bench.Figure(b, "marina config validate (default config)", fmt.Sprintf("%.1f ms", v), "<= 100 ms", fmt.Sprintf("version %.1f ms", base), v <= 100)
}
