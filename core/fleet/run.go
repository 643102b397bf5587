package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Outcome is what became of one cluster in a Run.
type Outcome string

// The outcomes.
const (
	// OutcomeCreated: Create returned nil for a create.
	OutcomeCreated Outcome = "created"
	// OutcomeRecreated: Create returned nil for a recreate.
	OutcomeRecreated Outcome = "recreated"
	// OutcomeAdopted: Adopt returned nil.
	OutcomeAdopted Outcome = "adopted"
	// OutcomeExisting: the plan said skip; nothing was called.
	OutcomeExisting Outcome = "existing"
	// OutcomeFailed: Create or Adopt returned an error or panicked.
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: the run was cancelled while the cluster was being
	// created and Create returned an error; it may be half-created (the
	// next plan recreates it).
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeSkipped: ContinueOnError, and a dependency failed or was
	// skipped; Reason names it.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeNotStarted: FailFast stopped the run, or it was cancelled,
	// before the cluster started; Reason says which.
	OutcomeNotStarted Outcome = "not-started"
)

// succeeded reports whether o satisfies the cluster's dependents.
func (o Outcome) succeeded() bool {
	switch o {
	case OutcomeCreated, OutcomeRecreated, OutcomeAdopted, OutcomeExisting:
		return true
	}
	return false
}

// Result is the outcome of one cluster.
type Result struct {
	Name    string
	Slot    int
	Action  Action
	Outcome Outcome
	// Reason explains existing, skipped, cancelled and not-started.
	Reason string
	// Err is Create's or Adopt's error (failed, cancelled).
	Err error
}

// EventKind says whether an Event starts or ends a cluster's work.
type EventKind string

// The event kinds.
const (
	// EventStarted: Create or Adopt is about to be called.
	EventStarted EventKind = "started"
	// EventFinished: the cluster has its final Outcome.
	EventFinished EventKind = "finished"
)

// Event reports progress; Result.Outcome is empty for EventStarted.
type Event struct {
	Kind   EventKind
	Result Result
}

// RunOptions tune Run.
type RunOptions struct {
	// MaxParallel (> 0) overrides the plan's; at most this many Create or
	// Adopt calls run at once.
	MaxParallel int
	// Strategy (non-empty) overrides the plan's.
	Strategy Strategy
	// Create makes one cluster, for Action create and recreate (for
	// recreate it deletes the half-created cluster first). It must honour
	// ctx and set marina's completion marker only as its very last step.
	// It must not modify c's maps. Required when the plan creates anything.
	Create func(ctx context.Context, c PlannedCluster) error
	// Adopt labels one complete cluster from outside the fleet as a member
	// (Action adopt). Required when the plan adopts anything.
	Adopt func(ctx context.Context, c PlannedCluster) error
	// OnEvent receives every event, from one goroutine at a time, in order.
	// It must return quickly; nil discards events.
	OnEvent func(Event)

	// idle, for tests, is called each time the scheduler has started all
	// it may and is about to wait for a running cluster.
	idle func()
}

// Summary is the outcome of a Run.
type Summary struct {
	Fleet string
	// Results are in the plan's (manifest) order.
	Results []Result
	// Err is set when the plan was rejected before anything ran (a
	// dependency cycle, a missing Create function...); every result is
	// then not-started.
	Err error
}

// Run creates the plan's clusters in dependency order: a cluster starts
// once each of its dependencies was created, recreated, adopted or already
// existed; at most MaxParallel run at once, lowest manifest index first
// among those ready. Under FailFast nothing new starts after the first
// failure; under ContinueOnError the dependents of a failed cluster are
// skipped and every other branch continues. When ctx is cancelled nothing
// new starts and the running calls see ctx cancelled. Run returns when no
// call is running: it leaves no goroutine behind as long as Create and
// Adopt return. A panicking Create or Adopt fails its cluster, not the run.
func Run(ctx context.Context, plan *FleetPlan, opts RunOptions) Summary {
	if plan == nil {
		return Summary{Err: errors.New("fleet: Run needs a plan; call Plan first")}
	}
	s := &scheduler{opts: opts, plan: plan}
	s.sum = Summary{Fleet: plan.Fleet, Results: make([]Result, len(plan.Clusters))}
	for i, c := range plan.Clusters {
		s.sum.Results[i] = Result{Name: c.Name, Slot: c.Slot, Action: c.Action}
	}
	if err := s.prepare(); err != nil {
		s.sum.Err = err
		for i := range s.sum.Results {
			s.sum.Results[i].Outcome = OutcomeNotStarted
			s.sum.Results[i].Reason = "the plan was rejected before anything ran"
		}
		return s.sum
	}
	s.run(ctx)
	return s.sum
}

