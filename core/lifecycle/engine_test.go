package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// callLog records Plan/Apply calls across steps, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// fakeStep is a scripted Step that records its calls.
type fakeStep struct {
	name       string
	changes    []Change
	planErr    error
	applyErr   error
	planPanic  any
	applyPanic any
	progress   []string
	// block makes Apply wait for ctx.Done (bounded) and then return blockRet(ctx).
	block    bool
	blockRet func(ctx context.Context) error
	entered  chan struct{} // closed when a blocking Apply starts
	sawDone  bool
	log      *callLog
	gotApply []Change
}

func (s *fakeStep) Name() string { return s.name }

func (s *fakeStep) Plan(ctx context.Context) ([]Change, error) {
	s.log.add("plan " + s.name)
	if s.planPanic != nil {
		panic(s.planPanic)
	}
	return s.changes, s.planErr
}

func (s *fakeStep) Apply(ctx context.Context, r Reporter, changes []Change) error {
	s.log.add("apply " + s.name)
	s.gotApply = changes
	for _, p := range s.progress {
		r.Progress(p)
	}
	if s.applyPanic != nil {
		panic(s.applyPanic)
	}
	if s.block {
		close(s.entered)
		select {
		case <-ctx.Done():
			s.sawDone = true
			return s.blockRet(ctx)
		case <-time.After(5 * time.Second):
			return errors.New("test step: context was never cancelled")
		}
	}
	return s.applyErr
}

func chg(target string) []Change { return []Change{{Action: "create", Target: target}} }

func statuses(rep *Report) []Status {
	var out []Status
	for _, s := range rep.Steps {
		out = append(out, s.Status)
	}
	return out
}

func TestRunOrderAndConvergence(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		changes   [][]Change // per step a, b, c
		wantCalls []string
		want      []Status
	}{
		{
			name:      "all steps change, run in order",
			changes:   [][]Change{chg("a"), chg("b"), chg("c")},
			wantCalls: []string{"plan a", "apply a", "plan b", "apply b", "plan c", "apply c"},
			want:      []Status{StatusDone, StatusDone, StatusDone},
		},
		{
			name:      "converged steps skip Apply",
			changes:   [][]Change{nil, chg("b"), {}},
			wantCalls: []string{"plan a", "plan b", "apply b", "plan c"},
			want:      []Status{StatusUnchanged, StatusDone, StatusUnchanged},
		},
		{
			name:      "ForceApply applies converged steps",
			opts:      Options{ForceApply: true},
			changes:   [][]Change{nil, chg("b"), nil},
			wantCalls: []string{"plan a", "apply a", "plan b", "apply b", "plan c", "apply c"},
			want:      []Status{StatusDone, StatusDone, StatusDone},
		},
		{
			name:      "DryRun plans every step and never applies",
			opts:      Options{DryRun: true},
			changes:   [][]Change{chg("a"), nil, chg("c")},
			wantCalls: []string{"plan a", "plan b", "plan c"},
			want:      []Status{StatusPlanned, StatusUnchanged, StatusPlanned},
		},
		{
			name:      "DryRun wins over ForceApply",
			opts:      Options{DryRun: true, ForceApply: true},
			changes:   [][]Change{nil, chg("b"), nil},
			wantCalls: []string{"plan a", "plan b", "plan c"},
			want:      []Status{StatusUnchanged, StatusPlanned, StatusUnchanged},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &callLog{}
			var steps []Step
			var fakes []*fakeStep
			for i, name := range []string{"a", "b", "c"} {
				f := &fakeStep{name: name, changes: tt.changes[i], log: log}
				fakes = append(fakes, f)
				steps = append(steps, f)
			}
			rep, err := Run(context.Background(), "up", steps, tt.opts)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := log.get(); !reflect.DeepEqual(got, tt.wantCalls) {
				t.Errorf("calls = %v, want %v", got, tt.wantCalls)
			}
			if got := statuses(rep); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("statuses = %v, want %v", got, tt.want)
			}
			for i, f := range fakes {
				if rep.Steps[i].Name != f.name {
					t.Errorf("step %d name = %q, want %q", i, rep.Steps[i].Name, f.name)
				}
				if !reflect.DeepEqual(rep.Steps[i].Changes, tt.changes[i]) {
					t.Errorf("step %s changes = %v, want %v", f.name, rep.Steps[i].Changes, tt.changes[i])
				}
				if f.gotApply != nil && !reflect.DeepEqual(f.gotApply, tt.changes[i]) {
					t.Errorf("step %s Apply got %v, want the planned %v", f.name, f.gotApply, tt.changes[i])
				}
			}
			if rep.Pipeline != "up" || rep.DryRun != tt.opts.DryRun {
				t.Errorf("report header = %q dryRun=%v", rep.Pipeline, rep.DryRun)
			}
		})
	}
}

