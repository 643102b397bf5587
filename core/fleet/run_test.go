package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// failsafe bounds every wait of the harness; no test logic depends on it.
const failsafe = 20 * time.Second

// call is one Create (or Adopt) the scheduler made; the test answers it.
type call struct {
	name  string
	reply chan error
}

// harness runs the scheduler in lock-step with the test: the scheduler's
// idle hook hands control to the test each time it has started everything
// it may, and waits until the test has acted (released a create, cancelled)
// and calls wait again. What is running at each handoff is exactly what the
// scheduler decided, with no sleeps and no timing assumptions.
type harness struct {
	t         *testing.T
	calls     chan *call
	idle      chan struct{}
	resume    chan struct{}
	paused    bool // the scheduler waits in its idle hook for resume
	done      chan Summary
	ignoreCtx map[string]bool // these Creates finish only when released

	// Written by OnEvent on the scheduler's goroutine; read by the test
	// only after an idle or done handoff (which orders them).
	events      []Event
	started     map[string]bool
	inflight    int
	maxInflight int

	pending map[string]*call
	replied map[string]bool
}

func newHarness(t *testing.T) *harness {
	return &harness{
		t: t, calls: make(chan *call, 1000), idle: make(chan struct{}), resume: make(chan struct{}), done: make(chan Summary, 1),
		ignoreCtx: map[string]bool{}, started: map[string]bool{}, pending: map[string]*call{}, replied: map[string]bool{},
	}
}

func (h *harness) create(ctx context.Context, c PlannedCluster) error {
	cl := &call{name: c.Name, reply: make(chan error, 1)}
	h.calls <- cl
	if h.ignoreCtx[c.Name] {
		return <-cl.reply
	}
	select {
	case err := <-cl.reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("creating %s: %w", c.Name, ctx.Err())
	}
}

func (h *harness) onEvent(e Event) {
	h.events = append(h.events, e)
	switch {
	case e.Kind == EventStarted:
		h.started[e.Result.Name] = true
		h.inflight++
		h.maxInflight = max(h.maxInflight, h.inflight)
	case h.started[e.Result.Name]:
		h.inflight--
	}
}

// run starts Run in the background with the harness as Create, Adopt (unless
// opts has its own) and OnEvent.
func (h *harness) run(ctx context.Context, p *FleetPlan, opts RunOptions) {
	if opts.Create == nil {
		opts.Create = h.create
	}
	if opts.Adopt == nil {
		opts.Adopt = h.create
	}
	opts.OnEvent = h.onEvent
	opts.idle = func() {
		h.idle <- struct{}{}
		<-h.resume
	}
	go func() { h.done <- Run(ctx, p, opts) }()
}

// wait returns the clusters running (started, not finished) at the
// scheduler's next idle point, in start order; or the summary when Run
// returned instead.
func (h *harness) wait() (running []string, sum Summary, finished bool) {
	h.t.Helper()
	if h.paused {
		h.paused = false
		h.resume <- struct{}{}
	}
	select {
	case <-h.idle:
		h.paused = true
	case s := <-h.done:
		return nil, s, true
	case <-time.After(failsafe):
		h.t.Fatal("the scheduler neither waited nor returned")
	}
	fin := map[string]bool{}
	for _, e := range h.events {
		if e.Kind == EventFinished {
			fin[e.Result.Name] = true
		}
	}
	for _, e := range h.events {
		if e.Kind == EventStarted && !fin[e.Result.Name] {
			running = append(running, e.Result.Name)
		}
	}
	for _, n := range running {
		for !h.replied[n] && h.pending[n] == nil {
			select {
			case c := <-h.calls:
				h.pending[c.name] = c
			case <-time.After(failsafe):
				h.t.Fatalf("started %s but its Create was never called", n)
			}
		}
	}
	return running, Summary{}, false
}

// release answers the Create of name.
func (h *harness) release(name string, err error) {
	h.t.Helper()
	c := h.pending[name]
	if c == nil {
		h.t.Fatalf("release %s: not running", name)
	}
	delete(h.pending, name)
	h.replied[name] = true
	c.reply <- err
}

// expectRunning waits for the next idle point and checks what runs.
func (h *harness) expectRunning(want ...string) {
	h.t.Helper()
	got, sum, finished := h.wait()
	if finished {
		h.t.Fatalf("Run returned (%s), want %v running", sum, want)
	}
	if !reflect.DeepEqual(got, want) {
		h.t.Fatalf("running %v, want %v", got, want)
	}
}