type scheduler struct {
	opts     RunOptions
	plan     *FleetPlan
	sum      Summary
	g        *graph
	max      int
	strategy Strategy
}

// prepare checks the plan and options before anything runs.
func (s *scheduler) prepare() error {
	ps := &problems{}
	names := make([]string, len(s.plan.Clusters))
	deps := make([][]string, len(s.plan.Clusters))
	for i, c := range s.plan.Clusters {
		names[i], deps[i] = c.Name, c.DependsOn
		path := fmt.Sprintf("spec.clusters[%d]", i)
		switch c.Action {
		case ActionCreate, ActionRecreate:
			if s.opts.Create == nil {
				ps.add(path, "cluster %s needs RunOptions.Create, which is nil", c.Name)
			}
		case ActionAdopt:
			if s.opts.Adopt == nil {
				ps.add(path, "cluster %s needs RunOptions.Adopt, which is nil", c.Name)
			}
		case ActionSkip:
		default:
			ps.add(path, "cluster %s has unknown action %q; use create, recreate, adopt or skip", c.Name, c.Action)
		}
	}
	s.g = buildGraph(names, deps, ps.add)
	s.strategy = s.plan.Strategy
	if s.opts.Strategy != "" {
		s.strategy = s.opts.Strategy
	}
	if s.strategy == "" {
		s.strategy = FailFast
	}
	if !contains(Strategies, s.strategy) {
		ps.add("spec.strategy", "unknown strategy %q; use %s or %s", s.strategy, FailFast, ContinueOnError)
	}
	s.max = s.plan.MaxParallel
	if s.opts.MaxParallel > 0 {
		s.max = s.opts.MaxParallel
	}
	if s.max <= 0 {
		s.max = DefaultMaxParallel
	}
	return ps.err(s.plan.Source, "plan")
}

type finished struct {
	i   int
	err error
}

func (s *scheduler) emit(kind EventKind, i int) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(Event{Kind: kind, Result: s.sum.Results[i]})
	}
}

func (s *scheduler) finish(i int, o Outcome, reason string, err error) {
	r := &s.sum.Results[i]
	r.Outcome, r.Reason, r.Err = o, reason, err
	s.emit(EventFinished, i)
}

// run is the coordinator: one goroutine owns all state; workers only call
// Create/Adopt and report on a channel with room for every cluster, so a
// worker never blocks and never touches shared state.
func (s *scheduler) run(ctx context.Context) {
	n := len(s.plan.Clusters)
	waiting := make([]int, n) // dependencies not yet satisfied
	for i := range n {
		waiting[i] = len(s.g.deps[i])
	}
	var ready []int // sorted by manifest index
	satisfy := func(i int) {
		for _, d := range s.g.dependents[i] {
			if waiting[d]--; waiting[d] == 0 && s.sum.Results[d].Outcome == "" {
				at := sort.SearchInts(ready, d)
				ready = append(ready, 0)
				copy(ready[at+1:], ready[at:])
				ready[at] = d
			}
		}
	}
	// Existing clusters are done before anything starts.
	for i, c := range s.plan.Clusters {
		if c.Action == ActionSkip {
			s.finish(i, OutcomeExisting, c.Reason, nil)
			for _, d := range s.g.dependents[i] {
				waiting[d]--
			}
		}
	}
	for i := range n {
		if s.sum.Results[i].Outcome == "" && waiting[i] == 0 {
			ready = append(ready, i) // ascending
		}
	}

	results := make(chan finished, n)
	running := 0
	stop := "" // why nothing new starts
	ctxDone := ctx.Done()
	for {
		for stop == "" && running < s.max && len(ready) > 0 {
			if ctx.Err() != nil {
				stop = "not started: the run was cancelled"
				break
			}
			i := ready[0]
			ready = ready[1:]
			running++
			s.emit(EventStarted, i)
			go s.work(ctx, i, results)
		}
		if running == 0 {
			break
		}
		if s.opts.idle != nil {
			s.opts.idle()
		}
		select {
		case f := <-results:
			running--
			s.done(ctx, f, satisfy, &stop)
		case <-ctxDone:
			ctxDone = nil // seen; keep collecting the running ones
			if stop == "" {
				stop = "not started: the run was cancelled"
			}
		}
	}
	if stop == "" {
		stop = "not started: its dependencies did not all succeed"
	}
	for i := range s.sum.Results {
		if s.sum.Results[i].Outcome == "" {
			s.finish(i, OutcomeNotStarted, stop, nil)
		}
	}
}

// work calls Create or Adopt for cluster i and reports on results.
func (s *scheduler) work(ctx context.Context, i int, results chan<- finished) {
	c := s.plan.Clusters[i]
	fn := s.opts.Create
	if c.Action == ActionAdopt {
		fn = s.opts.Adopt
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s of cluster %s panicked: %v", c.Action, c.Name, r)
			}
		}()
		return fn(ctx, c)
	}()
	results <- finished{i, err}
}