func TestRunFailureStopsPipeline(t *testing.T) {
	boom := errors.New("boom: vz is not available")
	tests := []struct {
		name      string
		b         fakeStep
		wantCalls []string
		wantPhase string
		wantText  []string
		check     func(t *testing.T, err error)
	}{
		{
			name:      "apply error",
			b:         fakeStep{changes: chg("b"), applyErr: boom},
			wantCalls: []string{"plan a", "apply a", "plan b", "apply b"},
			wantPhase: "apply",
			wantText:  []string{`up: step 2/3 "b" failed (completed: a; not completed: b, c): boom: vz is not available`},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, boom) {
					t.Errorf("errors.Is(err, boom) = false for %v", err)
				}
			},
		},
		{
			name:      "plan error",
			b:         fakeStep{planErr: boom},
			wantCalls: []string{"plan a", "apply a", "plan b"},
			wantPhase: "plan",
			wantText:  []string{`step 2/3 "b" failed while checking current state`, "completed: a; not completed: b, c", "boom"},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, boom) {
					t.Errorf("errors.Is(err, boom) = false for %v", err)
				}
			},
		},
		{
			name:      "apply panic",
			b:         fakeStep{changes: chg("b"), applyPanic: "nil map write"},
			wantCalls: []string{"plan a", "apply a", "plan b", "apply b"},
			wantPhase: "apply",
			wantText:  []string{`step 2/3 "b" failed`, "panic: nil map write", "not completed: b, c"},
			check: func(t *testing.T, err error) {
				var pe *PanicError
				if !errors.As(err, &pe) || pe.Value != "nil map write" || len(pe.Stack) == 0 {
					t.Errorf("want *PanicError with value and stack, got %#v", err)
				}
			},
		},
		{
			name:      "plan panic with error value",
			b:         fakeStep{planPanic: boom},
			wantCalls: []string{"plan a", "apply a", "plan b"},
			wantPhase: "plan",
			wantText:  []string{"panic: boom"},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, boom) {
					t.Errorf("a panic with an error value should unwrap to it: %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &callLog{}
			b := tt.b
			b.name, b.log = "b", log
			steps := []Step{
				&fakeStep{name: "a", changes: chg("a"), log: log},
				&b,
				&fakeStep{name: "c", changes: chg("c"), log: log},
			}
			var events []Event
			rep, err := Run(context.Background(), "up", steps, Options{Renderer: recorder(&events)})
			if err == nil {
				t.Fatal("Run returned nil error for a failing step")
			}
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("err is %T, want *StepError: %v", err, err)
			}
			if se.Step != "b" || se.Index != 2 || se.Total != 3 || se.Phase != tt.wantPhase || se.Pipeline != "up" {
				t.Errorf("StepError = %+v", se)
			}
			if !reflect.DeepEqual(se.Done, []string{"a"}) || !reflect.DeepEqual(se.NotDone, []string{"b", "c"}) {
				t.Errorf("Done=%v NotDone=%v", se.Done, se.NotDone)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			tt.check(t, err)
			if got := log.get(); !reflect.DeepEqual(got, tt.wantCalls) {
				t.Errorf("calls = %v, want %v (c must not run)", got, tt.wantCalls)
			}
			if got, want := statuses(rep), []Status{StatusDone, StatusFailed, StatusNotRun}; !reflect.DeepEqual(got, want) {
				t.Errorf("statuses = %v, want %v", got, want)
			}
			if rep.Steps[1].Err == nil {
				t.Error("failed step has no Err in the report")
			}
			last := events[len(events)-1]
			if last.Step != "c" || last.Type != EventFinish || last.Status != StatusNotRun {
				t.Errorf("last event = %+v, want a not-run finish for c", last)
			}
		})
	}
}

