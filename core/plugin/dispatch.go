package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bcollard/marina/core/termsafe"
	"github.com/bcollard/marina/sdk"
)

// Plugin is one configured plugin, as the dispatcher runs it.
type Plugin struct {
	// Spec says how to launch it.
	Spec Spec
	// Config is the plugin's config section as JSON (nil: none).
	Config []byte
	// Timeout overrides the plugin's declared deadline for every hook
	// (0: the plugin's default per hook).
	Timeout time.Duration
	// Description is the plugin's cached description (the store keeps one
	// per binary digest), if known. It lets the dispatcher check
	// dependencies and pick the plugins of a hook without starting any
	// process; the plugin's own Describe is still checked when it starts.
	Description *sdk.Description
	// Builtin is the plugin's implementation when it is compiled into this
	// binary (Spec then re-executes the binary to serve the same code).
	// Validate checks its config in-process with sdk.ValidateConfig, the
	// code of the plugin's ValidateConfig RPC, instead of starting it, and
	// Describe describes it in-process when Description is nil; its hooks
	// still run out of process.
	Builtin sdk.Plugin
}

// Dispatcher runs hooks across the configured plugins: in dependency
// order, independent plugins concurrently, starting a plugin only when a
// hook it implements runs (or when its description or config check is
// needed). Outputs accumulate across the RunHook calls of one Dispatcher.
// Its methods are safe for concurrent use; call Close when done.
type Dispatcher struct {
	opts    Options
	names   []string
	entries map[string]*entry
	err     error // configuration error (duplicate names)

	mu      sync.Mutex
	outputs map[string]map[string]string
	closed  bool
	vcache  *ValidateCache
	steady  *SteadyCache
}

type entry struct {
	p Plugin

	mu   sync.Mutex // held while starting
	inst *Instance
	err  error
}

// NewDispatcher returns a Dispatcher for plugins (in config order). No
// plugin is started yet.
func NewDispatcher(plugins []Plugin, opts Options) *Dispatcher {
	d := &Dispatcher{opts: opts.withDefaults(), entries: map[string]*entry{}, outputs: map[string]map[string]string{}}
	for _, p := range plugins {
		if _, dup := d.entries[p.Spec.Name]; dup {
			d.err = errors.Join(d.err, fmt.Errorf("plugin %s is configured twice: keep one entry", p.Spec.Name))
			continue
		}
		d.names = append(d.names, p.Spec.Name)
		d.entries[p.Spec.Name] = &entry{p: p}
	}
	return d
}

// CacheValidation makes Validate look up, in c, what an installed plugin
// (one with a recorded sha256) answered before for the same binary and
// config, and record what it answers: a hit starts no process (see
// ValidateCache). nil turns caching off (the default).
func (d *Dispatcher) CacheValidation(c *ValidateCache) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.vcache = c
}

// SkipSteady makes RunHook reuse a plugin's recorded PostUp result instead
// of starting it while the inputs are the same and the containers its
// result named hold (see SteadyCache), and record what PostUps return.
// nil turns it off (the default: every hook runs).
func (d *Dispatcher) SkipSteady(c *SteadyCache) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.steady = c
}

// steadyFor returns the cache that applies to hook, or nil.
func (d *Dispatcher) steadyFor(hook sdk.Hook) *SteadyCache {
	d.mu.Lock()
	defer d.mu.Unlock()
	if hook != sdk.PostUp {
		return nil
	}
	return d.steady
}

// steadyEntryFor returns where n's result of call is recorded in sc, or
// nil when it cannot be (no cache for the hook, an unknown binary).
func (d *Dispatcher) steadyEntryFor(sc *SteadyCache, n string, call sdk.HookCall) *steadyRef {
	if sc == nil {
		return nil
	}
	key, file, ok := steadyKeyOf(d.entries[n].p, d.opts.HostVersion, call)
	if !ok {
		return nil
	}
	return &steadyRef{sc: sc, key: key, file: file}
}