func (h *harness) expectDone() Summary {
	h.t.Helper()
	for range 1000 {
		if _, sum, finished := h.wait(); finished {
			return sum
		}
	}
	h.t.Fatal("Run did not return")
	return Summary{}
}

// startOrder lists the clusters in the order they started.
func (h *harness) startOrder() []string {
	var out []string
	for _, e := range h.events {
		if e.Kind == EventStarted {
			out = append(out, e.Result.Name)
		}
	}
	return out
}

// checkDependencyOrder asserts that every cluster started only after each
// of its dependencies had finished successfully.
func checkDependencyOrder(t *testing.T, p *FleetPlan, events []Event) {
	t.Helper()
	deps := map[string][]string{}
	for _, c := range p.Clusters {
		deps[c.Name] = c.DependsOn
	}
	ok := map[string]bool{}
	for _, e := range events {
		switch e.Kind {
		case EventFinished:
			ok[e.Result.Name] = e.Result.Outcome.succeeded()
		case EventStarted:
			for _, d := range deps[e.Result.Name] {
				if !ok[d] {
					t.Errorf("%s started before its dependency %s succeeded", e.Result.Name, d)
				}
			}
		}
	}
}

// dag builds a plan from specs "name", "name<dep1,dep2"; a leading "~"
// makes the cluster live and complete (skip), "^" makes it adopted.
func dag(strategy Strategy, maxParallel int, specs ...string) *FleetPlan {
	p := &FleetPlan{Fleet: "test", Strategy: strategy, MaxParallel: maxParallel}
	for i, s := range specs {
		c := PlannedCluster{Fleet: "test", Slot: i + 1, Action: ActionCreate}
		switch {
		case strings.HasPrefix(s, "~"):
			c.Action, c.Reason, s = ActionSkip, "exists, member of this fleet", s[1:]
		case strings.HasPrefix(s, "^"):
			c.Action, s = ActionAdopt, s[1:]
		}
		name, deps, _ := strings.Cut(s, "<")
		c.Name = name
		if deps != "" {
			c.DependsOn = strings.Split(deps, ",")
		}
		p.Clusters = append(p.Clusters, c)
	}
	return p
}

func outcomes(s Summary) map[string]string {
	m := map[string]string{}
	for _, r := range s.Results {
		v := string(r.Outcome)
		if r.Reason != "" {
			v += ": " + r.Reason
		}
		if r.Err != nil {
			v += ": " + r.Err.Error()
		}
		m[r.Name] = v
	}
	return m
}

func checkOutcomes(t *testing.T, s Summary, want map[string]string) {
	t.Helper()
	got := outcomes(s)
	for _, name := range sortedKeys(want) {
		if got[name] != want[name] {
			t.Errorf("%s: %q, want %q", name, got[name], want[name])
		}
	}
	if len(got) != len(want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
}

// TestRunOrdering: a dependent starts only once all its dependencies have
// finished, and among ready clusters the lowest manifest index goes first.
func TestRunOrdering(t *testing.T) {
	h := newHarness(t)
	p := dag(FailFast, 4, "a", "b<a", "c<a", "d<b,c", "e")
	h.run(context.Background(), p, RunOptions{})
	h.expectRunning("a", "e")
	h.release("a", nil)
	h.expectRunning("e", "b", "c")
	h.release("c", nil)
	h.expectRunning("e", "b") // d still waits for b
	h.release("b", nil)
	h.expectRunning("e", "d")
	h.release("e", nil)
	h.expectRunning("d")
	h.release("d", nil)
	sum := h.expectDone()
	if !sum.OK() || sum.Failure() != nil || sum.Count(OutcomeCreated) != 5 {
		t.Errorf("summary %s, failure %v", sum, sum.Failure())
	}
	if got, want := h.startOrder(), []string{"a", "e", "b", "c", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("start order %v, want %v", got, want)
	}
	checkDependencyOrder(t, p, h.events)
}

// TestRunParallelismBound: with a wide DAG exactly MaxParallel creates run
// at once, never more, and a freed place is refilled at once.
func TestRunParallelismBound(t *testing.T) {
	var wide []string
	for i := range 10 {
		wide = append(wide, fmt.Sprintf("c%d", i))
	}
	tests := []struct {
		name     string
		planMax  int
		optsMax  int
		wantBusy int
	}{
		{"from the plan", 3, 0, 3},
		{"options override the plan", 5, 2, 2},
		{"default", 0, 0, DefaultMaxParallel},
		{"sequential", 1, 0, 1},
		{"wider than the DAG", 20, 0, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.run(context.Background(), dag(FailFast, tt.planMax, wide...), RunOptions{MaxParallel: tt.optsMax})
			left := len(wide)
			for {
				running, sum, finished := h.wait()
				if finished {
					if !sum.OK() {
						t.Errorf("summary %s", sum)
					}
					break
				}
				if want := min(tt.wantBusy, left); len(running) != want {
					t.Fatalf("%d running (%v), want %d", len(running), running, want)
				}
				h.release(running[len(running)-1], nil) // newest first, to mix the order
				left--
			}
			if h.maxInflight != tt.wantBusy {
				t.Errorf("at most %d ran at once, want exactly %d", h.maxInflight, tt.wantBusy)
			}
		})
	}
}

