// Package lifecycle is the step engine behind every state-changing marina
// command (up, cluster create, cluster delete, down, ...).
//
// A command is a pipeline: an ordered list of small, named, idempotent
// steps, in the style of kind's create actions. Each step is split into Plan
// (inspect live state and say what would change) and Apply (make exactly
// those changes), like Terraform, so that:
//
//   - a re-run with nothing to do is fast: a step whose Plan returns no
//     changes is reported as unchanged and its Apply is not called;
//   - --dry-run is honest: it calls Plan for every step and never Apply;
//   - Ctrl-C is clean: the running step's context is cancelled, the engine
//     waits for it to return and reports what was done and what was not.
//
// All progress output goes through one Renderer (live TTY line, plain log
// lines, or JSON events); steps never print, they report sub-status through
// the Reporter handed to Apply.
package lifecycle

import (
	"context"
	"fmt"
)

// Change is one change a step would make. Changes are shown by --dry-run,
// carried in JSON finish events, and handed back to Apply.
type Change struct {
	// Action is a lower-case verb: create, update, delete, run, ...
	Action string `json:"action"`
	// Target names the thing changed, e.g. "VM marina" or "container registry-docker.io".
	Target string `json:"target"`
	// Detail is optional free text, e.g. "4 CPUs, 8GiB".
	Detail string `json:"detail,omitempty"`
}

// ActionRun is the one change of a step that cannot inspect its target (a
// NewStep without plan): it always applies, so its being done says nothing
// about whether anything changed.
const ActionRun = "run"

// ActionReuse is a planned line that changes nothing: a result recorded
// earlier would be reused (a plugin's PostUp not started). --dry-run shows
// it with the plan; a step whose every line is a reuse is unchanged.
const ActionReuse = "reuse"

// counts returns how many of changes change something and how many are
// reuses.
func counts(changes []Change) (changing, reused int) {
	for _, c := range changes {
		if c.Action == ActionReuse {
			reused++
		} else {
			changing++
		}
	}
	return changing, reused
}

// String renders the change as "create VM marina: 4 CPUs, 8GiB".
func (c Change) String() string {
	s := c.Action + " " + c.Target
	if c.Detail != "" {
		s += ": " + c.Detail
	}
	return s
}

// Step is one named, idempotent unit of work in a pipeline.
type Step interface {
	// Name is short and user-facing: "Create VM", "Start registry mirrors".
	Name() string
	// Plan inspects live state and returns the changes Apply would make. An
	// empty result means the step has already converged: it is reported as
	// unchanged and Apply is not called. Plan must not change anything.
	//
	// In --dry-run earlier steps have not been applied, so Plan must treat a
	// missing prerequisite (no VM yet, no docker yet) as "everything would be
	// created", not as an error.
	Plan(ctx context.Context) ([]Change, error)
	// Apply makes the planned changes. It must honour ctx: on cancellation it
	// should stop promptly and return an error (usually ctx.Err()), because
	// the engine waits for it to return.
	Apply(ctx context.Context, r Reporter, changes []Change) error
}

// Reporter receives sub-status messages from a running step ("pulling
// image kindest/node:v1.33.1"). It is safe for concurrent use; messages sent
// after the step has returned are dropped.
type Reporter interface {
	Progress(msg string)
}

// NewStep builds a Step from functions.
//
// A nil plan means the step cannot inspect its target and always applies:
// Plan returns one Change{Action: "run", Target: name}. A nil apply makes
// Apply a no-op, for check-only steps whose Plan either returns no changes
// or an error ("Check host prerequisites").
func NewStep(name string, plan func(context.Context) ([]Change, error), apply func(context.Context, Reporter, []Change) error) Step {
	return &funcStep{name: name, plan: plan, apply: apply}
}

type funcStep struct {
	name  string
	plan  func(context.Context) ([]Change, error)
	apply func(context.Context, Reporter, []Change) error
}

func (s *funcStep) Name() string { return s.name }

func (s *funcStep) Plan(ctx context.Context) ([]Change, error) {
	if s.plan == nil {
		return []Change{{Action: ActionRun, Target: s.name}}, nil
	}
	return s.plan(ctx)
}

func (s *funcStep) Apply(ctx context.Context, r Reporter, changes []Change) error {
	if s.apply == nil {
		return nil
	}
	return s.apply(ctx, r, changes)
}

// PanicError is the error of a step whose Plan or Apply panicked. The engine
// recovers the panic so one broken step fails the pipeline instead of
// crashing marina. (A panic in a goroutine the step started cannot be
// recovered here; steps must not let that happen.)
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the goroutine stack at the panic, for debug output.
	Stack []byte
}

// Error returns "panic: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is/As see it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
