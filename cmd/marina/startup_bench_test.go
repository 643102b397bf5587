package main

// Start-up benchmarks (issue 24). The goal: every command a person runs by
// hand — version, status (stopped and running lab), plugin list (a
// third-party plugin installed), cluster list, config view and shell
// completion — takes at most 5× the wall time of a hello-world Go binary and
// peaks at most 30 MiB, from the one marina program. The figures are
// reported (b.ReportMetric, and one "figure" line each that
// test/bench/summary.sh turns into `make bench`'s table), never asserted:
// the machine is shared and the goals are targets, not invariants. Run:
//
//	make bench
//	go test ./cmd/marina -run '^$' -bench 'Startup' -benchtime 20x -count=1
//
// How a run is measured. Every process (marina and the baseline alike) is
// started by a spawner: a small Go program built here that forks and execs
// the command once, waits for it with wait4 and prints the child's wall time
// (from just before the fork to the reap), user+system CPU time and peak RSS
// (ru_maxrss). The spawner is needed for the peak: on Linux a vfork-style
// spawn (what Go's os/exec does) charges the parent's own peak RSS to the
// child at exec (exec_mmap's setmax_mm_hiwater_rss), so the test binary
// would report its own size for every child. From the spawner the floor is
// the spawner's peak, about that of the hello-world program itself.
//
// The baseline is a hello-world program (fmt.Println) built by the same
// toolchain with the same flags as the marina binary under test (TestMain's
// build: plain `go build`, CGO_ENABLED as `make build` sets it on this OS),
// run alternately with marina in the same benchmark, so load on the machine
// shifts both. Medians over the runs.

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/core/vm/lima/limatest"
	"github.com/bcollard/marina/test/bench"
)

// The goals, reported beside each figure.
const (
	goalRatio  = 5.0  // wall time, × the hello-world baseline (issue 24)
	goalPeakMB = 30.0 // peak RSS, MiB
	goalInitMS = 10.0 // summed package init (inittrace), ms
)

// helloSource is the baseline: the least a Go program does.
const helloSource = `package main

import "fmt"

func main() { fmt.Println("hello, world") }
`

// spawnSource is the spawner (see the file comment). Usage: spawn PATH
// ARG...; the child gets the spawner's environment and stderr, /dev/null as
// stdin and stdout. Prints "wall_ns user_ns sys_ns maxrss_bytes exit_code".
const spawnSource = `package main

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{null.Fd(), null.Fd(), os.Stderr.Fd()}}
	start := time.Now()
	pid, err := syscall.ForkExec(os.Args[1], os.Args[1:], attr)
	if err != nil {
		os.Stderr.WriteString("spawn: " + err.Error() + "\n")
		os.Exit(1)
	}
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		_, err = syscall.Wait4(pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			break
		}
	}
	wall := time.Since(start)
	if err != nil {
		os.Stderr.WriteString("spawn: wait4: " + err.Error() + "\n")
		os.Exit(1)
	}
	rss := int64(ru.Maxrss)
	if runtime.GOOS != "darwin" { // Linux and the BSDs count KiB, darwin bytes
		rss *= 1024
	}
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	os.Stdout.WriteString(strconv.FormatInt(wall.Nanoseconds(), 10) + " " +
		strconv.FormatInt(syscall.TimevalToNsec(ru.Utime), 10) + " " +
		strconv.FormatInt(syscall.TimevalToNsec(ru.Stime), 10) + " " +
		strconv.FormatInt(rss, 10) + " " + strconv.Itoa(code) + "\n")
}
`

var (
	startupOnce   sync.Once
	helloBin      string
	spawnBin      string
	startupBinErr error
)

// startupBins builds the baseline and the spawner once per test binary,
// next to marinaBin (TestMain removes that directory).
func startupBins(b *testing.B) (hello, spawn string) {
	b.Helper()
	startupOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(marinaBin), "startup")
		helloBin, startupBinErr = buildSingleFile(dir, "hello", helloSource, buildCgo())
		if startupBinErr == nil {
			spawnBin, startupBinErr = buildSingleFile(dir, "spawn", spawnSource, "CGO_ENABLED=0")
		}
	})
	if startupBinErr != nil {
		b.Fatal(startupBinErr)
	}
	return helloBin, spawnBin
}