// replaySteady publishes and returns n's recorded result when it still
// holds (see SteadyCache), nil otherwise.
func (d *Dispatcher) replaySteady(ctx context.Context, ref *steadyRef, n string, progress func(string)) *sdk.Result {
	e, why := ref.sc.lookup(ctx, ref.key, ref.file)
	if e == nil {
		if why != "" {
			d.opts.Logger.Debug("plugin runs: its last result no longer holds", "plugin", n, "hook", ref.key.Hook, "why", why)
		}
		return nil
	}
	res := e.result()
	d.mu.Lock()
	d.addOutputs(n, res.Outputs)
	d.mu.Unlock()
	d.opts.Logger.Debug("plugin not started: nothing changed since its last run", "plugin", n, "hook", ref.key.Hook, "recorded", e.Recorded.Format(time.RFC3339))
	if progress != nil {
		progress(unchangedSince(e) + "; not started")
	}
	return res
}

// unchangedSince is how a replayed result is reported.
func unchangedSince(e *steadyEntry) string {
	return fmt.Sprintf("unchanged since %s (%d container(s) running as left)", e.Recorded.Local().Format("2006-01-02 15:04:05"), len(e.Containers))
}

// HookPlan is what RunHook would do with one plugin's hook now.
type HookPlan struct {
	Plugin string `json:"plugin"`
	// Replay: its recorded result still holds, so RunHook would reuse it
	// without starting the plugin (see SkipSteady).
	Replay bool `json:"replay"`
	// Detail says since when it holds (Replay), or why the hook runs.
	Detail string `json:"detail,omitempty"`
}

// PlanHook says, for every plugin that implements hook, whether RunHook
// would replay its recorded result or run it (`up --dry-run`). It starts
// no plugin whose description is known and changes nothing: records are
// read, not marked used. A plugin whose dependency runs is planned to run
// (that dependency's fresh outputs are among its inputs).
func (d *Dispatcher) PlanHook(ctx context.Context, hook sdk.Hook, base sdk.HookCall) ([]HookPlan, error) {
	descs, participants, wait, err := d.participants(ctx, hook, nil)
	if err != nil {
		return nil, err
	}
	sc := d.steadyFor(hook)
	d.mu.Lock()
	outputs := make(map[string]map[string]string, len(d.outputs))
	for n, o := range d.outputs {
		outputs[n] = maps.Clone(o)
	}
	d.mu.Unlock()

	plans := map[string]HookPlan{}
	planOf := func(n string) HookPlan {
		for _, q := range wait[n] {
			if !plans[q].Replay {
				return HookPlan{Plugin: n, Detail: "its dependency " + q + " runs first"}
			}
		}
		if sc == nil {
			return HookPlan{Plugin: n, Detail: "hooks always run"}
		}
		if sc.Refresh {
			return HookPlan{Plugin: n, Detail: "--reconcile runs every hook"}
		}
		call := d.hookCall(n, hook, base, descs[n], outputs)
		key, file, ok := steadyKeyOf(d.entries[n].p, d.opts.HostVersion, call)
		if !ok {
			return HookPlan{Plugin: n, Detail: "its result cannot be recorded (no known binary digest)"}
		}
		e, why := sc.peek(ctx, key, file)
		if e == nil {
			if why == "" {
				why = "no recorded result for these inputs (first run, or its config, environment, binary or dependencies' outputs changed)"
			}
			return HookPlan{Plugin: n, Detail: why}
		}
		if len(e.Outputs) > 0 {
			if outputs[n] == nil {
				outputs[n] = map[string]string{}
			}
			maps.Copy(outputs[n], e.Outputs)
		}
		return HookPlan{Plugin: n, Replay: true, Detail: unchangedSince(e)}
	}
	// Dependencies first: participants in an order where each follows
	// what it waits for (the graph was checked: no cycle).
	out := make([]HookPlan, 0, len(participants))
	for len(out) < len(participants) {
		progressed := false
		for _, n := range participants {
			if _, done := plans[n]; done {
				continue
			}
			ready := true
			for _, q := range wait[n] {
				if _, done := plans[q]; !done {
					ready = false
				}
			}
			if !ready {
				continue
			}
			plans[n] = planOf(n)
			out = append(out, plans[n])
			progressed = true
		}
		if !progressed {
			return nil, fmt.Errorf("plugins %v wait for each other", participants)
		}
	}
	return out, nil
}

