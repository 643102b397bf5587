package plugin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test plugins (testdata/testplugin, testdata/rawplugin), built once.
var (
	testPluginBin string
	rawPluginBin  string
)

func TestMain(m *testing.M) {
	if os.Getenv("MARINA_PLUGIN_TEST_HOST") != "" {
		hostMain()
		return
	}
	if sock := os.Getenv("MARINA_PLUGIN_TEST_DIAL"); sock != "" {
		intruderMain(sock)
		return
	}
	dir, err := os.MkdirTemp("", "marina-plugin-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(goBin, "build", "-o", dir+string(os.PathSeparator), "./testdata/testplugin", "./testdata/rawplugin")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugins:", err)
		os.Exit(1)
	}
	testPluginBin = filepath.Join(dir, "testplugin")
	rawPluginBin = filepath.Join(dir, "rawplugin")
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// hostMain is a marina stand-in run as a child process: it starts a plugin,
// prints its pid, and waits to be killed (TestHostDeathStopsPlugin).
func hostMain() {
	spec := Spec{Name: "host-death", Path: os.Getenv("MARINA_PLUGIN_TEST_PLUGIN"), Args: []string{"-name", "host-death", "-marker", os.Getenv("MARINA_PLUGIN_TEST_MARKER")}}
	inst, err := Start(context.Background(), spec, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(inst.Pid())
	time.Sleep(time.Minute)
	os.Exit(3)
}

// newMarker returns a unique string the test's processes carry in their
// arguments, so the process table can be searched for them.
func newMarker(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "mk" + hex.EncodeToString(b)
}

// tp returns a Spec for the test plugin named name with extra flags.
func tp(name, marker string, flags ...string) Spec {
	return Spec{Name: name, Path: testPluginBin, Args: append([]string{"-name", name, "-marker", marker}, flags...)}
}

// testOpts are fast supervision settings with a discarded log.
// KillGrace is 2 s, not less: a cooperative plugin answers the shutdown
// request and exits (its SDK teardown ends its hook's tree first), which
// on a loaded 2-core CI machine took more than 300 ms, and Close reports a
// plugin that needed SIGTERM as an error.
func testOpts() Options {
	return Options{Logger: slog.New(slog.DiscardHandler), KillGrace: 2 * time.Second, StartTimeout: 20 * time.Second, HostVersion: "test"}
}

type proc struct {
	pid, pgid int
	state     string
	cmdline   string
}

// processes lists the live processes (zombies excluded: they are dead,
// only not yet reaped by an init that may never do it).
func processes(t *testing.T) []proc {
	t.Helper()
	var out []proc
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		paths, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if i < 0 {
				continue
			}
			f := strings.Fields(s[i+1:])
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pgid, _ := strconv.Atoi(f[2])
			cl, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			out = append(out, proc{pid: pid, pgid: pgid, state: f[0], cmdline: strings.ReplaceAll(string(cl), "\x00", " ")})
		}
	} else {
		b, err := exec.Command("ps", "-axo", "pid=,pgid=,stat=,command=").Output()
		if err != nil {
			t.Fatalf("ps: %v", err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 4 {
				continue
			}
			pid, _ := strconv.Atoi(f[0])
			pgid, _ := strconv.Atoi(f[1])
			out = append(out, proc{pid: pid, pgid: pgid, state: f[2][:1], cmdline: strings.Join(f[3:], " ")})
		}
	}
	live := out[:0]
	for _, p := range out {
		if p.state != "Z" && p.state != "X" {
			live = append(live, p)
		}
	}
	return live
}

// assertNoProcesses fails if any live process carries marker in its
// command line, is in one of the process groups, or has one of the pids.
func assertNoProcesses(t *testing.T, marker string, pgids ...int) {
	t.Helper()
	for _, p := range processes(t) {
		for _, g := range pgids {
			if g > 0 && (p.pgid == g || p.pid == g) {
				t.Errorf("process %d (%s) of plugin group %d is still running", p.pid, p.cmdline, g)
			}
		}
		if marker != "" && strings.Contains(p.cmdline, marker) {
			t.Errorf("process %d (%s) with marker %s is still running", p.pid, p.cmdline, marker)
		}
	}
}

// assertProcesses fails unless a live process carries marker.
func assertRunning(t *testing.T, marker string) {
	t.Helper()
	for _, p := range processes(t) {
		if strings.Contains(p.cmdline, marker) {
			return
		}
	}
	t.Errorf("no running process carries marker %s", marker)
}

// recorder is a slog.Handler that keeps records, for log assertions.
type recorder struct {
	level slog.Level
	attrs []slog.Attr
	mu    *sync.Mutex
	recs  *[]record
}

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newRecorder(level slog.Level) *recorder {
	return &recorder{level: level, mu: &sync.Mutex{}, recs: &[]record{}}
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{}
	for _, a := range r.attrs {
		m[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.recs = append(*r.recs, record{level: rec.Level, msg: rec.Message, attrs: m})
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(append([]slog.Attr(nil), r.attrs...), as...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

func (r *recorder) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), *r.recs...)
}

// find returns the records whose message contains s.
func (r *recorder) find(s string) []record {
	var out []record
	for _, rec := range r.records() {
		if strings.Contains(rec.msg, s) {
			out = append(out, rec)
		}
	}
	return out
}