// buildSingleFile writes src as dir/name/main.go and builds it (outside
// marina's module) into dir/name/name.
func buildSingleFile(dir, name, src, cgo string) (string, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(d, "main.go"), []byte(src), 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(d, name)
	cmd := exec.Command("go", "build", "-o", bin, "main.go")
	cmd.Dir = d
	cmd.Env = append(os.Environ(), cgo, "GO111MODULE=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// procRun is one measured process.
type procRun struct {
	wall, cpu time.Duration
	peak      int64 // bytes
}

// spawnMeasure runs argv once through the spawner with env as its whole
// environment and returns what the spawner measured; a non-zero exit of
// the child is an error carrying its stderr.
func spawnMeasure(spawn string, env []string, argv ...string) (procRun, error) {
	cmd := exec.Command(spawn, argv...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return procRun{}, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, errb.String())
	}
	return parseSpawnLine(out.String(), argv, errb.String())
}

// parseSpawnLine reads the spawner's "wall user sys maxrss exit" line.
func parseSpawnLine(line string, argv []string, stderr string) (procRun, error) {
	f := strings.Fields(line)
	if len(f) != 5 {
		return procRun{}, fmt.Errorf("spawner output %q: want 5 fields", line)
	}
	var n [5]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return procRun{}, fmt.Errorf("spawner output %q: %v", line, err)
		}
		n[i] = v
	}
	if n[4] != 0 {
		return procRun{}, fmt.Errorf("%s: exit %d\n%s", strings.Join(argv, " "), n[4], stderr)
	}
	return procRun{wall: time.Duration(n[0]), cpu: time.Duration(n[1] + n[2]), peak: n[3]}, nil
}

// startupCase is one command BenchmarkStartup measures.
type startupCase struct {
	name  string // the sub-benchmark
	label string // the figure's name
	args  []string
	env   func(home string) []string // extra environment
	setup func(b *testing.B, home string)
	want  string // its stdout holds this (checked once)
}

// startupCases are the commands a person runs by hand. status is measured
// on a stopped lab with each driver, offline: lima (macOS's default) in a
// HOME with no instance answers "absent"; lima with a created VM that does
// not run (a Mac lab after `marina down`) answers "stopped"; host (Linux's
// default) with DOCKER_HOST on a socket nobody listens on answers
// "stopped"; and on a running machine: host on this machine's Docker
// engine (DOCKER_HOST or the default socket), which cluster list reads
// too (no clusters). All exit 0.
var startupCases = []startupCase{
	{name: "version", label: "marina version", args: []string{"version"}, want: "marina"},
	{name: "plugin-list-installed", label: "marina plugin list (a plugin installed)", args: []string{"plugin", "list"}, want: "listed",
		setup: func(b *testing.B, home string) {
			if out, err := runMarina(home, "plugin", "install", testPlugin(b, "listed", "1.0.0")); err != nil {
				b.Fatalf("plugin install: %v\n%s", err, out)
			}
			// Past the racy window (core/pluginstore): the untimed first
			// listing hashes the binary and records its digest.
			time.Sleep(1100 * time.Millisecond)
		}},
	{name: "config-view", label: "marina config view", args: []string{"config", "view"}, want: "driver:"},
	{name: "completion", label: "marina __complete cluster delete", args: []string{"__complete", "cluster", "delete", ""}, want: ":",
		env: hostDocker},
	{name: "status-lima", label: "marina status (lima, absent)", args: []string{"status"}, want: "driver lima: absent",
		env: func(string) []string { return []string{"MARINA_VM_DRIVER=lima"} }},
	{name: "status-lima-stopped", label: "marina status (lima, created and stopped)", args: []string{"status"}, want: "driver lima: stopped",
		env:   func(string) []string { return []string{"MARINA_VM_DRIVER=lima"} },
		setup: func(b *testing.B, home string) { limatest.CreatedVM(b, home) }},
	{name: "status-host", label: "marina status (host, stopped)", args: []string{"status"}, want: "driver host: stopped",
		env: func(home string) []string {
			return []string{"MARINA_VM_DRIVER=host", "DOCKER_HOST=unix://" + filepath.Join(home, "no-docker.sock")}
		}},
	{name: "status-host-running", label: "marina status (host, running)", args: []string{"status"}, want: "driver host: running",
		env: hostDocker},
	{name: "cluster-list", label: "marina cluster list (running, none)", args: []string{"cluster", "list"}, want: "",
		env: hostDocker},
}

// hostDocker is the environment of a lab on the host driver with this
// machine's Docker engine.
func hostDocker(string) []string {
	env := []string{"MARINA_VM_DRIVER=host"}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		env = append(env, "DOCKER_HOST="+h)
	}
	return env
}

