package lifecycle

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Status is the outcome of one step.
type Status string

// Step outcomes.
const (
	// StatusDone: Apply ran and returned nil.
	StatusDone Status = "done"
	// StatusUnchanged: Plan returned no changes (already converged).
	StatusUnchanged Status = "unchanged"
	// StatusFailed: Plan or Apply returned an error or panicked.
	StatusFailed Status = "failed"
	// StatusCancelled: the context was cancelled while the step ran and the step returned an error.
	StatusCancelled Status = "cancelled"
	// StatusNotRun: the step was never started because an earlier step failed or was cancelled.
	StatusNotRun Status = "not-run"
	// StatusPlanned: dry-run only; Plan returned changes that Apply would make.
	StatusPlanned Status = "planned"
)

// Options tune one Run.
type Options struct {
	// DryRun calls Plan for every step and never Apply; steps with changes
	// are reported as planned and their changes are rendered.
	DryRun bool
	// ForceApply calls Apply even when Plan returns no changes. Benchmarks use
	// it to compare a no-op run with a full reconcile.
	ForceApply bool
	// Renderer receives every event; nil discards them. Run does not Close
	// it: the caller owns it and may use it for several pipelines.
	Renderer Renderer
	// Now is the clock for event times and durations; nil means time.Now.
	// Tests set it to get stable output.
	Now func() time.Time
}

// StepResult is the outcome of one step.
type StepResult struct {
	Name     string
	Status   Status
	Duration time.Duration
	// Changes are what Plan returned (planned, or applied when Status is done).
	Changes []Change
	// Err is the step's error when Status is failed or cancelled.
	Err error
}

// Report is the outcome of one Run, one entry per step in pipeline order.
type Report struct {
	Pipeline string
	DryRun   bool
	Steps    []StepResult
	Duration time.Duration
}

// Changed reports whether the run applied a change it had found: a step
// done whose plan inspected its target. A step without a plan (one "run"
// change named after the step, e.g. a plugin hook that converges by itself)
// always applies and does not count.
func (r *Report) Changed() bool {
	for _, s := range r.Steps {
		if s.Status != StatusDone {
			continue
		}
		if len(s.Changes) == 1 && s.Changes[0].Action == ActionRun && s.Changes[0].Target == s.Name {
			continue
		}
		return true
	}
	return false
}

// Done returns the names of the steps that are converged: done or unchanged.
func (r *Report) Done() []string {
	return r.names(func(s Status) bool { return s == StatusDone || s == StatusUnchanged })
}

// NotDone returns the names of all other steps: failed, cancelled, not run,
// or only planned.
func (r *Report) NotDone() []string {
	return r.names(func(s Status) bool { return s != StatusDone && s != StatusUnchanged })
}

func (r *Report) names(keep func(Status) bool) []string {
	var out []string
	for _, s := range r.Steps {
		if keep(s.Status) {
			out = append(out, s.Name)
		}
	}
	return out
}

// StepError is returned by Run when a step fails. It unwraps to the step's
// own error.
type StepError struct {
	Pipeline string
	// Step is the failed step's name; Index is 1-based, out of Total.
	Step         string
	Index, Total int
	// Phase is "plan" (inspecting live state) or "apply".
	Phase string
	Err   error
	// Done and NotDone list step names, as Report.Done and Report.NotDone.
	Done, NotDone []string
}

// Error names the pipeline, the step, the phase, what was done and what was
// not, then the cause.
func (e *StepError) Error() string {
	phase := ""
	if e.Phase == "plan" {
		phase = " while checking current state"
	}
	return fmt.Sprintf("%s: step %d/%d %q failed%s (%s): %v",
		e.Pipeline, e.Index, e.Total, e.Step, phase, doneSummary(e.Done, e.NotDone), e.Err)
}

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// InterruptedError is returned by Run when its context is cancelled (Ctrl-C)
// or its deadline passes. errors.Is(err, context.Canceled) (or
// context.DeadlineExceeded) is true, as it is for the running step's own error.
type InterruptedError struct {
	Pipeline string
	// Step is the step that was running and returned an error because of the
	// cancellation; empty when the pipeline stopped between steps.
	Step         string
	Index, Total int
	// Cause is the context's error.
	Cause error
	// StepErr is the running step's error, if any.
	StepErr error
	// Done and NotDone list step names, as Report.Done and Report.NotDone.
	Done, NotDone []string
}

// Error says where the pipeline stopped, what was done and what was not, and
// that re-running the command continues (steps are idempotent).
func (e *InterruptedError) Error() string {
	where := "between steps"
	if e.Step != "" {
		where = fmt.Sprintf("during step %d/%d %q", e.Index, e.Total, e.Step)
	}
	return fmt.Sprintf("%s: interrupted %s (%s): %v; re-run the command to continue",
		e.Pipeline, where, doneSummary(e.Done, e.NotDone), e.Cause)
}

// Unwrap returns the context's error and the step's error.
func (e *InterruptedError) Unwrap() []error {
	if e.StepErr == nil {
		return []error{e.Cause}
	}
	return []error{e.Cause, e.StepErr}
}

func doneSummary(done, notDone []string) string {
	list := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	return "completed: " + list(done) + "; not completed: " + list(notDone)
}