// done records a finished call and decides what it unblocks or stops.
func (s *scheduler) done(ctx context.Context, f finished, satisfy func(int), stop *string) {
	c := s.plan.Clusters[f.i]
	if f.err == nil {
		o := OutcomeCreated
		switch c.Action {
		case ActionRecreate:
			o = OutcomeRecreated
		case ActionAdopt:
			o = OutcomeAdopted
		}
		s.finish(f.i, o, "", nil)
		satisfy(f.i)
		return
	}
	if ctx.Err() != nil {
		s.finish(f.i, OutcomeCancelled, "interrupted by cancellation; it may be half-created: the next fleet create recreates it", f.err)
		if *stop == "" {
			*stop = "not started: the run was cancelled"
		}
		return
	}
	s.finish(f.i, OutcomeFailed, "", f.err)
	if s.strategy == FailFast {
		if *stop == "" {
			*stop = fmt.Sprintf("not started: %s failed and the strategy is %s", c.Name, FailFast)
		}
		return
	}
	// ContinueOnError: skip everything downstream of the failure.
	queue := []int{f.i}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, d := range s.g.dependents[u] {
			if s.sum.Results[d].Outcome != "" {
				continue
			}
			reason := fmt.Sprintf("dependency %s failed", c.Name)
			if u != f.i {
				reason = fmt.Sprintf("dependency %s was skipped (%s failed)", s.plan.Clusters[u].Name, c.Name)
			}
			s.finish(d, OutcomeSkipped, reason, nil)
			queue = append(queue, d)
		}
	}
}

// outcomeOrder is the order outcomes are counted in.
var outcomeOrder = []Outcome{OutcomeCreated, OutcomeRecreated, OutcomeAdopted, OutcomeExisting, OutcomeFailed, OutcomeCancelled, OutcomeSkipped, OutcomeNotStarted}

// Count returns how many clusters ended with outcome o.
func (s Summary) Count(o Outcome) int {
	n := 0
	for _, r := range s.Results {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

// Names returns the clusters that ended with outcome o, in manifest order.
func (s Summary) Names(o Outcome) []string {
	var out []string
	for _, r := range s.Results {
		if r.Outcome == o {
			out = append(out, r.Name)
		}
	}
	return out
}

// OK reports whether every cluster of the fleet exists and is complete.
func (s Summary) OK() bool {
	if s.Err != nil {
		return false
	}
	for _, r := range s.Results {
		if !r.Outcome.succeeded() {
			return false
		}
	}
	return true
}

// String is the one-line summary, e.g.
// "fleet demo: 2 created, 1 existing, 1 failed, 1 skipped, 1 not started".
func (s Summary) String() string {
	var parts []string
	for _, o := range outcomeOrder {
		if n := s.Count(o); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ReplaceAll(string(o), "-", " ")))
		}
	}
	if len(parts) == 0 {
		return "fleet " + s.Fleet + ": no clusters"
	}
	if s.Count(OutcomeExisting) == len(s.Results) {
		return "fleet " + s.Fleet + ": nothing to do, " + parts[0]
	}
	return "fleet " + s.Fleet + ": " + strings.Join(parts, ", ")
}

// Failure returns nil when OK, else an error made of the summary line and
// one wrapped error per cluster that failed, was cancelled, skipped or not
// started (errors.Is sees Create's errors, e.g. context.Canceled).
func (s Summary) Failure() error {
	if s.OK() {
		return nil
	}
	if s.Err != nil {
		return s.Err
	}
	errs := []error{errors.New(s.String())}
	for _, r := range s.Results {
		switch {
		case r.Outcome.succeeded():
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("  %s: %s: %w", r.Name, r.Outcome, r.Err))
		default:
			errs = append(errs, fmt.Errorf("  %s: %s: %s", r.Name, r.Outcome, r.Reason))
		}
	}
	return errors.Join(errs...)
}

// Write renders one line per cluster (NAME SLOT ACTION OUTCOME DETAIL)
// followed by the summary line.
func (s Summary) Write(w io.Writer) error {
	if s.Err != nil {
		_, err := fmt.Fprintf(w, "fleet %s: nothing ran: %v\n", s.Fleet, s.Err)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSLOT\tACTION\tOUTCOME\tDETAIL")
	for _, r := range s.Results {
		detail := r.Reason
		if r.Err != nil {
			detail = strings.ReplaceAll(r.Err.Error(), "\n", " ")
		}
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, slotText(r.Slot), r.Action, r.Outcome, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, s.String())
	return err
}