var errBoom = errors.New("boom")

// TestRunFailFast: after the first failure nothing new starts, the running
// create finishes, everything else is not started.
func TestRunFailFast(t *testing.T) {
	h := newHarness(t)
	p := dag("", 2, "a", "b", "c", "d", "e<a")
	h.run(context.Background(), p, RunOptions{})
	h.expectRunning("a", "b")
	h.release("a", errBoom)
	h.expectRunning("b") // a place is free, but FailFast starts nothing
	h.release("b", nil)
	sum := h.expectDone()
	stop := "not started: a failed and the strategy is FailFast"
	checkOutcomes(t, sum, map[string]string{
		"a": "failed: boom", "b": "created", "c": "not-started: " + stop, "d": "not-started: " + stop, "e": "not-started: " + stop,
	})
	if got := h.startOrder(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("started %v, want [a b]", got)
	}
	err := sum.Failure()
	if !errors.Is(err, errBoom) || !strings.HasPrefix(err.Error(), "fleet test: 1 created, 1 failed, 3 not started\n  a: failed: boom") {
		t.Errorf("failure: %v", err)
	}
}

// TestRunContinueOnError: independent branches continue; every cluster
// downstream of the failure is skipped and says why.
func TestRunContinueOnError(t *testing.T) {
	h := newHarness(t)
	// The plan says FailFast; the option overrides it.
	p := dag(FailFast, 2, "a", "b<a", "c<b", "d", "e<d", "f<a,d")
	h.run(context.Background(), p, RunOptions{Strategy: ContinueOnError})
	h.expectRunning("a", "d")
	h.release("a", errBoom)
	h.expectRunning("d")
	h.release("d", nil)
	h.expectRunning("e")
	h.release("e", nil)
	sum := h.expectDone()
	checkOutcomes(t, sum, map[string]string{
		"a": "failed: boom",
		"b": "skipped: dependency a failed",
		"c": "skipped: dependency b was skipped (a failed)",
		"d": "created",
		"e": "created",
		"f": "skipped: dependency a failed",
	})
	if sum.String() != "fleet test: 2 created, 1 failed, 3 skipped" {
		t.Errorf("summary line %q", sum)
	}
	checkDependencyOrder(t, p, h.events)
}