// BenchmarkStartup: each of the commands, run as users run it (the real
// binary, a whole process), alternating with the hello-world baseline.
// Goals (issue 24): wall time ≤ 5× hello-world (x-hello), peak RSS ≤ 30 MiB
// (peak-MiB). Reported per command: wall-ms, cpu-ms (user+sys of the
// child), peak-MiB and x-hello, medians; hello-ms and hello-MiB, the
// baseline's medians of the same run. Never asserted.
func BenchmarkStartup(b *testing.B) {
	hello, spawn := startupBins(b)
	for _, c := range startupCases {
		b.Run(c.name, func(b *testing.B) {
			home := b.TempDir()
			if _, err := runMarina(home, "config", "init"); err != nil {
				b.Fatal(err)
			}
			env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
			if c.env != nil {
				env = append(env, c.env(home)...)
			}
			if c.setup != nil {
				c.setup(b, home)
			}
			// The command does what it is measured for (once, untimed; also
			// the page-cache warm-up).
			out, errOut, err := runEnv(env, marinaBin, c.args...)
			if err != nil || !strings.Contains(out, c.want) {
				b.Fatalf("marina %s: %v: stdout lacks %q:\n%s\nstderr:\n%s", strings.Join(c.args, " "), err, c.want, out, errOut)
			}
			if _, err := spawnMeasure(spawn, env, hello); err != nil {
				b.Fatal(err)
			}
			var runs, base []procRun
			argv := append([]string{marinaBin}, c.args...)
			for b.Loop() {
				r, err := spawnMeasure(spawn, env, argv...)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				h, err := spawnMeasure(spawn, env, hello)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				runs, base = append(runs, r), append(base, h)
			}
			reportStartup(b, c.label, runs, base)
		})
	}
}

// reportStartup reports the medians of runs against base and logs one
// "figure" line per goal (test/bench/summary.sh's input).
func reportStartup(b *testing.B, what string, runs, base []procRun) {
	b.Helper()
	wall, cpu, peak := medians(runs)
	hWall, hCPU, hPeak := medians(base)
	ratio := wall / hWall
	b.ReportMetric(wall, "wall-ms")
	b.ReportMetric(cpu, "cpu-ms")
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(ratio, "x-hello")
	b.ReportMetric(hWall, "hello-ms")
	b.ReportMetric(hPeak, "hello-MiB")
	bench.Figure(b, what+" wall", fmt.Sprintf("%.1f ms = %.1fx hello", wall, ratio),
		fmt.Sprintf("<= %gx hello", goalRatio), fmt.Sprintf("hello %.1f ms", hWall), ratio <= goalRatio)
	bench.Figure(b, what+" peak RSS", fmt.Sprintf("%.1f MiB", peak),
		fmt.Sprintf("<= %g MiB", goalPeakMB), fmt.Sprintf("hello %.1f MiB", hPeak), peak <= goalPeakMB)
	b.Logf("medians of %d runs each: %s: wall %.1f ms, cpu %.1f ms, peak %.1f MiB; hello-world: wall %.1f ms, cpu %.1f ms, peak %.1f MiB",
		len(runs), what, wall, cpu, peak, hWall, hCPU, hPeak)
}

// medians returns the median wall and CPU time (ms) and peak RSS (MiB) of runs.
func medians(runs []procRun) (wallMS, cpuMS, peakMiB float64) {
	var walls, cpus, peaks []float64
	for _, r := range runs {
		walls = append(walls, r.wall.Seconds()*1000)
		cpus = append(cpus, r.cpu.Seconds()*1000)
		peaks = append(peaks, float64(r.peak)/(1<<20))
	}
	return medianFloat(walls), medianFloat(cpus), medianFloat(peaks)
}