// recordSteady records n's result (or, when res is nil, forgets it).
func (d *Dispatcher) recordSteady(ref *steadyRef, n string, res *sdk.Result) {
	if err := ref.sc.record(ref.key, ref.file, res); err != nil {
		d.opts.Logger.Debug("plugin result not recorded", "plugin", n, "hook", ref.key.Hook, "err", err.Error())
	}
}

// instance returns the plugin's running instance, starting it if needed.
// A start failure is remembered (a cancelled start is retried).
func (d *Dispatcher) instance(ctx context.Context, name string) (*Instance, error) {
	e := d.entries[name]
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inst != nil || e.err != nil {
		return e.inst, e.err
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("plugin %s: the dispatcher is closed", name)
	}
	inst, err := Start(ctx, e.p.Spec, d.opts)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) && pe.Kind == KindCancelled {
			return nil, err
		}
		e.err = err
		return nil, err
	}
	e.inst = inst
	return inst, nil
}

// Describe returns every plugin's description: the cached one when
// given, else from the plugin (started, concurrently).
func (d *Dispatcher) Describe(ctx context.Context) (map[string]*sdk.Description, error) {
	if d.err != nil {
		return nil, d.err
	}
	out := map[string]*sdk.Description{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range d.names {
		if desc := d.entries[n].p.Description; desc != nil {
			mu.Lock()
			out[n] = desc
			mu.Unlock()
			continue
		}
		if b := d.entries[n].p.Builtin; b != nil {
			desc, err := sdk.Describe(b)
			mu.Lock()
			if err != nil {
				errs = append(errs, &Error{Plugin: n, Hook: "Describe", Kind: KindStart, Cause: err.Error(), Err: err})
			} else {
				out[n] = desc
			}
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var desc *sdk.Description
			inst, err := d.instance(ctx, n)
			if err == nil {
				desc, err = inst.Describe(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[n] = desc
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(d.sorted(errs)...)
	}
	return out, nil
}

// describeAndCheck returns the descriptions after checking the dependency
// graph.
func (d *Dispatcher) describeAndCheck(ctx context.Context) (map[string]*sdk.Description, error) {
	descs, err := d.Describe(ctx)
	if err != nil {
		return nil, err
	}
	if errs := checkGraph(d.names, descs); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return descs, nil
}

// Validate checks, before anything changes: the dependency graph (a
// missing required dependency, a version mismatch or a cycle is an error,
// found without starting any plugin whose description is cached), then
// every plugin's config, concurrently, by the plugin itself: in-process
// for a Builtin, from the ValidateCache (see CacheValidation) for an
// installed plugin that answered for this binary and config before, else
// by starting it (and recording its answer). All problems are returned
// together (errors.Join of *DependencyError, *ConfigError and *Error);
// config warnings are logged.
func (d *Dispatcher) Validate(ctx context.Context) error {
	if _, err := d.describeAndCheck(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range d.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			diags, err := d.validateConfig(ctx, n)
			cleanDiagnostics(diags)
			var problems []sdk.Diagnostic
			for _, dg := range diags {
				if dg.Severity == sdk.SeverityWarning {
					d.opts.Logger.Warn("plugin config: "+dg.Summary, "plugin", n, "field", dg.Path)
					continue
				}
				problems = append(problems, dg)
			}
			if len(problems) > 0 {
				err = errors.Join(err, &ConfigError{Plugin: n, Diagnostics: problems})
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(d.sorted(errs)...)
}

// validateConfig returns what plugin n says of its config (see Validate).
func (d *Dispatcher) validateConfig(ctx context.Context, n string) ([]sdk.Diagnostic, error) {
	p := d.entries[n].p
	if p.Builtin != nil {
		return validateBuiltin(p)
	}
	d.mu.Lock()
	cache := d.vcache
	d.mu.Unlock()
	key, file, cacheable := validateKey(p, d.opts.HostVersion)
	cacheable = cacheable && cache != nil
	if cacheable {
		if diags, ok := cache.get(key, file); ok {
			d.opts.Logger.Debug("plugin config check: cached answer", "plugin", n)
			return diags, nil
		}
	}
	inst, err := d.instance(ctx, n)
	if err != nil {
		return nil, err
	}
	diags, err := inst.ValidateConfig(ctx, p.Config)
	inst.logs.endHook()
	if err == nil && cacheable {
		if err := cache.put(key, file, diags); err != nil {
			d.opts.Logger.Debug("plugin config check: not cached", "plugin", n, "err", err.Error())
		}
	}
	return diags, err
}

// validateBuiltin checks the config of a plugin compiled into marina,
// in-process; a failure is the *Error the same failure of the served
// plugin gives (a panic, with its stack in Detail).
func validateBuiltin(p Plugin) ([]sdk.Diagnostic, error) {
	const op = "ValidateConfig"
	if name := p.Builtin.Info().Name; name != p.Spec.Name {
		return nil, &Error{Plugin: p.Spec.Name, Version: p.Spec.Version, Hook: op, Kind: KindIdentity, Cause: fmt.Sprintf("the built-in implementation is plugin %q", name)}
	}
	diags, err := sdk.ValidateConfig(p.Builtin, p.Config)
	if err == nil {
		return diags, nil
	}
	e := &Error{Plugin: p.Spec.Name, Version: p.Spec.Version, Hook: op, Kind: KindHook, Cause: err.Error(), Err: err}
	if st, ok := status.FromError(err); ok {
		e.Cause = st.Message()
		if st.Code() == codes.Internal && strings.Contains(st.Message(), " panicked in ") {
			value := st.Message()
			if m := panicRE().FindStringSubmatch(value); m != nil {
				value = m[1]
			}
			value, e.Detail, _ = strings.Cut(value, "\n")
			e.Kind, e.Cause = KindPanic, "panicked: "+value
		}
	}
	return nil, e
}

// sorted orders errors by plugin in config order, for stable messages.
func (d *Dispatcher) sorted(errs []error) []error {
	rank := func(err error) int {
		var pe *Error
		var ce *ConfigError
		name := ""
		switch {
		case errors.As(err, &pe):
			name = pe.Plugin
		case errors.As(err, &ce):
			name = ce.Plugin
		}
		for i, n := range d.names {
			if n == name {
				return i
			}
		}
		return len(d.names)
	}
	out := append([]error(nil), errs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank(out[j]) < rank(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// RunHook runs hook on every plugin that implements it. The dependency
// graph is checked first (nothing runs if it is broken). A plugin runs
// after the plugins it depends on (transitively, among those running this
// hook); plugins with no dependency relation run concurrently, and are
// started in parallel as soon as RunHook begins. Each plugin gets base
// with its own config, and in Deps the outputs its direct dependencies
// published so far (in this or earlier hooks of this Dispatcher).
//
// On the first failure the other calls are cancelled, plugins not yet
// started are not run, and the error lists every plugin that failed
// (errors.Join of *Error); plugins cancelled only because another failed
// are not listed. The results of the plugins that succeeded are returned
// either way, with the outputs marina accepted (see publish). onProgress
// (may be nil) is called concurrently, with the plugin's message cleaned of
// terminal control sequences.
func (d *Dispatcher) RunHook(ctx context.Context, hook sdk.Hook, base sdk.HookCall, onProgress func(plugin, msg string)) (map[string]*sdk.Result, error) {
	return d.RunHookExcept(ctx, hook, base, nil, onProgress)
}

// RunHookExcept is RunHook without the plugins named in exclude (a cluster
// created with some plugins switched off). Plugins that depend on an
// excluded one still run, with the outputs it published earlier, if any.
func (d *Dispatcher) RunHookExcept(ctx context.Context, hook sdk.Hook, base sdk.HookCall, exclude []string, onProgress func(plugin, msg string)) (map[string]*sdk.Result, error) {
	descs, participants, wait, err := d.participants(ctx, hook, exclude)
	if err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := map[string]chan struct{}{}
	for _, n := range participants {
		done[n] = make(chan struct{})
	}
	var (
		mu      sync.Mutex
		results = map[string]*sdk.Result{}
		failed  = map[string]bool{}
		errs    []error
	)
	record := func(n string, inst *Instance, err error) {
		var pe *Error
		cancelled := errors.As(err, &pe) && pe.Kind == KindCancelled
		if cancelled && inst != nil {
			d.retire(n, inst)
		}
		mu.Lock()
		defer mu.Unlock()
		failed[n] = true
		// A plugin cancelled because another one failed is not a failure
		// of its own; one cancelled by the caller is.
		if cancelled && runCtx.Err() != nil && ctx.Err() == nil {
			return
		}
		errs = append(errs, err)
		cancel()
	}
	var wg sync.WaitGroup
	for _, n := range participants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[n])
			// start starts the plugin (or returns its running instance);
			// false when it cannot run (recorded).
			var inst *Instance
			start := func() bool {
				var err error
				if inst, err = d.instance(runCtx, n); err != nil {
					record(n, nil, err)
					return false
				}
				if f := inst.failure(); f != nil {
					record(n, inst, f) // failed in an earlier hook: never called again
					return false
				}
				return true
			}
			// A plugin that may be skipped (it has a recorded result) starts
			// only once its inputs are known; the others start at once.
			sc := d.steadyFor(hook)
			if (sc == nil || !sc.hasEntries(n)) && !start() {
				return
			}
			for _, q := range wait[n] {
				select {
				case <-done[q]:
				case <-runCtx.Done():
				}
			}
			mu.Lock()
			skip := runCtx.Err() != nil
			for _, q := range wait[n] {
				skip = skip || failed[q]
			}
			mu.Unlock()
			if skip {
				return
			}
			d.mu.Lock()
			call := d.hookCall(n, hook, base, descs[n], d.outputs)
			d.mu.Unlock()
			if d.opts.StateRoot != "" {
				if err := os.MkdirAll(call.Env.StateDir, 0o700); err != nil {
					record(n, inst, &Error{Plugin: n, Hook: string(hook), Kind: KindHook, Cause: "cannot create its state directory: " + err.Error()})
					return
				}
			}
			var progress func(string)
			if onProgress != nil {
				progress = func(msg string) { onProgress(n, termsafe.Excerpt(termsafe.Line(msg), maxProgress)) }
			}
			ref := d.steadyEntryFor(sc, n, call)
			if ref != nil && inst == nil {
				if res := d.replaySteady(runCtx, ref, n, progress); res != nil {
					mu.Lock()
					results[n] = res
					mu.Unlock()
					return
				}
			}
			if inst == nil && !start() {
				return
			}
			res, err := inst.RunHook(runCtx, call, d.entries[n].p.Timeout, progress)
			inst.logs.endHook()
			if err != nil {
				if ref != nil {
					d.recordSteady(ref, n, nil)
				}
				record(n, inst, err)
				return
			}
			if err := d.publish(n, inst, hook, res); err != nil {
				if ref != nil {
					d.recordSteady(ref, n, nil)
				}
				record(n, inst, err)
				return
			}
			if ref != nil {
				d.recordSteady(ref, n, res)
			}
			mu.Lock()
			results[n] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results, errors.Join(d.sorted(errs)...)
}

// participants describes the plugins (checking the set) and returns those
// that implement hook, but the excluded ones, with what each waits for.
func (d *Dispatcher) participants(ctx context.Context, hook sdk.Hook, exclude []string) (descs map[string]*sdk.Description, names []string, wait map[string][]string, err error) {
	if d.err != nil {
		return nil, nil, nil, d.err
	}
	if descs, err = d.describeAndCheck(ctx); err != nil {
		return nil, nil, nil, err
	}
	for _, n := range d.names {
		if descs[n].Has(hook) && !slices.Contains(exclude, n) {
			names = append(names, n)
		}
	}
	return descs, names, predecessors(names, descs), nil
}

// retire forgets a plugin instance that was stopped by a cancellation:
// cancellation is not the plugin's fault, so a later hook (a cleanup hook
// after a failed step, say) starts it afresh. A plugin that crashed, hung
// or panicked stays failed for the life of the Dispatcher.
func (d *Dispatcher) retire(n string, inst *Instance) {
	e := d.entries[n]
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inst == inst {
		e.inst = nil
	}
}

// hookCall is the call of n's hook: base with the hook, n's config, its
// state directory (StateRoot/n, when set) and copies of the outputs its
// direct dependencies have in outputs (published so far, or, planning,
// replayed), without what the capabilities desc does not declare unlock
// (sdk.HookCall.Granted). RunHook and PlanHook build it alike: it is what a recorded
// result is keyed by. The caller guards outputs.
func (d *Dispatcher) hookCall(n string, hook sdk.Hook, base sdk.HookCall, desc *sdk.Description, outputs map[string]map[string]string) sdk.HookCall {
	call := base
	call.Hook = hook
	call.ConfigJSON = d.entries[n].p.Config
	if d.opts.StateRoot != "" {
		call.Env.StateDir = filepath.Join(d.opts.StateRoot, n)
	}
	call.Deps = map[string]map[string]string{}
	for _, dep := range desc.Dependencies {
		if o, ok := outputs[dep.Name]; ok {
			call.Deps[dep.Name] = maps.Clone(o)
		}
	}
	// Least privilege: what a capability unlocks reaches only a plugin
	// that declares it.
	return call.Granted(desc)
}

// maxProgress caps a plugin's progress message.
const maxProgress = 500

// publish records the outputs of n's hook result res (a later hook's value
// for a key replaces the earlier one), after checking them: outputs the
// plugin's description does not declare are dropped with a warning, and
// outputs over the limits (MaxOutputValue, MaxOutputKeys,
// MaxOutputsTotal) fail the hook with a KindOutput *Error, publishing
// nothing; a host change whose capability the plugin does not declare
// fails it with a KindCapability *Error, publishing and applying nothing. res is changed in place: Outputs keeps only what was published,
// and the text of Warnings and of HostChanges' Reason (shown before a
// privileged command) is cleaned of terminal control sequences.
func (d *Dispatcher) publish(n string, inst *Instance, hook sdk.Hook, res *sdk.Result) error {
	cleanDiagnostics(res.Warnings)
	for i := range res.HostChanges {
		res.HostChanges[i].Reason = termsafe.Excerpt(termsafe.Line(res.HostChanges[i].Reason), maxCause)
	}
	// The running plugin's own description declares its outputs and
	// capabilities (a cached one may be older).
	desc, err := inst.Describe(context.Background())
	if err != nil {
		return err
	}
	if bad := res.UndeclaredChanges(desc); len(bad) > 0 {
		res.HostChanges, res.Outputs = nil, nil
		return inst.newError(string(hook), KindCapability, "asked for what it does not declare, so none of its host changes is applied: "+strings.Join(bad, "; ")+
			"; the plugin's author must declare the capability (users are asked to grant it when they install or upgrade the plugin)", nil)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	accepted, dropped, cause := checkOutputs(desc, d.outputs[n], res.Outputs)
	if cause != "" {
		res.Outputs = nil
		return inst.newError(string(hook), KindOutput, cause, nil)
	}
	if len(dropped) > 0 {
		d.opts.Logger.Warn(droppedOutputsWarning(desc, dropped), "plugin", n, "hook", string(hook))
	}
	res.Outputs = accepted
	d.addOutputs(n, accepted)
	return nil
}

// addOutputs publishes outputs of n for its dependents. d.mu is held.
func (d *Dispatcher) addOutputs(n string, outputs map[string]string) {
	if len(outputs) == 0 {
		return
	}
	if d.outputs[n] == nil {
		d.outputs[n] = map[string]string{}
	}
	for k, v := range outputs {
		d.outputs[n][k] = v
	}
}

// Outputs returns a copy of every output published so far, by plugin.
func (d *Dispatcher) Outputs() map[string]map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]map[string]string{}
	for n, o := range d.outputs {
		cp := make(map[string]string, len(o))
		for k, v := range o {
			cp[k] = v
		}
		out[n] = cp
	}
	return out
}

// Close stops every started plugin, concurrently, and waits for them (see
// Instance.Close). Plugins are not started again afterwards.
func (d *Dispatcher) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range d.names {
		e := d.entries[n]
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.mu.Lock()
			inst := e.inst
			e.mu.Unlock()
			if inst == nil {
				return
			}
			err := inst.Close()
			inst.logs.endHook() // stderr that came after the last hook
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(d.sorted(errs)...)
}