// Run executes steps in order under the name pipeline ("up", "cluster create").
//
// It stops at the first failing step and returns a *StepError; on context
// cancellation it waits for the running step to return and returns an
// *InterruptedError. The Report is returned in every case except invalid
// arguments (a nil step or a step without a name), which are reported
// before anything runs.
func Run(ctx context.Context, pipeline string, steps []Step, opts Options) (*Report, error) {
	for i, s := range steps {
		if s == nil {
			return nil, fmt.Errorf("lifecycle: pipeline %q: step %d is nil; build steps with lifecycle.NewStep or a type implementing Step", pipeline, i+1)
		}
		if s.Name() == "" {
			return nil, fmt.Errorf("lifecycle: pipeline %q: step %d has an empty name; give every step a short user-facing name", pipeline, i+1)
		}
	}
	e := &engine{pipeline: pipeline, total: len(steps), opts: opts, now: opts.Now, render: opts.Renderer}
	if e.now == nil {
		e.now = time.Now
	}
	if e.render == nil {
		e.render = nopRenderer{}
	}

	begin := e.now()
	rep := &Report{Pipeline: pipeline, DryRun: opts.DryRun, Steps: make([]StepResult, len(steps))}
	for i, s := range steps {
		rep.Steps[i] = StepResult{Name: s.Name(), Status: StatusNotRun}
	}

	var err error
	next := len(steps) // first step that was not started
	for i, s := range steps {
		if cause := ctx.Err(); cause != nil {
			next, err = i, e.interrupted(rep, -1, cause, nil)
			break
		}
		res, phase := e.runStep(ctx, i, rep.Steps[i].Name, s)
		rep.Steps[i] = res
		if res.Status == StatusCancelled {
			next, err = i+1, e.interrupted(rep, i, ctx.Err(), res.Err)
			break
		}
		if res.Status == StatusFailed {
			next = i + 1
			err = &StepError{Pipeline: pipeline, Step: res.Name, Index: i + 1, Total: e.total,
				Phase: phase, Err: res.Err, Done: rep.Done(), NotDone: rep.NotDone()}
			break
		}
	}
	for i := next; i < len(steps); i++ {
		e.emit(Event{Type: EventFinish, Step: rep.Steps[i].Name, Index: i + 1, Status: StatusNotRun})
	}
	rep.Duration = e.now().Sub(begin)
	return rep, err
}

func (e *engine) interrupted(rep *Report, i int, cause, stepErr error) error {
	ie := &InterruptedError{Pipeline: e.pipeline, Total: e.total, Cause: cause, StepErr: stepErr,
		Done: rep.Done(), NotDone: rep.NotDone()}
	if i >= 0 {
		ie.Step, ie.Index = rep.Steps[i].Name, i+1
	}
	return ie
}

type engine struct {
	pipeline string
	total    int
	opts     Options
	now      func() time.Time
	render   Renderer
}

// emit fills in the pipeline-wide fields and hands ev to the renderer.
func (e *engine) emit(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = e.now()
	}
	ev.Pipeline, ev.Total = e.pipeline, e.total
	e.render.Handle(ev)
}

// runStep plans and (unless converged or dry-run) applies one step. It
// returns the result and, on failure, the phase that failed.
func (e *engine) runStep(ctx context.Context, i int, name string, s Step) (StepResult, string) {
	t0 := e.now()
	e.emit(Event{Time: t0, Type: EventStart, Step: name, Index: i + 1})
	res := StepResult{Name: name}
	phase := "plan"
	changes, err := callPlan(ctx, s)
	res.Changes = changes
	if err == nil {
		changing, _ := counts(changes)
		switch {
		case e.opts.DryRun && len(changes) > 0:
			res.Status = StatusPlanned
			if changing == 0 { // only reuses: shown, nothing would change
				res.Status = StatusUnchanged
			}
			e.emit(Event{Type: EventPlan, Step: name, Index: i + 1, Changes: changes})
		case e.opts.DryRun, len(changes) == 0 && !e.opts.ForceApply:
			res.Status = StatusUnchanged
		default:
			phase = "apply"
			r := &stepReporter{e: e, name: name, index: i + 1, t0: t0}
			err = callApply(ctx, s, r, changes)
			r.close()
			if err == nil {
				res.Status = StatusDone
			}
		}
	}
	if err != nil {
		res.Err, res.Status = err, StatusFailed
		if ctx.Err() != nil {
			res.Status = StatusCancelled
		}
	}
	t1 := e.now()
	res.Duration = t1.Sub(t0)
	ev := Event{Time: t1, Type: EventFinish, Step: name, Index: i + 1, Status: res.Status,
		Duration: res.Duration, Changes: changes}
	if err != nil {
		ev.Error = err.Error()
	}
	e.emit(ev)
	return res, phase
}

func callPlan(ctx context.Context, s Step) (changes []Change, err error) {
	defer recoverInto(&err)
	return s.Plan(ctx)
}

func callApply(ctx context.Context, s Step, r Reporter, changes []Change) (err error) {
	defer recoverInto(&err)
	return s.Apply(ctx, r, changes)
}

func recoverInto(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// stepReporter turns Progress calls into progress events for one step and
// drops them once the step has returned, so a goroutine the step leaked
// cannot scribble over later output.
type stepReporter struct {
	e      *engine
	name   string
	index  int
	t0     time.Time
	mu     sync.Mutex
	closed bool
}

func (r *stepReporter) Progress(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	t := r.e.now()
	r.e.emit(Event{Time: t, Type: EventProgress, Step: r.name, Index: r.index, Duration: t.Sub(r.t0), Message: msg})
}

func (r *stepReporter) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}
