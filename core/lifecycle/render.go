package lifecycle

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

// EventType says what an Event reports.
type EventType string

// Event types, in the order a step emits them.
const (
	// EventStart: the step began (Plan is about to run).
	EventStart EventType = "start"
	// EventProgress: the step reported a sub-status through its Reporter.
	EventProgress EventType = "progress"
	// EventPlan: dry-run only; Changes holds what Apply would do.
	EventPlan EventType = "plan"
	// EventFinish: the step ended with Status; steps left unstarted after a
	// failure or interruption get a finish event with StatusNotRun and no start.
	EventFinish EventType = "finish"
)

// Event is one thing a renderer shows. The engine fills every field that
// applies; renderers never look at steps directly.
type Event struct {
	Time     time.Time
	Pipeline string
	Step     string
	// Index is 1-based, out of Total steps in the pipeline.
	Index, Total int
	Type         EventType
	// Status is set on finish events.
	Status Status
	// Duration is the time since the step started (finish and progress events).
	Duration time.Duration
	// Message is the progress text (progress events).
	Message string
	// Changes are the planned (plan events) or applied (finish events) changes.
	Changes []Change
	// Error is the step's error text (finish events of failed or cancelled steps).
	Error string
}

// Renderer shows pipeline events to the user. It is the only place progress
// output comes from. Implementations are safe for concurrent Handle calls.
type Renderer interface {
	// Handle shows one event.
	Handle(Event)
	// Close stops any background work (the TTY spinner) and finishes the
	// output. Close is idempotent.
	Close()
}

// Renderer formats accepted by NewRenderer.
const (
	FormatAuto  = "auto"
	FormatPlain = "plain"
	FormatJSON  = "json"
)

// NewRenderer returns the renderer for a --progress style flag value:
// "" or "auto" picks the TTY renderer when tty is true and the plain one
// otherwise; "plain" and "json" pick those. Pass IsTerminal(w) as tty.
func NewRenderer(w io.Writer, format string, tty bool) (Renderer, error) {
	switch format {
	case "", FormatAuto:
		if tty {
			return NewTTYRenderer(w), nil
		}
		return NewPlainRenderer(w), nil
	case FormatPlain:
		return NewPlainRenderer(w), nil
	case FormatJSON:
		return NewJSONRenderer(w), nil
	}
	return nil, fmt.Errorf("lifecycle: unknown progress format %q: valid values are %s, %s, %s", format, FormatAuto, FormatPlain, FormatJSON)
}

// IsTerminal reports whether w is an *os.File connected to a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type nopRenderer struct{}

func (nopRenderer) Handle(Event) {}
func (nopRenderer) Close()       {}

// formatDuration renders d compactly: 850ms, 1.2s, 2m3s.
func formatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	d = d.Round(100 * time.Millisecond)
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// changeLines renders planned changes as "would create VM marina: detail".
func changeLines(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = "would " + c.String()
	}
	return out
}

// changeCount is "2 changes" for a plan, with its reuses: "1 change, 2
// reused"; a plan of reuses only is "2 reused".
func changeCount(changes []Change) string {
	changing, reused := counts(changes)
	switch {
	case reused == 0:
		return plural(changing, "change")
	case changing == 0:
		return strconv.Itoa(reused) + " reused"
	}
	return plural(changing, "change") + ", " + strconv.Itoa(reused) + " reused"
}

// plural returns "1 change" / "2 changes".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
