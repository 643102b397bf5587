package scaffold

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bcollard/marina/test/bench"
)

// BenchmarkScaffoldBuild (make bench): what a new plugin costs its author
// now that the SDK is a module of its own. The scaffold is built cold (an
// empty GOCACHE, the module cache warm, as on a machine that has run `go
// mod download`), and its binary size and build time are compared with a
// plugin that also imports the heavy helpers, sdk/kube (client-go) and
// sdk/container (the Docker API), built the same way in the same run: a
// plugin pays only for what it imports. Goals (issue 15): binary ≤ 25 MB;
// cold build ≤ 1/3 of a plugin that pulls in everything (the issue's
// "today": 71 MB, every plugin built against the whole marina module).
func BenchmarkScaffoldBuild(b *testing.B) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	build := func(heavy bool) (size int64, took time.Duration) {
		dir := filepath.Join(b.TempDir(), "marina-plugin-acme")
		if _, err := Write(Options{Name: "acme", Dir: dir, SDKPath: repo}); err != nil {
			b.Fatal(err)
		}
		if heavy {
			src := "package main\n\nimport (\n\t\"github.com/bcollard/marina/sdk/container\"\n\t\"github.com/bcollard/marina/sdk/kube\"\n)\n\nvar _, _ = kube.DecodeManifests, container.Connect\n"
			if err := os.WriteFile(filepath.Join(dir, "heavy.go"), []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		gocache := b.TempDir()
		run := func(args ...string) {
			cmd := exec.Command("go", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOCACHE="+gocache)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("go %v: %v\n%s", args, err, out)
			}
		}
		run("mod", "tidy")
		start := time.Now()
		run("build", "-o", "plugin", ".")
		took = time.Since(start)
		fi, err := os.Stat(filepath.Join(dir, "plugin"))
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size(), took
	}
	for b.Loop() {
		size, took := build(false)
		heavySize, heavyTook := build(true)
		mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
		bench.Figure(b, "scaffold plugin binary", mb(size), "<= 25 MB", "with sdk/kube+sdk/container: "+mb(heavySize), size <= 25e6)
		ratio := float64(took) / float64(heavyTook)
		bench.Figure(b, "scaffold cold build", fmt.Sprintf("%.1f s (%.2fx)", took.Seconds(), ratio), "<= 0.33x",
			fmt.Sprintf("with sdk/kube+sdk/container: %.1f s", heavyTook.Seconds()), ratio <= 1.0/3)
		b.ReportMetric(float64(size)/1e6, "MB")
		b.ReportMetric(took.Seconds(), "s-cold-build")
	}
}
