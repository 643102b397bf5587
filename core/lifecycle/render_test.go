package lifecycle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/test/golden"
)

// fakeClock advances by tick on every call, so event times and durations
// are fixed regardless of how fast the test machine is.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	tick time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 12, 3, 8, 40, 0, 0, time.UTC), tick: 300 * time.Millisecond}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.tick)
	return t
}

// syncBuffer is a bytes.Buffer safe to read while a renderer writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// demoSteps is a small "up" pipeline: one step that changes and reports
// progress, one converged, one failing, one never reached.
func demoSteps() []Step {
	return []Step{
		NewStep("Create VM",
			func(context.Context) ([]Change, error) {
				return []Change{
					{Action: "create", Target: "VM marina", Detail: "vz, 4 CPUs, 8GiB"},
					{Action: "create", Target: "docker network kind", Detail: "172.30.0.0/16"},
				}, nil
			},
			func(_ context.Context, r Reporter, _ []Change) error {
				r.Progress("booting")
				r.Progress("waiting for ssh\nattempt 2")
				return nil
			}),
		NewStep("Start registry mirrors", func(context.Context) ([]Change, error) { return nil, nil }, nil),
		NewStep("Patch CoreDNS", nil, func(context.Context, Reporter, []Change) error {
			return errors.New("kubectl apply: exit status 1\nerror: configmap \"coredns\" is invalid")
		}),
		NewStep("Install MetalLB", nil, nil),
	}
}

func TestPlainRendererGolden(t *testing.T) {
	tests := []struct {
		name   string
		golden string
		opts   Options
	}{
		{"apply with failure", "plain_apply.golden", Options{}},
		{"dry run", "plain_dryrun.golden", Options{DryRun: true}},
		{"force apply", "plain_force.golden", Options{ForceApply: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.opts.Renderer = NewPlainRenderer(&out)
			tt.opts.Now = newFakeClock().Now
			_, err := Run(context.Background(), "up", demoSteps(), tt.opts)
			tt.opts.Renderer.Close()
			if tt.opts.DryRun && err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if !tt.opts.DryRun && err == nil {
				t.Fatal("want the Patch CoreDNS failure")
			}
			if strings.Contains(out.String(), "\x1b") {
				t.Error("plain output contains an ANSI escape")
			}
			golden.Check(t, "testdata/"+tt.golden, out.Bytes())
		})
	}
}

func TestJSONRenderer(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeClock()
	rep, _ := Run(context.Background(), "up", demoSteps(), Options{Renderer: NewJSONRenderer(&out), Now: clock.Now})

	wantTypes := []string{
		"start", "progress", "progress", "finish", // Create VM
		"start", "finish", // Start registry mirrors
		"start", "finish", // Patch CoreDNS
		"finish", // Install MetalLB, not run
	}
	sc := bufio.NewScanner(&out)
	var i int
	for ; sc.Scan(); i++ {
		line := sc.Bytes()
		if !json.Valid(line) {
			t.Fatalf("line %d is not valid JSON: %s", i+1, line)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"time", "pipeline", "step", "index", "total", "type", "durationMs"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i+1, k, line)
			}
		}
		for k := range m {
			switch k {
			case "time", "pipeline", "step", "index", "total", "type", "durationMs", "status", "message", "changes", "error":
			default:
				t.Errorf("line %d has unexpected field %q", i+1, k)
			}
		}
		if i < len(wantTypes) && m["type"] != wantTypes[i] {
			t.Errorf("line %d type = %v, want %s", i+1, m["type"], wantTypes[i])
		}
		if m["pipeline"] != "up" || m["total"] != float64(4) {
			t.Errorf("line %d pipeline/total = %v/%v", i+1, m["pipeline"], m["total"])
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["time"])); err != nil {
			t.Errorf("line %d time: %v", i+1, err)
		}
		if m["type"] != "finish" {
			continue
		}
		idx := int(m["index"].(float64)) - 1
		res := rep.Steps[idx]
		if m["step"] != res.Name || m["status"] != string(res.Status) {
			t.Errorf("line %d finish = %v/%v, report says %s/%s", i+1, m["step"], m["status"], res.Name, res.Status)
		}
		if int64(m["durationMs"].(float64)) != res.Duration.Milliseconds() {
			t.Errorf("line %d durationMs = %v, report says %d", i+1, m["durationMs"], res.Duration.Milliseconds())
		}
		_, hasErr := m["error"]
		if hasErr != (res.Status == StatusFailed) {
			t.Errorf("line %d error field present=%v for status %s", i+1, hasErr, res.Status)
		}
		if res.Name == "Create VM" {
			ch, _ := m["changes"].([]any)
			if len(ch) != 2 || ch[0].(map[string]any)["action"] != "create" || ch[0].(map[string]any)["target"] != "VM marina" {
				t.Errorf("Create VM changes = %v", m["changes"])
			}
		}
	}
	if i != len(wantTypes) {
		t.Errorf("got %d lines, want %d", i, len(wantTypes))
	}
}