// TestRunCancel: once ctx is cancelled nothing new starts, running creates
// see the cancellation, and the summary says what happened to each.
func TestRunCancel(t *testing.T) {
	t.Run("running creates return", func(t *testing.T) {
		h := newHarness(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.run(ctx, dag(ContinueOnError, 2, "a", "b", "c", "d<a"), RunOptions{})
		h.expectRunning("a", "b")
		cancel()
		sum := h.expectDone()
		half := "cancelled: interrupted by cancellation; it may be half-created: the next fleet create recreates it: creating %s: context canceled"
		checkOutcomes(t, sum, map[string]string{
			"a": fmt.Sprintf(half, "a"), "b": fmt.Sprintf(half, "b"),
			"c": "not-started: not started: the run was cancelled", "d": "not-started: not started: the run was cancelled",
		})
		if got := h.startOrder(); !reflect.DeepEqual(got, []string{"a", "b"}) {
			t.Errorf("started %v after cancellation, want only [a b]", got)
		}
		if len(h.calls) != 0 {
			t.Errorf("%d more Create calls after cancellation", len(h.calls))
		}
		if !errors.Is(sum.Failure(), context.Canceled) {
			t.Errorf("failure %v does not wrap context.Canceled", sum.Failure())
		}
	})
	t.Run("a create that finishes anyway", func(t *testing.T) {
		h := newHarness(t)
		h.ignoreCtx["a"] = true
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.run(ctx, dag(FailFast, 2, "a", "b", "c", "d<a"), RunOptions{})
		h.expectRunning("a", "b")
		cancel()
		for range 10 { // b returns by itself; a waits for us
			running, _, finished := h.wait()
			if finished {
				t.Fatal("Run returned while a was still running")
			}
			if reflect.DeepEqual(running, []string{"a"}) {
				break
			}
		}
		h.release("a", nil)
		sum := h.expectDone()
		got := outcomes(sum)
		if got["a"] != "created" || !strings.HasPrefix(got["b"], "cancelled") || got["c"] != "not-started: not started: the run was cancelled" || got["d"] != "not-started: not started: the run was cancelled" {
			t.Errorf("outcomes %v", got)
		}
	})
	t.Run("cancelled before the start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		sum := Run(ctx, dag("", 2, "a", "~b"), RunOptions{Create: func(context.Context, PlannedCluster) error { called = true; return nil }})
		if called {
			t.Error("Create was called with a cancelled context")
		}
		checkOutcomes(t, sum, map[string]string{"a": "not-started: not started: the run was cancelled", "b": "existing: exists, member of this fleet"})
	})
}

