package lifecycle

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// NewJSONRenderer returns a renderer for machines: one JSON object per event,
// one per line. The field names are stable:
//
//	time        RFC 3339 UTC time with nanoseconds
//	pipeline    "up", "cluster create", ...
//	step        step name
//	index       1-based step index
//	total       number of steps in the pipeline
//	type        start | progress | plan | finish
//	durationMs  milliseconds since the step started (0 on start)
//	status      finish only: done | unchanged | failed | cancelled | not-run | planned
//	message     progress only
//	changes     plan and finish: [{"action","target","detail"}]
//	error       failed or cancelled finish only
func NewJSONRenderer(w io.Writer) Renderer {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // error texts contain <, > and &; keep them readable
	return &jsonRenderer{enc: enc}
}

type jsonRenderer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

type jsonEvent struct {
	Time       time.Time `json:"time"`
	Pipeline   string    `json:"pipeline"`
	Step       string    `json:"step"`
	Index      int       `json:"index"`
	Total      int       `json:"total"`
	Type       EventType `json:"type"`
	DurationMs int64     `json:"durationMs"`
	Status     Status    `json:"status,omitempty"`
	Message    string    `json:"message,omitempty"`
	Changes    []Change  `json:"changes,omitempty"`
	Error      string    `json:"error,omitempty"`
}

func (r *jsonRenderer) Handle(ev Event) {
	je := jsonEvent{
		Time: ev.Time.UTC(), Pipeline: ev.Pipeline, Step: ev.Step, Index: ev.Index, Total: ev.Total,
		Type: ev.Type, DurationMs: ev.Duration.Milliseconds(), Status: ev.Status,
		Message: ev.Message, Changes: ev.Changes, Error: ev.Error,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(je) // Encode writes one line; progress output is best effort
}

func (r *jsonRenderer) Close() {}