// runEnv runs bin with env as its whole environment.
func runEnv(env []string, bin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// initLine is one line of GODEBUG=inittrace=1 output:
//
//	init internal/bytealg @0.008 ms, 0.012 ms clock, 0 bytes, 0 allocs
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs`)

// pkgInit is one package's initialisation as inittrace reports it.
type pkgInit struct {
	pkg   string
	clock float64 // ms
	bytes int64
}

// parseInittrace returns the packages of inittrace output, in order; other
// lines (the program's own stderr) are skipped.
func parseInittrace(stderr string) ([]pkgInit, error) {
	var inits []pkgInit
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		m := initLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		clock, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", sc.Text(), err)
		}
		n, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", sc.Text(), err)
		}
		inits = append(inits, pkgInit{pkg: m[1], clock: clock, bytes: n})
	}
	return inits, sc.Err()
}

// initTrace runs bin with GODEBUG=inittrace=1 and returns its package inits.
func initTrace(env []string, bin string, args ...string) ([]pkgInit, error) {
	_, stderr, err := runEnv(append(slices.Clone(env), "GODEBUG=inittrace=1"), bin, args...)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr)
	}
	inits, err := parseInittrace(stderr)
	if err == nil && len(inits) == 0 {
		err = fmt.Errorf("%s %s: no inittrace lines on stderr:\n%s", bin, strings.Join(args, " "), stderr)
	}
	return inits, err
}

func sumClock(inits []pkgInit) float64 {
	var s float64
	for _, p := range inits {
		s += p.clock
	}
	return s
}

// BenchmarkStartupInit: the summed package initialisation of `marina
// version` (GODEBUG=inittrace=1: every package's "ms clock"), what every
// command and every built-in plugin process pays, against the hello-world
// baseline's in the same run. Goal (issue 14): ≤ 10 ms
// (init-ms). Also reported: init-pkgs (packages with init work), init-MiB
// (allocated by init), hello-init-ms; the five slowest packages (mean over
// the runs) are logged. Never asserted.
func BenchmarkStartupInit(b *testing.B) {
	hello, _ := startupBins(b)
	env := []string{"HOME=" + b.TempDir(), "PATH=" + os.Getenv("PATH")}
	var sums, helloSums []float64
	perPkg := map[string]float64{}
	var pkgs, allocated float64
	for b.Loop() {
		inits, err := initTrace(env, marinaBin, "version")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h, err := initTrace(env, hello)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		sums, helloSums = append(sums, sumClock(inits)), append(helloSums, sumClock(h))
		for _, p := range inits {
			perPkg[p.pkg] += p.clock
			allocated += float64(p.bytes)
		}
		pkgs += float64(len(inits))
	}
	n := float64(len(sums))
	sum, hSum := medianFloat(sums), medianFloat(helloSums)
	b.ReportMetric(sum, "init-ms")
	b.ReportMetric(pkgs/n, "init-pkgs")
	b.ReportMetric(allocated/n/(1<<20), "init-MiB")
	b.ReportMetric(hSum, "hello-init-ms")
	bench.Figure(b, "marina version package init", fmt.Sprintf("%.1f ms", sum),
		fmt.Sprintf("<= %g ms", goalInitMS), fmt.Sprintf("hello %.2f ms", hSum), sum <= goalInitMS)
	type slow struct {
		pkg string
		ms  float64
	}
	var top []slow
	for p, ms := range perPkg {
		top = append(top, slow{p, ms / n})
	}
	slices.SortFunc(top, func(x, y slow) int { return cmp.Or(cmp.Compare(y.ms, x.ms), strings.Compare(x.pkg, y.pkg)) })
	var lines []string
	for _, s := range top[:min(5, len(top))] {
		lines = append(lines, fmt.Sprintf("  %7.2f ms  %s", s.ms, s.pkg))
	}
	b.Logf("medians of %d runs: package init %.1f ms over %.0f packages (%.1f MiB allocated); hello-world %.2f ms. Slowest (mean):\n%s",
		len(sums), sum, pkgs/n, allocated/n/(1<<20), hSum, strings.Join(lines, "\n"))
}

// medianFloat is the median of xs (0 for none).
func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func TestParseInittrace(t *testing.T) {
	stderr := `init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs
init runtime @0.052 ms, 0.071 ms clock, 0 bytes, 0 allocs
something the program wrote
init github.com/google/gopacket/layers @31 ms, 92.250 ms clock, 4194304 bytes, 20011 allocs
`
	got, err := parseInittrace(stderr)
	if err != nil {
		t.Fatal(err)
	}
	want := []pkgInit{
		{"internal/bytealg", 0, 0},
		{"runtime", 0.071, 0},
		{"github.com/google/gopacket/layers", 92.25, 4194304},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parseInittrace = %+v, want %+v", got, want)
	}
	if s := sumClock(got); s != 92.321 {
		t.Errorf("sumClock = %v, want 92.321", s)
	}
}

// TestInittraceOfMarina: the real binary's inittrace parses (the benchmark
// would otherwise report 0 ms), and the summed init is more than nothing.
func TestInittraceOfMarina(t *testing.T) {
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	inits, err := initTrace(env, marinaBin, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(inits, func(p pkgInit) bool { return strings.HasPrefix(p.pkg, "github.com/spf13/cobra") }) {
		t.Errorf("no init line for cobra among %d packages", len(inits))
	}
	if sumClock(inits) <= 0 {
		t.Errorf("summed init %v ms", sumClock(inits))
	}
}

func TestParseSpawnLine(t *testing.T) {
	r, err := parseSpawnLine("20000000 3000000 1000000 2097152 0\n", []string{"x"}, "")
	if err != nil || r != (procRun{wall: 20 * time.Millisecond, cpu: 4 * time.Millisecond, peak: 2 << 20}) {
		t.Fatalf("parseSpawnLine = %+v, %v", r, err)
	}
	if _, err := parseSpawnLine("1 2 3 4 7", []string{"x"}, "boom"); err == nil || !strings.Contains(err.Error(), "exit 7") {
		t.Errorf("non-zero exit: %v", err)
	}
	if _, err := parseSpawnLine("1 2 3", []string{"x"}, ""); err == nil {
		t.Error("short line accepted")
	}
	if _, _, p := medians([]procRun{{peak: 30 << 20}, {peak: 10 << 20}, {peak: 20 << 20}}); p != 20 {
		t.Errorf("median peak = %v MiB, want 20", p)
	}
}