// TestRunRejectsBeforeRunning: a plan the scheduler cannot run (a cycle,
// a missing function, an unknown action or strategy) is rejected before
// anything runs, and every cluster is reported not started.
func TestRunRejectsBeforeRunning(t *testing.T) {
	noCall := func(t *testing.T) func(context.Context, PlannedCluster) error {
		return func(_ context.Context, c PlannedCluster) error {
			t.Errorf("%s was run", c.Name)
			return nil
		}
	}
	unknown := dag("", 1, "a")
	unknown.Clusters[0].Action = "upgrade"
	tests := []struct {
		name string
		plan *FleetPlan
		opts func(t *testing.T) RunOptions
		want string
	}{
		{"cycle", dag("", 2, "a<c", "b<a", "c<b", "d"), func(t *testing.T) RunOptions { return RunOptions{Create: noCall(t)} },
			"dependency cycle a -> c -> b -> a"},
		{"unknown dependency", dag("", 2, "a<x"), func(t *testing.T) RunOptions { return RunOptions{Create: noCall(t)} },
			`unknown cluster "x"`},
		{"no Create", dag("", 2, "a"), func(*testing.T) RunOptions { return RunOptions{} },
			"cluster a needs RunOptions.Create, which is nil"},
		{"no Adopt", dag("", 2, "a", "^b"), func(t *testing.T) RunOptions { return RunOptions{Create: noCall(t)} },
			"cluster b needs RunOptions.Adopt, which is nil"},
		{"unknown action", unknown, func(t *testing.T) RunOptions { return RunOptions{Create: noCall(t)} },
			`unknown action "upgrade"`},
		{"unknown strategy", dag("", 2, "a"), func(t *testing.T) RunOptions { return RunOptions{Create: noCall(t), Strategy: "Eventually"} },
			`unknown strategy "Eventually"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events int
			opts := tt.opts(t)
			opts.OnEvent = func(Event) { events++ }
			sum := Run(context.Background(), tt.plan, opts)
			if sum.Err == nil || !strings.Contains(sum.Err.Error(), tt.want) {
				t.Fatalf("Err = %v, want …%s…", sum.Err, tt.want)
			}
			if sum.OK() || sum.Failure() != sum.Err || events != 0 {
				t.Errorf("OK %v, failure %v, %d events", sum.OK(), sum.Failure(), events)
			}
			for _, r := range sum.Results {
				if r.Outcome != OutcomeNotStarted {
					t.Errorf("%s: %s", r.Name, r.Outcome)
				}
			}
		})
	}
	if sum := Run(context.Background(), nil, RunOptions{}); sum.Err == nil {
		t.Error("Run(nil plan) has no error")
	}
}

// TestRunCycleFromManifest: the cycle of a manifest is named by Validate and
// by Plan, so the scheduler is never reached.
func TestRunCycleFromManifest(t *testing.T) {
	data := head + "spec:\n  clusters:\n  - {name: a, dependsOn: [b]}\n  - {name: b, dependsOn: [a]}\n"
	f := parseOrFatal(t, data)
	for _, err := range []error{Validate(f, testCtx), func() error { _, err := Plan(f, LiveState{}, PlanOptions{}); return err }()} {
		if err == nil || !strings.Contains(err.Error(), "dependency cycle a -> b -> a") {
			t.Errorf("got %v", err)
		}
	}
}

// TestRunSkipAndAdopt: existing clusters satisfy their dependents without
// any call; adopted clusters go through Adopt, not Create.
func TestRunSkipAndAdopt(t *testing.T) {
	h := newHarness(t)
	var adopted []string
	p := dag("", 4, "~hub", "x<hub", "^y<hub", "z<x,y")
	h.run(context.Background(), p, RunOptions{Adopt: func(ctx context.Context, c PlannedCluster) error {
		adopted = append(adopted, c.Name) // runs on a worker; read after Run returned
		return h.create(ctx, c)
	}})
	h.expectRunning("x", "y")
	h.release("y", nil)
	h.expectRunning("x")
	h.release("x", nil)
	h.expectRunning("z")
	h.release("z", nil)
	sum := h.expectDone()
	checkOutcomes(t, sum, map[string]string{"hub": "existing: exists, member of this fleet", "x": "created", "y": "adopted", "z": "created"})
	if !reflect.DeepEqual(adopted, []string{"y"}) {
		t.Errorf("adopted %v", adopted)
	}
	if h.events[0].Kind != EventFinished || h.events[0].Result.Name != "hub" {
		t.Errorf("first event %+v, want hub finished", h.events[0])
	}
	all := dag("", 4, "~a", "~b<a")
	if sum := Run(context.Background(), all, RunOptions{}); !sum.OK() || sum.String() != "fleet test: nothing to do, 2 existing" {
		t.Errorf("all existing: %s", sum)
	}
}

// TestRunPanic: a panicking Create fails its cluster, names the panic, and
// the run goes on.
func TestRunPanic(t *testing.T) {
	p := dag(ContinueOnError, 2, "a", "b", "c<a")
	p.Clusters[0].Action = ActionRecreate
	sum := Run(context.Background(), p, RunOptions{Create: func(_ context.Context, c PlannedCluster) error {
		if c.Name == "a" {
			panic("kaboom")
		}
		return nil
	}})
	checkOutcomes(t, sum, map[string]string{"a": "failed: recreate of cluster a panicked: kaboom", "b": "created", "c": "skipped: dependency a failed"})
}

// TestRunRecreateOutcome: a recreate that succeeds is reported as such.
func TestRunRecreateOutcome(t *testing.T) {
	p := dag("", 2, "a")
	p.Clusters[0].Action = ActionRecreate
	var got Action
	sum := Run(context.Background(), p, RunOptions{Create: func(_ context.Context, c PlannedCluster) error { got = c.Action; return nil }})
	if got != ActionRecreate || sum.Results[0].Outcome != OutcomeRecreated {
		t.Errorf("Create saw %q, outcome %q", got, sum.Results[0].Outcome)
	}
}

func TestSummaryWrite(t *testing.T) {
	sum := Summary{Fleet: "demo", Results: []Result{
		{Name: "hub", Slot: 1, Action: ActionSkip, Outcome: OutcomeExisting, Reason: "exists, member of this fleet"},
		{Name: "east", Slot: 3, Action: ActionCreate, Outcome: OutcomeFailed, Err: errors.New("kind create failed:\nport taken")},
		{Name: "edge", Slot: 4, Action: ActionCreate, Outcome: OutcomeSkipped, Reason: "dependency east failed"},
	}}
	var b bytes.Buffer
	if err := sum.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := `NAME  SLOT  ACTION  OUTCOME   DETAIL
hub   1     skip    existing  exists, member of this fleet
east  3     create  failed    kind create failed: port taken
edge  4     create  skipped   dependency east failed
fleet demo: 1 existing, 1 failed, 1 skipped
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if got := sum.Names(OutcomeFailed); !reflect.DeepEqual(got, []string{"east"}) {
		t.Errorf("Names(failed) = %v", got)
	}
}

// TestRunModel drives random DAGs (fixed seeds) through the scheduler,
// answering creates in random order with random failures, and checks at
// every step that the scheduler is bounded and work-conserving, and at the
// end that each outcome follows from the strategy and the failures.
func TestRunModel(t *testing.T) {
	for seed := range uint64(150) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	n := 1 + rng.IntN(12)
	perm := rng.Perm(n) // topological rank of each manifest entry
	specs := make([]string, n)
	for i := range n {
		var deps []string
		for j := range n {
			if perm[j] < perm[i] && rng.IntN(4) == 0 {
				deps = append(deps, fmt.Sprintf("n%d", j))
			}
		}
		s := fmt.Sprintf("n%d", i)
		if rng.IntN(7) == 0 {
			s = "~" + s
		}
		if len(deps) > 0 {
			s += "<" + strings.Join(deps, ",")
		}
		specs[i] = s
	}
	strategy := Strategies[rng.IntN(2)]
	maxPar := 1 + rng.IntN(4)
	fail := map[string]bool{}
	for i := range n {
		if rng.IntN(5) == 0 {
			fail[fmt.Sprintf("n%d", i)] = true
		}
	}
	p := dag(strategy, maxPar, specs...)
	t.Logf("strategy %s, max %d, fail %v, dag %v", strategy, maxPar, sortedKeys(fail), specs)

	h := newHarness(t)
	h.run(context.Background(), p, RunOptions{})
	outcome := func() map[string]Outcome {
		m := map[string]Outcome{}
		for _, e := range h.events {
			if e.Kind == EventFinished {
				m[e.Result.Name] = e.Result.Outcome
			}
		}
		return m
	}
	var sum Summary
	stoppedAt := -1 // starts when FailFast saw its first failure
	for step := 0; ; step++ {
		if step > 1000 {
			t.Fatal("too many steps")
		}
		running, s, finished := h.wait()
		if stoppedAt >= 0 && len(h.startOrder()) != stoppedAt {
			t.Fatalf("FailFast started %v after the first failure", h.startOrder()[stoppedAt:])
		}
		if finished {
			sum = s
			break
		}
		if len(running) > maxPar {
			t.Fatalf("%d running, max %d", len(running), maxPar)
		}
		out := outcome()
		failed := false
		for _, o := range out {
			failed = failed || o == OutcomeFailed
		}
		if !(strategy == FailFast && failed) && len(running) < maxPar {
			// Work-conserving: nothing ready may be left waiting.
			for _, c := range p.Clusters {
				if h.started[c.Name] || out[c.Name] != "" {
					continue
				}
				ready := true
				for _, d := range c.DependsOn {
					ready = ready && out[d].succeeded()
				}
				if ready {
					t.Fatalf("%s is ready but not started while only %d of %d run", c.Name, len(running), maxPar)
				}
			}
		}
		pick := running[rng.IntN(len(running))]
		var err error
		if fail[pick] {
			err = errBoom
			if strategy == FailFast && stoppedAt < 0 {
				stoppedAt = len(h.startOrder())
			}
		}
		h.release(pick, err)
	}
	checkDependencyOrder(t, p, h.events)

	anyFailed := false
	for _, r := range sum.Results {
		anyFailed = anyFailed || r.Outcome == OutcomeFailed
	}
	res := map[string]Result{}
	for _, r := range sum.Results {
		res[r.Name] = r
	}
	for _, c := range p.Clusters {
		r := res[c.Name]
		switch {
		case c.Action == ActionSkip:
			if r.Outcome != OutcomeExisting {
				t.Errorf("%s: %s, want existing", c.Name, r.Outcome)
			}
		case h.started[c.Name]:
			want := OutcomeCreated
			if fail[c.Name] {
				want = OutcomeFailed
			}
			if r.Outcome != want {
				t.Errorf("%s: %s, want %s", c.Name, r.Outcome, want)
			}
		case strategy == ContinueOnError:
			blocked := false
			for _, d := range c.DependsOn {
				blocked = blocked || !res[d].Outcome.succeeded()
			}
			if r.Outcome != OutcomeSkipped || !blocked {
				t.Errorf("%s not started: %s (%s), a dependency failed: %v", c.Name, r.Outcome, r.Reason, blocked)
			}
		default:
			if !anyFailed || r.Outcome != OutcomeNotStarted {
				t.Errorf("%s not started under FailFast: %s, failures: %v", c.Name, r.Outcome, anyFailed)
			}
		}
	}
	if wantOK := !anyFailed && sum.Count(OutcomeSkipped)+sum.Count(OutcomeNotStarted) == 0; sum.OK() != wantOK {
		t.Errorf("OK() = %v with %s", sum.OK(), sum)
	}
}
