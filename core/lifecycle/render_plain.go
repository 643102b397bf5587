package lifecycle

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// NewPlainRenderer returns a renderer for logs and CI: no ANSI codes, one
// line per event, each prefixed with the UTC time, pipeline and step:
//
//	2026-12-03T08:40:01Z [up] 1/5 Create VM: started
//	2026-12-03T08:40:02Z [up] 1/5 Create VM: booting
//	2026-12-03T08:40:03Z [up] 1/5 Create VM: done in 1.2s
//	2026-12-03T08:40:03Z [up] 2/5 Start registry mirrors: unchanged
//	2026-12-03T08:40:04Z [up] 3/5 Patch CoreDNS: FAILED after 300ms: <err>
//
// Multi-line messages and errors get the prefix on every line.
func NewPlainRenderer(w io.Writer) Renderer {
	return &plainRenderer{w: w}
}

type plainRenderer struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *plainRenderer) Handle(ev Event) {
	var lines []string
	switch ev.Type {
	case EventStart:
		lines = []string{"started"}
	case EventProgress:
		lines = []string{ev.Message}
	case EventPlan:
		lines = changeLines(ev.Changes)
	case EventFinish:
		lines = []string{plainFinish(ev)}
	default:
		lines = []string{string(ev.Type)}
	}
	prefix := fmt.Sprintf("%s [%s] %d/%d %s: ", ev.Time.UTC().Format(time.RFC3339), ev.Pipeline, ev.Index, ev.Total, ev.Step)
	var b strings.Builder
	for _, l := range lines {
		for _, part := range strings.Split(strings.TrimRight(l, "\n"), "\n") {
			b.WriteString(prefix)
			b.WriteString(part)
			b.WriteByte('\n')
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = io.WriteString(r.w, b.String()) // progress output is best effort
}

func plainFinish(ev Event) string {
	d := formatDuration(ev.Duration)
	switch ev.Status {
	case StatusDone:
		return "done in " + d
	case StatusUnchanged:
		if len(ev.Changes) > 0 {
			return "unchanged, " + changeCount(ev.Changes)
		}
		return "unchanged"
	case StatusFailed:
		return "FAILED after " + d + ": " + ev.Error
	case StatusCancelled:
		return "cancelled after " + d + ": " + ev.Error
	case StatusNotRun:
		return "not run"
	case StatusPlanned:
		return "planned, " + changeCount(ev.Changes)
	}
	return string(ev.Status)
}

func (r *plainRenderer) Close() {}
