package pluginstore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bcollard/marina/test/bench"
)

// BenchmarkPluginSearch (make bench): `plugin search` over a namespace of
// 10 plugins with 3 versions each in the in-memory registry (the catalog,
// each repository's tags, two manifests per version, a description),
// against the baseline of listing one plugin's versions in the same run.
// Reported, never asserted: the registry's latency dominates in real use.
// writePackaged writes a packaged archive of acme at version for this
// machine into dir (the binary is bins.v120: publish does not run it).
func writePackaged(tb testing.TB, dir, version string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	m := SourceManifest{Name: "acme", Version: version, Protocol: "1.0", Platforms: []string{host.String()}, Binary: "marina-plugin-acme", Description: "bench plugin"}
	data, _ := json.Marshal(m)
	if err := writeArchive(filepath.Join(dir, "marina-plugin-acme_"+version+".tar.gz"), data, bins.v120, "marina-plugin-acme"); err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkPluginSearch(b *testing.B) {
	_, hostport := newTestRegistry(b)
	s := newStore(b)
	for i := 0; i < 10; i++ {
		dist := b.TempDir()
		for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
			d := fmt.Sprintf("%s/%s", dist, v)
			writePackaged(b, d, v)
			if _, err := s.Publish(testCtx(b), PublishOptions{Ref: fmt.Sprintf("oci://%s/bench/p%02d", hostport, i), Dir: d}); err != nil {
				b.Fatal(err)
			}
		}
	}
	src := []string{"oci://" + hostport + "/bench"}
	// Medians of 9 timed runs each, alternating (a nested testing.Benchmark
	// would deadlock on the benchmark lock).
	var ones, alls []time.Duration
	for b.Loop() {
		for i := 0; i < 9; i++ {
			start := time.Now()
			if _, err := s.Versions(testCtx(b), "oci://"+hostport+"/bench/p00"); err != nil {
				b.Fatal(err)
			}
			ones = append(ones, time.Since(start))
			start = time.Now()
			found, err := s.Search(testCtx(b), src, "")
			if err != nil || len(found) != 10 {
				b.Fatalf("search: %v, %d found", err, len(found))
			}
			alls = append(alls, time.Since(start))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / 1e6
	}
	one, all := median(ones), median(alls)
	bench.Figure(b, "plugin search (10 plugins x 3 versions, in-memory registry)", fmt.Sprintf("%.1f ms (%.1fx)", all, all/one), "reported", fmt.Sprintf("versions of one plugin: %.1f ms", one), true)
}
