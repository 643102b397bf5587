package lifecycle

import (
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// ANSI sequences used by the TTY renderer.
const (
	ansiEraseLine = "\r\x1b[2K" // carriage return + erase the whole line
	ansiGreen     = "\x1b[32m"
	ansiRed       = "\x1b[31m"
	ansiCyan      = "\x1b[36m"
	ansiDim       = "\x1b[2m"
	ansiReset     = "\x1b[0m"
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// NewTTYRenderer returns the interactive renderer: the running step is one
// live line (braille spinner, step name, latest progress message) redrawn in
// place; when the step ends the line is rewritten for good:
//
//	✓ Create VM (1.2s)
//	· Start registry mirrors (unchanged)
//	✗ Patch CoreDNS (300ms)
//	- Install MetalLB (not run)
//
// In dry-run a step with changes shows "○ Name (2 changes)" followed by one
// "would ..." line per change. The spinner runs in its own goroutine from the
// first step until Close. Colours are off when NO_COLOR is set (non-empty);
// the cursor-control sequences stay.
func NewTTYRenderer(w io.Writer) Renderer {
	return newTTYRenderer(w, 100*time.Millisecond)
}

func newTTYRenderer(w io.Writer, tick time.Duration) *ttyRenderer {
	return &ttyRenderer{w: w, tick: tick, color: os.Getenv("NO_COLOR") == ""}
}

type ttyRenderer struct {
	w     io.Writer
	tick  time.Duration
	color bool

	mu      sync.Mutex
	active  bool // a step's live line is on screen
	step    string
	msg     string
	frame   int
	running bool // spinner goroutine started
	closed  bool
	stop    chan struct{}
	done    chan struct{} // closed when the spinner goroutine has returned
}

func (r *ttyRenderer) Handle(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.Type {
	case EventStart:
		r.active, r.step, r.msg, r.frame = true, ev.Step, "", 0
		r.startSpinner()
		r.draw()
	case EventProgress:
		if r.active && ev.Step == r.step {
			r.msg = firstLine(ev.Message)
			r.draw()
		}
	case EventFinish:
		r.active = false
		r.write(ansiEraseLine + r.finishLine(ev) + "\n")
		if ev.Status == StatusPlanned || ev.Status == StatusUnchanged && len(ev.Changes) > 0 {
			for _, l := range changeLines(ev.Changes) {
				r.write("    " + l + "\n")
			}
		}
	}
}

func (r *ttyRenderer) finishLine(ev Event) string {
	d := formatDuration(ev.Duration)
	switch ev.Status {
	case StatusDone:
		return r.paint(ansiGreen, "✓") + " " + ev.Step + " (" + d + ")"
	case StatusFailed:
		return r.paint(ansiRed, "✗") + " " + ev.Step + " (" + d + ")"
	case StatusCancelled:
		return r.paint(ansiRed, "✗") + " " + ev.Step + " (cancelled after " + d + ")"
	case StatusUnchanged:
		if len(ev.Changes) > 0 {
			return r.paint(ansiDim, "· "+ev.Step+" (unchanged, "+changeCount(ev.Changes)+")")
		}
		return r.paint(ansiDim, "· "+ev.Step+" (unchanged)")
	case StatusNotRun:
		return r.paint(ansiDim, "- "+ev.Step+" (not run)")
	case StatusPlanned:
		return r.paint(ansiCyan, "○") + " " + ev.Step + " (" + changeCount(ev.Changes) + ")"
	}
	return "? " + ev.Step + " (" + string(ev.Status) + ")"
}

// draw rewrites the live line. Callers hold r.mu.
func (r *ttyRenderer) draw() {
	if !r.active {
		return
	}
	text := r.step
	if r.msg != "" {
		text += ": " + r.msg
	}
	// Keep the live line on one terminal row, or \r would only rewind the last row.
	if width := r.width(); width > 8 && utf8.RuneCountInString(text)+2 >= width {
		runes := []rune(text)
		text = string(runes[:width-4]) + "…"
	}
	r.write(ansiEraseLine + r.paint(ansiCyan, spinnerFrames[r.frame%len(spinnerFrames)]) + " " + text)
}

func (r *ttyRenderer) width() int {
	f, ok := r.w.(*os.File)
	if !ok {
		return 0
	}
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return w
}

func (r *ttyRenderer) paint(code, s string) string {
	if !r.color {
		return s
	}
	return code + s + ansiReset
}

func (r *ttyRenderer) write(s string) {
	_, _ = io.WriteString(r.w, s) // progress output is best effort
}

// startSpinner starts the ticking goroutine once. Callers hold r.mu.
func (r *ttyRenderer) startSpinner() {
	if r.running || r.closed {
		return
	}
	r.running = true
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.spin(r.stop, r.done)
}

func (r *ttyRenderer) spin(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(r.tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.mu.Lock()
			if r.active {
				r.frame++
				r.draw()
			}
			r.mu.Unlock()
		}
	}
}

// Close stops the spinner goroutine and waits for it to return. A live line
// still on screen (a step that never finished) is ended with a newline.
func (r *ttyRenderer) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	if r.active {
		r.active = false
		r.write("\n")
	}
	running, stop, done := r.running, r.stop, r.done
	r.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
}