func TestTTYRendererOutput(t *testing.T) {
	events := []Event{
		{Type: EventStart, Step: "Create VM"},
		{Type: EventProgress, Step: "Create VM", Message: "booting\nignored second line"},
		{Type: EventFinish, Step: "Create VM", Status: StatusDone, Duration: 1204 * time.Millisecond},
		{Type: EventStart, Step: "Start mirrors"},
		{Type: EventFinish, Step: "Start mirrors", Status: StatusUnchanged, Duration: 20 * time.Millisecond},
		{Type: EventStart, Step: "Patch CoreDNS"},
		{Type: EventFinish, Step: "Patch CoreDNS", Status: StatusFailed, Duration: 300 * time.Millisecond, Error: "boom"},
		{Type: EventFinish, Step: "Install MetalLB", Status: StatusNotRun},
		{Type: EventStart, Step: "Route"},
		{Type: EventPlan, Step: "Route", Changes: chg("route 172.30.0.0/16")},
		{Type: EventFinish, Step: "Route", Status: StatusPlanned, Changes: chg("route 172.30.0.0/16")},
		{Type: EventStart, Step: "Wait"},
		{Type: EventFinish, Step: "Wait", Status: StatusCancelled, Duration: 2*time.Minute + 3*time.Second},
		{Type: EventStart, Step: "PostUp"},
		{Type: EventFinish, Step: "PostUp", Status: StatusUnchanged, Changes: []Change{{Action: ActionReuse, Target: "plugin a"}}},
	}
	const e = "\r\x1b[2K"
	tests := []struct {
		name    string
		noColor string
		want    string
	}{
		{
			name:    "NO_COLOR set",
			noColor: "1",
			want: e + "⠋ Create VM" + e + "⠋ Create VM: booting" + e + "✓ Create VM (1.2s)\n" +
				e + "⠋ Start mirrors" + e + "· Start mirrors (unchanged)\n" +
				e + "⠋ Patch CoreDNS" + e + "✗ Patch CoreDNS (300ms)\n" +
				e + "- Install MetalLB (not run)\n" +
				e + "⠋ Route" + e + "○ Route (1 change)\n" + "    would create route 172.30.0.0/16\n" +
				e + "⠋ Wait" + e + "✗ Wait (cancelled after 2m3s)\n" +
				e + "⠋ PostUp" + e + "· PostUp (unchanged, 1 reused)\n" + "    would reuse plugin a\n",
		},
		{
			name:    "colour",
			noColor: "",
			want: e + "\x1b[36m⠋\x1b[0m Create VM" + e + "\x1b[36m⠋\x1b[0m Create VM: booting" + e + "\x1b[32m✓\x1b[0m Create VM (1.2s)\n" +
				e + "\x1b[36m⠋\x1b[0m Start mirrors" + e + "\x1b[2m· Start mirrors (unchanged)\x1b[0m\n" +
				e + "\x1b[36m⠋\x1b[0m Patch CoreDNS" + e + "\x1b[31m✗\x1b[0m Patch CoreDNS (300ms)\n" +
				e + "\x1b[2m- Install MetalLB (not run)\x1b[0m\n" +
				e + "\x1b[36m⠋\x1b[0m Route" + e + "\x1b[36m○\x1b[0m Route (1 change)\n" + "    would create route 172.30.0.0/16\n" +
				e + "\x1b[36m⠋\x1b[0m Wait" + e + "\x1b[31m✗\x1b[0m Wait (cancelled after 2m3s)\n" +
				e + "\x1b[36m⠋\x1b[0m PostUp" + e + "\x1b[2m· PostUp (unchanged, 1 reused)\x1b[0m\n" + "    would reuse plugin a\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tt.noColor)
			var out syncBuffer
			r := newTTYRenderer(&out, time.Hour) // no spinner tick during the test: output is exact
			for _, ev := range events {
				r.Handle(ev)
			}
			r.Close()
			if got := out.String(); got != tt.want {
				t.Errorf("output mismatch\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestTTYSpinnerStopsOnClose(t *testing.T) {
	before := runtime.NumGoroutine()
	var out syncBuffer
	r := newTTYRenderer(&out, time.Millisecond)
	r.Handle(Event{Type: EventStart, Step: "Create VM"})

	// The spinner goroutine must animate the live line: wait (bounded) for a later frame.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), spinnerFrames[2]) {
		if time.Now().After(deadline) {
			t.Fatalf("spinner never advanced; output %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	r.Close()
	r.Close() // idempotent
	select {
	case <-r.done:
	default:
		t.Fatal("Close returned before the spinner goroutine exited")
	}
	if !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("Close left the live line unterminated: %q", out.String())
	}
	// After Close nothing starts a goroutine or writes spinner frames.
	r.Handle(Event{Type: EventStart, Step: "late"})
	r.Handle(Event{Type: EventFinish, Step: "late", Status: StatusDone})
	n := len(out.String())
	for i := 0; runtime.NumGoroutine() > before; i++ {
		if i > 500 {
			t.Fatalf("goroutines: %d before, %d after Close", before, runtime.NumGoroutine())
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // ten ticks' worth
	if got := out.String()[n:]; got != "" {
		t.Errorf("output after Close: %q", got)
	}
}

// A renderer closed before any step started must not start its spinner later.
func TestTTYClosedBeforeStartStartsNoSpinner(t *testing.T) {
	var out syncBuffer
	r := newTTYRenderer(&out, time.Millisecond)
	r.Close()
	r.Handle(Event{Type: EventStart, Step: "late"})
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running {
		r.active = false
		close(r.stop)
		<-r.done
		t.Fatal("Handle after Close started the spinner goroutine")
	}
}

// Plugin hooks will report progress concurrently from inside one step; every
// renderer must keep lines whole (and -race must stay quiet).
func TestRenderersConcurrentProgress(t *testing.T) {
	const workers, msgs = 8, 50
	tests := []struct {
		name  string
		new   func(w *syncBuffer) Renderer
		check func(t *testing.T, out string)
	}{
		{"plain", func(w *syncBuffer) Renderer { return NewPlainRenderer(w) }, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != workers*msgs+2 {
				t.Errorf("got %d lines, want %d", len(lines), workers*msgs+2)
			}
			for _, l := range lines {
				if !strings.HasPrefix(l, "2026-12-03T") {
					t.Fatalf("torn line %q", l)
				}
			}
		}},
		{"json", func(w *syncBuffer) Renderer { return NewJSONRenderer(w) }, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != workers*msgs+2 {
				t.Errorf("got %d lines, want %d", len(lines), workers*msgs+2)
			}
			for _, l := range lines {
				if !json.Valid([]byte(l)) {
					t.Fatalf("torn JSON line %q", l)
				}
			}
		}},
		{"tty", func(w *syncBuffer) Renderer { return newTTYRenderer(w, time.Millisecond) }, func(t *testing.T, out string) {
			if !strings.Contains(out, "\r\x1b[2K✓ hooks (") {
				t.Errorf("no final ✓ line in %q", out[max(0, len(out)-200):])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", "1")
			var out syncBuffer
			r := tt.new(&out)
			step := NewStep("hooks", nil, func(_ context.Context, rep Reporter, _ []Change) error {
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for m := range msgs {
							rep.Progress(fmt.Sprintf("plugin-%d: message %d", w, m))
						}
					}()
				}
				wg.Wait()
				return nil
			})
			if _, err := Run(context.Background(), "up", []Step{step}, Options{Renderer: r, Now: newFakeClock().Now}); err != nil {
				t.Fatal(err)
			}
			r.Close()
			tt.check(t, out.String())
		})
	}
}

func TestNewRenderer(t *testing.T) {
	tests := []struct {
		format  string
		tty     bool
		want    string
		wantErr bool
	}{
		{"", true, "*lifecycle.ttyRenderer", false},
		{"", false, "*lifecycle.plainRenderer", false},
		{"auto", true, "*lifecycle.ttyRenderer", false},
		{"auto", false, "*lifecycle.plainRenderer", false},
		{"plain", true, "*lifecycle.plainRenderer", false},
		{"json", true, "*lifecycle.jsonRenderer", false},
		{"json", false, "*lifecycle.jsonRenderer", false},
		{"JSON", false, "", true},
		{"tty", true, "", true},
		{"xml", false, "", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/tty=%v", tt.format, tt.tty), func(t *testing.T) {
			r, err := NewRenderer(&bytes.Buffer{}, tt.format, tt.tty)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %T", r)
				}
				for _, s := range []string{fmt.Sprintf("%q", tt.format), "auto", "plain", "json"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %s", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := fmt.Sprintf("%T", r); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	tests := []struct {
		name string
		w    io.Writer
	}{
		{"buffer", &bytes.Buffer{}},
		{"pipe", pw},
	}
	for _, tt := range tests {
		if IsTerminal(tt.w) {
			t.Errorf("IsTerminal(%s) = true", tt.name)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0ms"},
		{0, "0ms"},
		{850 * time.Millisecond, "850ms"},
		{999*time.Millisecond + 900*time.Microsecond, "999ms"},
		{time.Second, "1s"},
		{1204 * time.Millisecond, "1.2s"},
		{59960 * time.Millisecond, "1m0s"},
		{2*time.Minute + 3400*time.Millisecond, "2m3s"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1h2m3s"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.d); got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
