package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/test/bench"
)

// builtinLife is one built-in plugin's life as marina gives it: marina
// re-executed as `marina plugin-server NAME`, launched, described
// (Start's Describe RPC and a second one, as the dispatcher's callers do),
// and stopped. No hook: the built-ins' hooks do real work against Docker
// and Kubernetes.
func builtinLife(ctx context.Context, name string) error {
	inst, err := plugin.Start(ctx, plugin.Spec{Name: name, Path: marinaBin, Args: []string{pluginset.ServeArg, name}},
		plugin.Options{Logger: slog.New(slog.DiscardHandler), HostVersion: "bench"})
	if err != nil {
		return err
	}
	if _, err := inst.Describe(ctx); err != nil {
		_ = inst.Close()
		return err
	}
	return inst.Close()
}

// BenchmarkBuiltinsAtOnce (issue 14, goal 4: five built-ins at once ≤ 2x
// one): the five built-in plugins launched, described and stopped at once,
// against one of them (localdns) alone, alternating in the same run;
// medians, with the CPU time of each (marina and the plugin processes) and
// the floor it sets on this machine's CPUs. Reported, never asserted.
func BenchmarkBuiltinsAtOnce(b *testing.B) {
	ctx := context.Background()
	names := compiledIn()
	five := func() error {
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Go(func() { errs[i] = builtinLife(ctx, n) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	one := func() error { return builtinLife(ctx, "localdns") }
	// Warm the page cache and the run dir.
	if err := five(); err != nil {
		b.Fatal(err)
	}
	var oneWall, fiveWall, oneCPU, fiveCPU []time.Duration
	measure := func(f func() error, wall, cpu *[]time.Duration) {
		c0, t0 := bench.CPUTime(), time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*wall = append(*wall, time.Since(t0))
		*cpu = append(*cpu, bench.CPUTime()-c0)
	}
	for b.Loop() {
		measure(one, &oneWall, &oneCPU)
		measure(five, &fiveWall, &fiveCPU)
	}
	o, f := medianMS(oneWall), medianMS(fiveWall)
	oc, fc := medianMS(oneCPU), medianMS(fiveCPU)
	cpus := runtime.NumCPU()
	floor := fc / float64(cpus) / o
	b.ReportMetric(o, "one-ms")
	b.ReportMetric(f, "five-ms")
	b.ReportMetric(f/o, "five-vs-one")
	b.Logf("medians of %d runs, wall (CPU) ms: one built-in (localdns) %.1f (%.1f), the %d built-ins at once %.1f (%.1f); CPU floor on %d CPUs %.2fx",
		len(oneWall), o, oc, len(names), f, fc, cpus, floor)
	bench.Figure(b, "built-ins at once vs one (launch+describe+stop)", fmt.Sprintf("%.1f ms (%.2fx)", f, f/o), "<= 2x",
		fmt.Sprintf("one: %.1f ms; CPU floor on %d CPUs %.2fx", o, cpus, floor), f/o <= 2)
}