func TestRunCancellation(t *testing.T) {
	tests := []struct {
		name string
		// ctx builds the context and returns the function that triggers the interruption.
		ctx       func() (context.Context, func())
		blockRet  func(ctx context.Context) error
		wantIs    error
		wantB     Status
		wantStep  string
		wantText  []string
		wantDone  []string
		wantUndon []string
	}{
		{
			name: "Ctrl-C mid-step",
			ctx: func() (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				return ctx, cancel
			},
			blockRet:  func(ctx context.Context) error { return fmt.Errorf("waiting for ssh: %w", ctx.Err()) },
			wantIs:    context.Canceled,
			wantB:     StatusCancelled,
			wantStep:  "b",
			wantText:  []string{`up: interrupted during step 2/3 "b" (completed: a; not completed: b, c): context canceled; re-run the command to continue`},
			wantDone:  []string{"a"},
			wantUndon: []string{"b", "c"},
		},
		{
			name: "deadline mid-step",
			ctx: func() (context.Context, func()) {
				ctx := &manualDeadline{Context: context.Background(), done: make(chan struct{})}
				return ctx, ctx.expire
			},
			blockRet:  func(ctx context.Context) error { return ctx.Err() },
			wantIs:    context.DeadlineExceeded,
			wantB:     StatusCancelled,
			wantStep:  "b",
			wantText:  []string{"interrupted during step 2/3", "deadline exceeded"},
			wantDone:  []string{"a"},
			wantUndon: []string{"b", "c"},
		},
		{
			name: "step returns nil despite cancellation: done, next not started",
			ctx: func() (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				return ctx, cancel
			},
			blockRet:  func(context.Context) error { return nil },
			wantIs:    context.Canceled,
			wantB:     StatusDone,
			wantStep:  "",
			wantText:  []string{"interrupted between steps (completed: a, b; not completed: c)"},
			wantDone:  []string{"a", "b"},
			wantUndon: []string{"c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &callLog{}
			ctx, interrupt := tt.ctx()
			b := &fakeStep{name: "b", changes: chg("b"), log: log, block: true, blockRet: tt.blockRet, entered: make(chan struct{})}
			steps := []Step{
				&fakeStep{name: "a", changes: chg("a"), log: log},
				b,
				&fakeStep{name: "c", changes: chg("c"), log: log},
			}
			go func() {
				select {
				case <-b.entered:
					interrupt()
				case <-time.After(5 * time.Second):
				}
			}()
			rep, err := Run(ctx, "up", steps, Options{})
			var ie *InterruptedError
			if !errors.As(err, &ie) {
				t.Fatalf("err is %T, want *InterruptedError: %v", err, err)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(err, %v) = false: %v", tt.wantIs, err)
			}
			if !b.sawDone {
				t.Error("the running step never saw its context cancelled")
			}
			if ie.Step != tt.wantStep {
				t.Errorf("InterruptedError.Step = %q, want %q", ie.Step, tt.wantStep)
			}
			if !reflect.DeepEqual(ie.Done, tt.wantDone) || !reflect.DeepEqual(ie.NotDone, tt.wantUndon) {
				t.Errorf("Done=%v NotDone=%v, want %v / %v", ie.Done, ie.NotDone, tt.wantDone, tt.wantUndon)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got, want := statuses(rep), []Status{StatusDone, tt.wantB, StatusNotRun}; !reflect.DeepEqual(got, want) {
				t.Errorf("statuses = %v, want %v", got, want)
			}
			for _, c := range log.get() {
				if strings.HasSuffix(c, " c") {
					t.Errorf("step c was started after the interruption: %v", log.get())
				}
			}
		})
	}
}

func TestRunAlreadyCancelled(t *testing.T) {
	log := &callLog{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Run(ctx, "up", []Step{&fakeStep{name: "a", changes: chg("a"), log: log}}, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if calls := log.get(); len(calls) != 0 {
		t.Errorf("steps ran on a cancelled context: %v", calls)
	}
	if got := statuses(rep); !reflect.DeepEqual(got, []Status{StatusNotRun}) {
		t.Errorf("statuses = %v", got)
	}
}

func TestRunRejectsInvalidSteps(t *testing.T) {
	tests := []struct {
		name  string
		steps []Step
		want  string
	}{
		{"nil step", []Step{NewStep("a", nil, nil), nil}, "step 2 is nil"},
		{"empty name", []Step{NewStep("", nil, nil)}, "step 1 has an empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Run(context.Background(), "up", tt.steps, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"up"`) {
				t.Fatalf("err = %v, want it to name the pipeline and contain %q", err, tt.want)
			}
			if rep != nil {
				t.Errorf("report = %+v, want nil for invalid input", rep)
			}
		})
	}
}

func TestNewStepDefaults(t *testing.T) {
	ctx := context.Background()
	s := NewStep("Restart kubelet", nil, nil)
	changes, err := s.Plan(ctx)
	if err != nil || !reflect.DeepEqual(changes, []Change{{Action: "run", Target: "Restart kubelet"}}) {
		t.Errorf("nil plan: got %v, %v; want one run change", changes, err)
	}
	if err := s.Apply(ctx, nopReporter{}, changes); err != nil {
		t.Errorf("nil apply: %v, want no-op", err)
	}
	var applied bool
	s = NewStep("x", func(context.Context) ([]Change, error) { return nil, nil },
		func(context.Context, Reporter, []Change) error { applied = true; return nil })
	if _, err := Run(ctx, "p", []Step{s}, Options{ForceApply: true}); err != nil || !applied {
		t.Errorf("NewStep apply func not called under ForceApply (err %v)", err)
	}
}

type nopReporter struct{}

func (nopReporter) Progress(string) {}

// A step that keeps its Reporter and reports after returning must not produce
// events after its finish event.
func TestProgressAfterStepReturnIsDropped(t *testing.T) {
	var kept Reporter
	s := NewStep("leaky", nil, func(_ context.Context, r Reporter, _ []Change) error {
		r.Progress("inside")
		kept = r
		return nil
	})
	var events []Event
	if _, err := Run(context.Background(), "up", []Step{s}, Options{Renderer: recorder(&events)}); err != nil {
		t.Fatal(err)
	}
	kept.Progress("too late")
	var types []EventType
	for _, e := range events {
		types = append(types, e.Type)
		if e.Message == "too late" {
			t.Error("progress after the step returned was rendered")
		}
	}
	if want := []EventType{EventStart, EventProgress, EventFinish}; !reflect.DeepEqual(types, want) {
		t.Errorf("event types = %v, want %v", types, want)
	}
}

func TestChangeString(t *testing.T) {
	tests := []struct {
		c    Change
		want string
	}{
		{Change{Action: "create", Target: "VM marina"}, "create VM marina"},
		{Change{Action: "update", Target: "route 172.30.0.0/16", Detail: "via 192.168.105.2"}, "update route 172.30.0.0/16: via 192.168.105.2"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// manualDeadline is a context whose deadline the test expires at a chosen
// moment, so the deadline case is as deterministic as the cancel case.
type manualDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func (c *manualDeadline) Done() <-chan struct{} { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *manualDeadline) expire() { c.once.Do(func() { close(c.done) }) }

// recorderRenderer collects events for assertions.
type recorderRenderer struct {
	mu     sync.Mutex
	events *[]Event
}

func recorder(events *[]Event) Renderer { return &recorderRenderer{events: events} }

func (r *recorderRenderer) Handle(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.events = append(*r.events, e)
}

func (r *recorderRenderer) Close() {}

// TestReportChanged: a run changed something when a step whose plan found a
// difference was applied; a step without a plan (it always applies) does not
// count, nor do unchanged, planned or failed steps.
func TestReportChanged(t *testing.T) {
	opaque := NewStep("Plugins: PostUp", nil, nil)
	found := NewStep("Bridge network", func(context.Context) ([]Change, error) {
		return []Change{{Action: "create", Target: "network kind"}}, nil
	}, nil)
	converged := NewStep("Check", func(context.Context) ([]Change, error) { return nil, nil }, nil)
	for _, tt := range []struct {
		name  string
		steps []Step
		opts  Options
		want  bool
	}{
		{"only an opaque step", []Step{converged, opaque}, Options{}, false},
		{"a found change applied", []Step{converged, found, opaque}, Options{}, true},
		{"a found change only planned", []Step{found, opaque}, Options{DryRun: true}, false},
	} {
		rep, err := Run(context.Background(), "up", tt.steps, tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := rep.Changed(); got != tt.want {
			t.Errorf("%s: Changed() = %v, want %v (steps %+v)", tt.name, got, tt.want, rep.Steps)
		}
	}
}

// TestDryRunReuses: in --dry-run, a step whose plan holds only reuses (a
// PostUp whose plugins' recorded results hold) is unchanged and its lines
// are still shown; one with a change and a reuse is planned, counted apart.
// Outside --dry-run a plan of reuses is applied as any other.
func TestDryRunReuses(t *testing.T) {
	applied := 0
	apply := func(context.Context, Reporter, []Change) error { applied++; return nil }
	reuseOnly := NewStep("Plugins: PostUp", func(context.Context) ([]Change, error) {
		return []Change{{Action: ActionReuse, Target: "plugin a", Detail: "unchanged since 10:00"}, {Action: ActionReuse, Target: "plugin b"}}, nil
	}, apply)
	mixed := NewStep("Plugins: again", func(context.Context) ([]Change, error) {
		return []Change{{Action: ActionRun, Target: "plugin a"}, {Action: ActionReuse, Target: "plugin b"}}, nil
	}, apply)
	var out bytes.Buffer
	rep, err := Run(context.Background(), "up", []Step{reuseOnly, mixed}, Options{DryRun: true, Renderer: NewPlainRenderer(&out), Now: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := []Status{rep.Steps[0].Status, rep.Steps[1].Status}; got[0] != StatusUnchanged || got[1] != StatusPlanned || applied != 0 {
		t.Errorf("statuses %v, applied %d; want unchanged, planned, none applied", got, applied)
	}
	for _, want := range []string{
		"1/2 Plugins: PostUp: would reuse plugin a: unchanged since 10:00\n",
		"1/2 Plugins: PostUp: would reuse plugin b\n",
		"1/2 Plugins: PostUp: unchanged, 2 reused\n",
		"2/2 Plugins: again: would run plugin a\n",
		"2/2 Plugins: again: planned, 1 change, 1 reused\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out.String())
		}
	}
	if rep, err := Run(context.Background(), "up", []Step{reuseOnly}, Options{}); err != nil || rep.Steps[0].Status != StatusDone || applied != 1 {
		t.Errorf("without --dry-run: %v, %+v, applied %d; want the step applied", err, rep.Steps, applied)
	}
}
