package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bcollard/marina/sdk"
)

// floodPluginBin builds testdata/floodplugin once, next to the other test
// plugins (TestMain removes their directory).
var floodPluginBin = sync.OnceValues(func() (string, error) {
	out := filepath.Join(filepath.Dir(testPluginBin), "floodplugin")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/floodplugin")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("building testdata/floodplugin: " + err.Error() + "\n" + string(b))
	}
	return out, nil
})

// floodRun is one dispatcher over the flood plugin, with marina's logger on
// a terminal stand-in (slog's text handler, as marina's) and a run log file.
type floodRun struct {
	d       *Dispatcher
	term    *syncBuffer
	logPath string
	logFile *os.File
}

func newFloodRun(t *testing.T, config any) *floodRun {
	t.Helper()
	bin, err := floodPluginBin()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	r := &floodRun{term: &syncBuffer{}, logPath: filepath.Join(t.TempDir(), "run.log")}
	r.logFile, err = os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	opts := testOpts()
	opts.Logger = slog.New(slog.NewTextHandler(r.term, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts.LogFile = r.logFile
	r.d = NewDispatcher([]Plugin{{Spec: Spec{Name: "flood", Path: bin}, Config: cfg}}, opts)
	t.Cleanup(func() {
		_ = r.d.Close()
		_ = r.logFile.Close()
	})
	return r
}

// close stops the plugin and returns the run log.
func (r *floodRun) close(t *testing.T) string {
	t.Helper()
	if err := r.d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertNoEscapes fails if s carries a control byte a terminal obeys, or
// the payload of the flood plugin's OSC title sequence.
func assertNoEscapes(t *testing.T, what, s string) {
	t.Helper()
	if i := strings.IndexAny(s, "\x1b\x07\r\u009b\u009d"); i >= 0 {
		t.Errorf("%s carries control byte %q at %d: %q", what, s[i], i, s[max(0, i-40):min(len(s), i+40)])
	}
	if strings.Contains(s, "pwned") {
		t.Errorf("%s carries the OSC title payload \"pwned\"", what)
	}
}

// TestStderrFloodAndEscapes: a hook writes 20 MB of escape-laden lines to
// stderr and fails with an error message carrying an OSC title and colours.
// The terminal gets at most termBudget of it and a warning of how much it
// did not get; the run log at most fileBudget per window, a line saying how
// much was left out, and the tail (the flood's last lines); the error names
// the plugin's message without the escapes. Before the caps, all 20 MB
// reached both, escapes included.
func TestStderrFloodAndEscapes(t *testing.T) {
	t.Parallel()
	const flood = 20 << 20
	r := newFloodRun(t, map[string]any{
		"stderrBytes": flood,
		"error":       "\x1b]0;pwned\x07\x1b[31mthe thing is broken\x1b[0m\nsecond line\r\x1b[2K",
	})
	_, err := r.d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
	pe := asError(t, err)
	if pe.Kind != KindHook {
		t.Fatalf("kind = %s, want hook: %v", pe.Kind, err)
	}
	msg := err.Error()
	assertNoEscapes(t, "the error message", msg)
	if !strings.Contains(msg, "plugin flood 1.0.0, hook PostUp: the thing is broken\nsecond line") {
		t.Errorf("error message = %q, want the plugin's message, cleaned", msg)
	}
	if !strings.Contains(msg, "last stderr lines of flood:") || !strings.Contains(msg, "flood line") {
		t.Errorf("error message = %q, want the last stderr lines, cleaned", msg)
	}
	log := r.close(t)

	// The terminal: the stderr re-logged, capped (the hook's window, and
	// the window of what arrived after the hook; text handler lines are
	// about twice the raw line), then the warnings.
	term := r.term.String()
	assertNoEscapes(t, "the terminal", term)
	if len(term) > 8*termBudget {
		t.Errorf("the terminal got %d bytes of a %d-byte flood, want under %d", len(term), flood, 8*termBudget)
	}
	if !strings.Contains(term, "plugin stderr is over 64 KiB in this hook") || !strings.Contains(term, "were not shown: over 64 KiB in one hook") {
		t.Errorf("the terminal has no warning of what it was not shown:\n%s", tail(term, 2000))
	}

	// The run log.
	assertNoEscapes(t, "the run log", log)
	if limit := 2*(fileBudget+tailBudget) + 4096; len(log) > limit {
		t.Errorf("the run log has %d bytes of a %d-byte flood, want at most %d", len(log), flood, limit)
	}
	if !strings.Contains(log, "[flood] [marina] stderr over 1 MiB in this hook") || !strings.Contains(log, "stderr lines (") || !strings.Contains(log, "left out: over 1 MiB in one hook; the last") {
		t.Errorf("the run log does not say what it left out:\n%s", tail(log, 2000))
	}
	// The tail is kept: the run log reaches the end of the flood (lines
	// still in flight when the plugin is stopped may be lost with it).
	if last := lastFloodLine(log); last < flood/110-5000 {
		t.Errorf("the last flood line in the run log is %d, want the tail (the flood has about %d lines):\n%s", last, flood/110, tail(log, 2000))
	}
}

// lastFloodLine returns the highest line number of the flood in the log.
func lastFloodLine(log string) int {
	last := -1
	for _, l := range strings.Split(log, "\n") {
		var n int
		if _, err := fmt.Sscanf(l, "[flood] flood line %d", &n); err == nil && n > last {
			last = n
		}
	}
	return last
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestOutputLimits: a declared output over MaxOutputValue (10 MB) fails the
// hook with the limits in the message and publishes nothing; undeclared
// outputs are dropped with a warning naming them (cleaned), and the
// declared ones published. Before, both were published whole.
func TestOutputLimits(t *testing.T) {
	t.Parallel()
	t.Run("value over the limit", func(t *testing.T) {
		t.Parallel()
		r := newFloodRun(t, map[string]any{"outputs": map[string]int{"small": 3, "big": 10 << 20}})
		res, err := r.d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
		pe := asError(t, err)
		if pe.Kind != KindOutput || pe.Plugin != "flood" {
			t.Fatalf("error = %v (kind %s), want an output error of flood", err, pe.Kind)
		}
		for _, want := range []string{`plugin flood 1.0.0, hook PostUp: returned output "big" of 10 MiB`, "at most 64 KiB per output value (1 MiB for all", "Env.StateDir"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error = %q, want %q", err, want)
			}
		}
		if res["flood"] != nil || len(r.d.Outputs()["flood"]) != 0 {
			t.Errorf("outputs were published: results %v, Outputs() has %d keys", res, len(r.d.Outputs()["flood"]))
		}
	})
	t.Run("undeclared outputs", func(t *testing.T) {
		t.Parallel()
		r := newFloodRun(t, map[string]any{"outputs": map[string]int{"small": 3, "secret\x1b[8m": 1 << 20, "extra": 1}})
		res, err := r.d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"small": "xxx"}
		if got := r.d.Outputs()["flood"]; !mapsEqual(got, want) {
			t.Errorf("published %d outputs %v, want only the declared one", len(got), keys(got))
		}
		if got := res["flood"].Outputs; !mapsEqual(got, want) {
			t.Errorf("result outputs %v, want only the declared one", keys(got))
		}
		r.close(t)
		term := r.term.String()
		assertNoEscapes(t, "the terminal", term)
		if !strings.Contains(term, `outputs its description does not declare: \"extra\", \"secret\"; dropped`) || !strings.Contains(term, "declared: small, big") {
			t.Errorf("no warning naming the undeclared outputs:\n%s", term)
		}
	})
	t.Run("too many outputs", func(t *testing.T) {
		t.Parallel()
		outs := map[string]int{}
		for i := 0; i <= MaxOutputKeys; i++ {
			outs["k"+string(rune('A'+i%26))+string(rune('a'+i/26))] = 1
		}
		r := newFloodRun(t, map[string]any{"outputs": outs})
		_, err := r.d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, nil)
		if pe := asError(t, err); pe.Kind != KindOutput || !strings.Contains(err.Error(), "returned 65 outputs; marina takes at most 64 per hook") {
			t.Errorf("error = %v, want too many outputs", err)
		}
	})
}

// TestProgressAndWarningsCleaned: a plugin's progress messages, hook
// warnings and host-change reasons (shown before a privileged command)
// reach the caller without control sequences, and capped.
func TestProgressAndWarningsCleaned(t *testing.T) {
	t.Parallel()
	r := newFloodRun(t, map[string]any{
		"progress": "\x1b]0;pwned\x07step \x1b[1mone\x1b[0m\r" + strings.Repeat("p", 10000),
		"warning":  "\x1b]52;c;cHduZWQ=\x07careful\x1b[2K\u202e",
		"reason":   "add a resolver\r\x1b[2K\x1b[32mthis is harmless, type your password",
	})
	var mu sync.Mutex
	var progress []string
	res, err := r.d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{}, func(p, msg string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, p+": "+msg)
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) != 1 || !strings.HasPrefix(progress[0], "flood: step one"+strings.Repeat("p", 100)) || len(progress[0]) > maxProgress+20 {
		t.Errorf("progress = %.200q (%d bytes), want it cleaned and capped", progress, len(strings.Join(progress, "")))
	}
	assertNoEscapes(t, "the progress", strings.Join(progress, "\n"))
	if w := res["flood"].Warnings; len(w) != 1 || w[0].Summary != "careful" {
		t.Errorf("warnings = %q, want the summary cleaned", w)
	}
	if h := res["flood"].HostChanges; len(h) != 1 || h[0].Reason != "add a resolverthis is harmless, type your password" || h[0].Resolver.Domain != "flood.test" {
		t.Errorf("host changes = %+v, want the reason cleaned", h)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
