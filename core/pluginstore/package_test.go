package pluginstore

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
)

// The package tests build with a fake go command: this test binary, run
// with MARINA_TEST_FAKE_GO=1 (init runs before TestMain builds anything).
func init() {
	if os.Getenv("MARINA_TEST_FAKE_GO") == "1" {
		os.Exit(fakeGo(os.Args[1:]))
	}
}

// fakeGo plays `go build -trimpath -ldflags FLAGS -o OUT .` for GOOS/GOARCH.
// In FAKE_GO_DIR it records its pid (OS_ARCH.pid), its arguments and
// environment (OS_ARCH.json), and while it sleeps (FAKE_GO_SLEEP, or
// FAKE_GO_SLEEP_OS_ARCH) the most builds it saw running at once
// (OS_ARCH.seen, counting OS_ARCH.running files). The platform
// FAKE_GO_FAIL fails after FAKE_GO_FAIL_AFTER with a compiler error; the
// others write OUT: "fake binary for OS/ARCH".
func fakeGo(args []string) int {
	rec := os.Getenv("FAKE_GO_DIR")
	p := Platform{OS: os.Getenv("GOOS"), Arch: os.Getenv("GOARCH")}
	name := p.OS + "_" + p.Arch
	out := ""
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			out = args[i+1]
		}
	}
	_ = os.WriteFile(filepath.Join(rec, name+".pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	env, _ := json.Marshal(map[string]any{"args": args, "CGO_ENABLED": os.Getenv("CGO_ENABLED"), "GOTMPDIR": os.Getenv("GOTMPDIR")})
	_ = os.WriteFile(filepath.Join(rec, name+".json"), env, 0o644)
	running := filepath.Join(rec, name+".running")
	_ = os.WriteFile(running, nil, 0o644)
	defer os.Remove(running)

	if os.Getenv("FAKE_GO_FAIL") == p.String() {
		d, _ := time.ParseDuration(os.Getenv("FAKE_GO_FAIL_AFTER"))
		time.Sleep(d)
		fmt.Fprintf(os.Stderr, "# example.com/marina-plugin-acme\n./plugin.go:12:2: undefined: nosuch (%s)\n", p)
		return 1
	}
	sleep, _ := time.ParseDuration(os.Getenv("FAKE_GO_SLEEP"))
	if s := os.Getenv("FAKE_GO_SLEEP_" + name); s != "" {
		sleep, _ = time.ParseDuration(s)
	}
	seen := 0
	for end := time.Now().Add(sleep); ; {
		ms, _ := filepath.Glob(filepath.Join(rec, "*.running"))
		seen = max(seen, len(ms))
		if time.Now().After(end) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.WriteFile(filepath.Join(rec, name+".seen"), []byte(strconv.Itoa(seen)), 0o644)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(out, []byte("fake binary for "+p.String()+strings.Repeat(".", 4000)), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fakeBuild sets up the fake go command (env is FAKE_GO_* values) and a
// private TMPDIR (for Package's staging directory); it returns the record
// directory, the TMPDIR and the go command.
func fakeBuild(t *testing.T, env map[string]string) (rec, tmp, goCmd string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rec, tmp = t.TempDir(), t.TempDir()
	t.Setenv("MARINA_TEST_FAKE_GO", "1")
	t.Setenv("FAKE_GO_DIR", rec)
	t.Setenv("TMPDIR", tmp)
	for _, k := range []string{"FAKE_GO_SLEEP", "FAKE_GO_FAIL", "FAKE_GO_FAIL_AFTER"} {
		t.Setenv(k, env[k])
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return rec, tmp, exe
}

// eventLog collects Package's progress events (they come concurrently).
type eventLog struct {
	mu sync.Mutex
	ev []PackageEvent
}

func (l *eventLog) add(e PackageEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, e)
}

// phases is each platform's phases, in order.
func (l *eventLog) phases() map[Platform][]PackagePhase {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[Platform][]PackagePhase{}
	for _, e := range l.ev {
		m[e.Platform] = append(m[e.Platform], e.Phase)
	}
	return m
}

var acmeDescription = sdk.Description{
	Name: "acme", Version: "1.2.3", Protocol: fmt.Sprintf("%d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor),
	Hooks: []sdk.Hook{sdk.PostCluster},
}

// describeHost is a Describer that checks it is given this machine's build.
func describeHost(d sdk.Description) Describer {
	return func(_ context.Context, bin string) (*sdk.Description, error) {
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		if want := "fake binary for " + HostPlatform().String(); !strings.HasPrefix(string(data), want) {
			return nil, fmt.Errorf("asked to describe %q, not this machine's build", data[:min(len(data), 40)])
		}
		cp := d
		return &cp, nil
	}
}

// TestPackageBuildsConcurrently: Package builds the platforms side by
// side, never more at once than Jobs cut to the CPUs (DefaultPackageJobs
// when 0), reports each build's start and end, builds them as a release
// (CGO_ENABLED=0, -trimpath, -s -w, the version; its work directories in
// the staging directory), and lists the archives sorted by platform, each
// holding its own platform's binary; the staging directory is removed.
func TestPackageBuildsConcurrently(t *testing.T) {
	platforms := []Platform{{OS: "linux", Arch: "arm64"}, HostPlatform(), {OS: "darwin", Arch: "arm64"}, {OS: "darwin", Arch: "amd64"}, {OS: "linux", Arch: "amd64"}}
	var want []string
	for _, p := range platforms {
		if !slices.Contains(want, p.String()) {
			want = append(want, p.String())
		}
	}
	slices.Sort(want)
	for _, jobs := range []int{0, 1, 2, 64} {
		t.Run(fmt.Sprintf("jobs=%d", jobs), func(t *testing.T) {
			rec, tmp, goCmd := fakeBuild(t, map[string]string{"FAKE_GO_SLEEP": "400ms"})
			bound := min(jobs, runtime.NumCPU(), len(want))
			if jobs == 0 {
				bound = min(DefaultPackageJobs(), len(want))
			}
			var events eventLog
			out := filepath.Join(t.TempDir(), "dist")
			res, err := Package(testCtx(t), PackageOptions{
				Dir: t.TempDir(), Out: out, Platforms: platforms, Version: "1.2.3", Go: goCmd, Jobs: jobs,
				Describe: describeHost(acmeDescription), Progress: events.add,
			})
			if err != nil {
				t.Fatal(err)
			}

			most := 0
			for _, p := range want {
				name := strings.Replace(p, "/", "_", 1)
				data, err := os.ReadFile(filepath.Join(rec, name+".seen"))
				if err != nil {
					t.Fatalf("%s was not built: %v", p, err)
				}
				n, _ := strconv.Atoi(string(data))
				most = max(most, n)
				var call struct {
					Args                  []string
					CGO_ENABLED, GOTMPDIR string
				}
				data, _ = os.ReadFile(filepath.Join(rec, name+".json"))
				if err := json.Unmarshal(data, &call); err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(call.Args, " "); !strings.HasPrefix(got, "build -trimpath -ldflags -s -w -X main.version=1.2.3 -o ") ||
					call.CGO_ENABLED != "0" || !strings.HasPrefix(call.GOTMPDIR, tmp+string(filepath.Separator)) {
					t.Errorf("%s built with %s, CGO_ENABLED=%q, GOTMPDIR=%q: want a release build, its work directory in the staging directory", p, got, call.CGO_ENABLED, call.GOTMPDIR)
				}
			}
			if most != bound {
				t.Errorf("at most %d builds ran at once, want %d (jobs %d, %d CPUs)", most, bound, jobs, runtime.NumCPU())
			}

			var got []string
			for _, a := range res.Artifacts {
				got = append(got, a.Platform)
				files := tarFiles(t, a.Path)
				if !strings.HasPrefix(string(files["marina-plugin-acme"]), "fake binary for "+a.Platform+".") {
					t.Errorf("the %s archive holds %.30q", a.Platform, files["marina-plugin-acme"])
				}
				if a.Size == 0 || a.SHA256 == "" || a.BinarySHA256 == "" {
					t.Errorf("artifact %+v", a)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("artifacts %v, want %v (sorted by platform)", got, want)
			}
			sums, _ := os.ReadFile(res.Sums)
			var listed []string
			for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
				f := strings.Fields(line)
				listed = append(listed, f[len(f)-1])
			}
			if !slices.IsSorted(listed) || len(listed) != len(want) {
				t.Errorf("SHA256SUMS:\n%s", sums)
			}
			if left, _ := filepath.Glob(filepath.Join(out, "*.tmp")); len(left) > 0 {
				t.Errorf("temporary files left in --out: %v", left)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("the staging directory was not removed: %v", left)
			}

			phases := events.phases()
			for _, p := range want {
				pl, _ := ParsePlatform(p)
				if ph := phases[pl]; !slices.Equal(ph, []PackagePhase{PackageBuilding, PackageBuilt}) {
					t.Errorf("%s: events %v, want building, built", p, ph)
				}
			}
			events.mu.Lock()
			defer events.mu.Unlock()
			for _, e := range events.ev {
				if e.Index == 1 && e.Platform != HostPlatform() || e.Total != len(want) {
					t.Errorf("event %+v: want this machine's build first, 1 of %d", e, len(want))
				}
				if e.Phase == PackageBuilt && (e.Size != int64(len("fake binary for "+e.Platform.String())+4000) || e.Elapsed < 400*time.Millisecond) {
					t.Errorf("built event %+v: want the binary's size and the build's time", e)
				}
			}
		})
	}
}

// TestPackageFailureCancelsTheOthers: the first platform that fails to
// build stops the builds under way (their go commands end; Package returns
// in moments, not when they would have finished), the builds not started
// never start, the error names the platform with the compiler's output,
// and --out is left exactly as it was, with no temporary file; the staging
// directory is removed. A refused description stops them the same way.
func TestPackageFailureCancelsTheOthers(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: Package builds one platform at a time here")
	}
	self := HostPlatform()
	var fail Platform
	for _, p := range DefaultPackagePlatforms {
		if p != self {
			fail = p
			break
		}
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		desc    sdk.Description
		failed  Platform // its build fails
		stopped Platform // cancelled while building
		want    []string
	}{
		{
			name: "a build fails", failed: fail, stopped: self,
			env:  map[string]string{"FAKE_GO_SLEEP": "60s", "FAKE_GO_FAIL": fail.String(), "FAKE_GO_FAIL_AFTER": "300ms"},
			desc: acmeDescription, want: []string{"go build for " + fail.String(), "./plugin.go:12:2: undefined: nosuch (" + fail.String() + ")"},
		},
		{
			name: "the description is refused", stopped: fail,
			env:  map[string]string{"FAKE_GO_SLEEP": "60s", "FAKE_GO_SLEEP_" + self.OS + "_" + self.Arch: "100ms"},
			desc: sdk.Description{Name: "acme", Version: "9.9.9", Protocol: acmeDescription.Protocol}, want: []string{"reports version 9.9.9"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tmp, goCmd := fakeBuild(t, tc.env)
			out := t.TempDir()
			before := map[string]string{
				"marina-plugin-acme_1.0.0_linux_amd64.tar.gz":     "an earlier release",
				"marina-plugin-acme_1.0.0_linux_amd64.tar.gz.sig": "its signature",
				"SHA256SUMS": "the earlier sums",
			}
			for name, content := range before {
				if err := os.WriteFile(filepath.Join(out, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var events eventLog
			start := time.Now()
			_, err := Package(testCtx(t), PackageOptions{
				Dir: t.TempDir(), Out: out, Version: "1.2.3", Go: goCmd, Jobs: 2,
				Describe: describeHost(tc.desc), Progress: events.add,
			})
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("Package returned after %s: the other builds were not stopped", took)
			}
			if err == nil {
				t.Fatal("Package succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}

			phases := events.phases()
			for _, p := range DefaultPackagePlatforms {
				want := []PackagePhase{PackageNotRun}
				switch p {
				case tc.failed:
					want = []PackagePhase{PackageBuilding, PackageFailed}
				case tc.stopped:
					want = []PackagePhase{PackageBuilding, PackageCancelled}
				case self:
					want = []PackagePhase{PackageBuilding, PackageBuilt}
				}
				if !slices.Equal(phases[p], want) {
					t.Errorf("%s: events %v, want %v", p, phases[p], want)
				}
			}
			// The stopped go command is gone (Package waited for it).
			data, err := os.ReadFile(filepath.Join(rec, tc.stopped.OS+"_"+tc.stopped.Arch+".pid"))
			if err != nil {
				t.Fatalf("%s never started: %v", tc.stopped, err)
			}
			pid, _ := strconv.Atoi(string(data))
			if proc, err := os.FindProcess(pid); err == nil {
				if err := proc.Signal(syscall.Signal(0)); err == nil {
					proc.Kill()
					t.Errorf("the go command building %s (pid %d) still runs", tc.stopped, pid)
				}
			}

			entries, _ := os.ReadDir(out)
			if len(entries) != len(before) {
				t.Errorf("--out holds %v, want only what was there before", entries)
			}
			for name, content := range before {
				if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(got) != content {
					t.Errorf("%s in --out: %q %v, want it unchanged", name, got, err)
				}
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("the staging directory was not removed: %v", left)
			}
		})
	}
}

// tarFiles returns the regular files of a .tar.gz by name.
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}
