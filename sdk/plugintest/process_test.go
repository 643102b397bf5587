package plugintest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
	"github.com/bcollard/marina/sdk/plugintest/internal/exampleplugin"
)

// TestOutOfProcess runs testdata/example (the example plugin behind
// sdk.Serve) as a real child process, the way marina runs plugins.
func TestOutOfProcess(t *testing.T) {
	bin := plugintest.Build(t, "./testdata/example")
	inProc := plugintest.New(t, exampleplugin.Plugin{})

	var pid int
	t.Run("same protocol as in-process", func(t *testing.T) {
		h := plugintest.Start(t, bin)
		pid = h.PID()
		if pid <= 0 || !plugintest.ProcessAlive(pid) {
			t.Fatalf("PID = %d, alive %v; want the running plugin's", pid, plugintest.ProcessAlive(pid))
		}
		if got, want := h.Describe(), inProc.Describe(); !reflect.DeepEqual(got, want) {
			t.Errorf("Describe out of process = %+v\nin process = %+v", got, want)
		}
		for _, hook := range []sdk.Hook{sdk.PreCluster, sdk.PostCluster} {
			opt := plugintest.WithConfig(`{"replicas":4,"pools":[{"name":"a","addresses":"172.30.1.1-172.30.1.7"}]}`)
			got, err := h.Run(hook, opt)
			if err != nil {
				t.Fatalf("%s: %v%s", hook, err, h.Stderr())
			}
			want, err := inProc.Run(hook, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s out of process = %+v\nin process = %+v", hook, got, want)
			}
			if !reflect.DeepEqual(h.Progress(), inProc.Progress()) || len(h.Progress()) == 0 {
				t.Errorf("%s progress out of process %q, in process %q", hook, h.Progress(), inProc.Progress())
			}
		}
		// The plugin's log lines arrive on stderr in go-plugin's JSON format.
		if s := h.Stderr(); !strings.Contains(s, `"@message":"pools announced"`) || !strings.Contains(s, `"@level":"info"`) {
			t.Errorf("stderr = %q, want the plugin's JSON log line", s)
		}
	})
	requireGone(t, pid)

	t.Run("idempotent", func(t *testing.T) {
		h := plugintest.Start(t, bin)
		h.RequireIdempotent(t, sdk.PostCluster)
		h.RequireIdempotent(t, sdk.PreCluster, plugintest.WithConfig(`{"replicas":2}`))
	})

	t.Run("config errors", func(t *testing.T) {
		h := plugintest.Start(t, bin)
		ds := h.ValidateConfig(`{"replicas":"x","pools":[{"nmae":"a"}]}`)
		want := []sdk.Diagnostic{
			{Severity: sdk.SeverityError, Path: "pools[0].nmae", Summary: `unknown field "nmae"; did you mean "name"?`},
			{Severity: sdk.SeverityError, Path: "replicas", Summary: `must be a whole number, got the string "x"`},
		}
		if !reflect.DeepEqual(ds, want) {
			t.Errorf("ValidateConfig = %+v, want %+v", ds, want)
		}
	})

	t.Run("failures", func(t *testing.T) {
		h := plugintest.Start(t, bin)
		pid = h.PID()
		testRunErrors(t, h)
	})
	requireGone(t, pid)

	t.Run("run by hand", func(t *testing.T) {
		var stderr bytes.Buffer
		cmd := exec.Command(bin)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("running the plugin by hand: %v, want exit status 1", err)
		}
		if !strings.Contains(stderr.String(), "This is the marina plugin example 0.3.1 (hooks: [PreCluster PostCluster])") {
			t.Errorf("stderr = %q, want an explanation", stderr.String())
		}
	})
}

func TestStartFailures(t *testing.T) {
	// go-plugin makes its socket dirs in the temp dir.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	notPlugin, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("this test needs the true command: %v", err)
	}
	// A program that fails at start the way a plugin does when its main
	// returns an error before sdk.Serve.
	exits := filepath.Join(t.TempDir(), "exits")
	script := "#!/bin/sh\necho 'loading settings' >&2\necho 'cannot initialise: missing thing' >&2\nexit 4\n"
	if err := os.WriteFile(exits, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	chatty := filepath.Join(t.TempDir(), "chatty")
	if err := os.WriteFile(chatty, []byte("#!/bin/sh\necho hello there\nsleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, binary string
		want         []string
	}{
		{name: "prints to stdout", binary: chatty, want: []string{"starting plugin", `it printed "hello there" to stdout before the handshake`}},
		{name: "not a plugin", binary: notPlugin, want: []string{"starting plugin", "exited before the handshake (exit status 0)", "must call sdk.Serve"}},
		{name: "exits at start", binary: exits, want: []string{
			"starting plugin", "exited before the handshake (exit status 4)",
			"plugin stderr (last lines):\nloading settings\ncannot initialise: missing thing",
		}},
		{name: "missing binary", binary: t.TempDir() + "/nope", want: []string{"starting plugin", "no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			h, err := plugintest.StartErr(t, tt.binary)
			if err == nil {
				t.Fatalf("start(%s) = %+v, want an error", tt.binary, h)
			}
			for _, want := range append(tt.want, tt.binary) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want it to contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "architecture") {
				t.Errorf("error %q blames the architecture; the plugin ran and exited", err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("failing took %v", d)
			}
		})
	}
	if dirs := socketDirs(t, tmp); len(dirs) != 0 {
		t.Errorf("failed starts left go-plugin socket dirs: %q", dirs)
	}
}

// socketDirs lists go-plugin's socket dirs in dir.
func socketDirs(t *testing.T, dir string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dir, "plugin-dir*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestBuildFailure(t *testing.T) {
	_, err := plugintest.BuildErr(t.TempDir(), "./testdata/does-not-exist", plugintest.DefaultBuildTimeout)
	if err == nil || !strings.Contains(err.Error(), "go build ./testdata/does-not-exist") {
		t.Errorf("build of a missing package = %v, want a go build error naming it", err)
	}
	// A build over its limit says which limit and how to raise it.
	_, err = plugintest.BuildErr(t.TempDir(), "./internal/exampleplugin", time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "stopped after 1ms, the build's time limit") || !strings.Contains(err.Error(), "plugintest.BuildTimeout(d)") {
		t.Errorf("build over its limit = %v, want the limit and the option that raises it", err)
	}
}

// requireGone fails if process pid (0: the subtest did not run) still exists.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	if pid != 0 && plugintest.ProcessAlive(pid) {
		t.Errorf("plugin process %d is still running after its test ended", pid)
	}
}
