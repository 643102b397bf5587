package plugin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
)

// steadyRun runs PostUp once with a new dispatcher (a new marina process)
// over plugins with cache, returning the results, the plugins started
// (from the touch file's new "NAME started" lines) and the progress lines.
func steadyRun(t *testing.T, plugins []Plugin, cache *SteadyCache, touch string) (map[string]*sdk.Result, []string, []string, error) {
	t.Helper()
	before := len(touched(t, touch))
	d := NewDispatcher(plugins, testOpts())
	d.SkipSteady(cache)
	var mu sync.Mutex
	var progress []string
	res, err := d.RunHook(context.Background(), sdk.PostUp, sdk.HookCall{Env: sdk.Env{NetworkName: "kind"}}, func(p, m string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, p+": "+m)
	})
	if cerr := d.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	var started []string
	for _, l := range touched(t, touch)[before:] {
		if n, ok := strings.CutSuffix(l, " started"); ok {
			started = append(started, n)
		}
	}
	return res, started, progress, err
}

// TestSteadySkip: a PostUp that returned Steady is not started again while
// its inputs are the same and its containers hold; its recorded result
// (outputs, which its dependents get) is replayed. Anything else runs it:
// a container that no longer holds, a changed config or dependency output,
// another binary, --reconcile (Refresh), no Steady, a failed hook.
func TestSteadySkip(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	dir := t.TempDir()
	touch := filepath.Join(dir, "touch")
	failFlag := filepath.Join(dir, "fail-a")
	var mu sync.Mutex
	broken := "" // what the check reports for container c1
	checks := 0
	cache := &SteadyCache{Dir: filepath.Join(dir, "steady"), Check: func(_ context.Context, cs []sdk.SteadyContainer) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		checks++
		for _, c := range cs {
			if c.ID == "c1" && c.Spec == "s1" && broken != "" {
				return broken, nil
			}
		}
		return "", nil
	}}
	cfgA := `{"mode":"ok","touch":"` + touch + `","failIfExists":"` + failFlag + `","steady":{"containers":[{"id":"c1","spec":"s1"}]}}`
	cfgB := `{"mode":"ok","touch":"` + touch + `","steady":{}}`
	cfgC := `{"mode":"ok","touch":"` + touch + `"}` // no Steady: runs every time
	a := Plugin{Spec: tp("a", marker, "-touch", touch, "-hooks", "PostUp"), Config: []byte(cfgA)}
	a.Spec.SHA256 = fileSHA256(t, testPluginBin)
	b := Plugin{Spec: tp("b", marker, "-touch", touch, "-hooks", "PostUp", "-deps", "a"), Config: []byte(cfgB)}
	b.Spec.SHA256 = a.Spec.SHA256
	c := Plugin{Spec: tp("c", marker, "-touch", touch, "-hooks", "PostUp"), Config: []byte(cfgC)}
	c.Spec.SHA256 = a.Spec.SHA256
	// Descriptions recorded at install: describing starts nothing.
	for _, p := range []*Plugin{&a, &b, &c} {
		p.Description = describeOnce(t, p.Spec)
	}
	plugins := []Plugin{a, b, c}

	want := func(step string, got, wantStarted []string) {
		t.Helper()
		if strings.Join(slices.Sorted(slices.Values(got)), ",") != strings.Join(wantStarted, ",") {
			t.Errorf("%s: started %q, want %q", step, got, wantStarted)
		}
	}

	res1, started, _, err := steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("first run", started, []string{"a", "b", "c"})
	if n := len(cacheEntries(t, cache.Dir, "a")) + len(cacheEntries(t, cache.Dir, "b")); n != 2 {
		t.Errorf("%d entries for a and b, want 2", n)
	}
	if n := len(cacheEntries(t, cache.Dir, "c")); n != 0 {
		t.Errorf("%d entries for c, which returned no Steady", n)
	}

	// Unchanged: a and b replayed (b's inputs include a's replayed
	// outputs), c runs.
	res2, started, progress, err := steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("unchanged", started, []string{"c"})
	for _, n := range []string{"a", "b"} {
		if res2[n] == nil || res2[n].Outputs["chain"] != res1[n].Outputs["chain"] || res2[n].Outputs["start"] != res1[n].Outputs["start"] {
			t.Errorf("%s: replayed outputs %v, want the recorded %v", n, res2[n], res1[n])
		}
	}
	if !hasPrefix(progress, "a: unchanged since ") || !hasPrefix(progress, "b: unchanged since ") {
		t.Errorf("progress = %q, want a and b to say they were not started", progress)
	}

	// --reconcile (Refresh): every hook runs.
	refresh := *cache
	refresh.Refresh = true
	_, started, _, err = steadyRun(t, plugins, &refresh, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("refresh", started, []string{"a", "b", "c"})

	// a's container no longer holds: a runs, publishes new outputs
	// ("start" changes), so b's inputs change and b runs too.
	mu.Lock()
	broken = "container c1 is gone"
	mu.Unlock()
	_, started, _, err = steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("container gone", started, []string{"a", "b", "c"})
	mu.Lock()
	broken = ""
	mu.Unlock()
	_, started, _, err = steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("holds again", started, []string{"c"})

	// b's config changes: only b runs.
	b2 := b
	b2.Config = []byte(`{"mode":"ok","touch":"` + touch + `","replicas":1,"steady":{}}`)
	_, started, _, err = steadyRun(t, []Plugin{a, b2, c}, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("b's config changed", started, []string{"b", "c"})

	// Another binary digest for a (an upgrade): a runs, and b after it.
	a2 := a
	a2.Spec.SHA256 = strings.Repeat("0", 64)
	// (The launch checks the file against the digest, so the upgrade is
	// modelled by the key alone: a's lookup must miss, a start is then
	// refused — which also shows the miss.)
	if _, _, _, err = steadyRun(t, []Plugin{a2, b, c}, cache, touch); err == nil {
		t.Error("a with another digest was replayed; want a missed lookup (and a refused start)")
	}

	// A failed hook forgets its record: after it, a runs even though the
	// container holds.
	if err := os.WriteFile(failFlag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	broken = "container c1 is restarting"
	mu.Unlock()
	if _, _, _, err = steadyRun(t, plugins, cache, touch); err == nil {
		t.Fatal("a's PostUp did not fail")
	}
	mu.Lock()
	broken = ""
	mu.Unlock()
	if err := os.Remove(failFlag); err != nil {
		t.Fatal(err)
	}
	_, started, _, err = steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("after a failure", started, []string{"a", "b", "c"})

	// A corrupt record is a miss, and is rewritten.
	for _, e := range cacheEntries(t, cache.Dir, "a") {
		if err := os.WriteFile(e, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, started, _, err = steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("corrupt record", started, []string{"a", "b", "c"})
	_, started, _, err = steadyRun(t, plugins, cache, touch)
	if err != nil {
		t.Fatal(err)
	}
	want("rewritten record", started, []string{"c"})
	mu.Lock()
	if checks == 0 {
		t.Error("the container check never ran")
	}
	mu.Unlock()

	// Other hooks are never skipped.
	d := NewDispatcher(plugins, testOpts())
	d.SkipSteady(cache)
	if d.steadyFor(sdk.PostCluster) != nil || d.steadyFor(sdk.PostUp) == nil {
		t.Error("the cache applies to PostUp only")
	}
	_ = d.Close()
	assertNoProcesses(t, marker)
}

func hasPrefix(lines []string, p string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// TestPlanHook: `up --dry-run`'s prediction, from the same records and
// container checks as RunHook, starting no plugin and marking no record
// used: a and b (b depends on a) reused while they hold, c (no Steady)
// runs; a's container gone makes a run and b with it (a's fresh outputs
// are b's inputs); Refresh runs all.
func TestPlanHook(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	dir := t.TempDir()
	touch := filepath.Join(dir, "touch")
	var mu sync.Mutex
	broken := ""
	cache := &SteadyCache{Dir: filepath.Join(dir, "steady"), Check: func(_ context.Context, cs []sdk.SteadyContainer) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			if c.ID == "c1" && broken != "" {
				return broken, nil
			}
		}
		return "", nil
	}}
	cfgA := `{"mode":"ok","touch":"` + touch + `","steady":{"containers":[{"id":"c1","spec":"s1"}]}}`
	cfgB := `{"mode":"ok","touch":"` + touch + `","steady":{}}`
	cfgC := `{"mode":"ok","touch":"` + touch + `"}`
	sum := fileSHA256(t, testPluginBin)
	a := Plugin{Spec: tp("a", marker, "-touch", touch, "-hooks", "PostUp"), Config: []byte(cfgA)}
	b := Plugin{Spec: tp("b", marker, "-touch", touch, "-hooks", "PostUp", "-deps", "a"), Config: []byte(cfgB)}
	c := Plugin{Spec: tp("c", marker, "-touch", touch, "-hooks", "PostUp"), Config: []byte(cfgC)}
	for _, p := range []*Plugin{&a, &b, &c} {
		p.Spec.SHA256 = sum
		p.Description = describeOnce(t, p.Spec)
	}
	plugins := []Plugin{c, b, a} // the plan follows dependencies, not this order
	if _, _, _, err := steadyRun(t, plugins, cache, touch); err != nil {
		t.Fatal(err)
	}

	plan := func(sc *SteadyCache) map[string]HookPlan {
		t.Helper()
		before := len(touched(t, touch))
		mtimes := map[string]time.Time{}
		for _, n := range []string{"a", "b"} {
			for _, f := range cacheEntries(t, cache.Dir, n) {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				mtimes[f] = fi.ModTime()
			}
		}
		d := NewDispatcher(plugins, testOpts())
		d.SkipSteady(sc)
		plans, err := d.PlanHook(context.Background(), sdk.PostUp, sdk.HookCall{Env: sdk.Env{NetworkName: "kind"}})
		if cerr := d.Close(); cerr != nil {
			t.Errorf("Close: %v", cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if started := touched(t, touch)[before:]; len(started) != 0 {
			t.Errorf("PlanHook started plugins: %q", started)
		}
		for f, m := range mtimes {
			if fi, err := os.Stat(f); err != nil || !fi.ModTime().Equal(m) {
				t.Errorf("PlanHook touched the record %s", f)
			}
		}
		var order []string
		got := map[string]HookPlan{}
		for _, p := range plans {
			order = append(order, p.Plugin)
			got[p.Plugin] = p
		}
		if ia, ib := slices.Index(order, "a"), slices.Index(order, "b"); ia < 0 || ib < ia || len(order) != 3 {
			t.Errorf("plan order %q: want a before b, and c", order)
		}
		return got
	}

	got := plan(cache)
	if !got["a"].Replay || !got["b"].Replay || got["c"].Replay {
		t.Errorf("unchanged lab: plan %+v, want a and b reused, c run", got)
	}
	if !strings.HasPrefix(got["a"].Detail, "unchanged since ") || !strings.Contains(got["c"].Detail, "no recorded result") {
		t.Errorf("details: %+v", got)
	}

	mu.Lock()
	broken = "container c1 is not running"
	mu.Unlock()
	got = plan(cache)
	if got["a"].Replay || got["a"].Detail != "container c1 is not running" || got["b"].Replay || got["b"].Detail != "its dependency a runs first" {
		t.Errorf("a's container gone: plan %+v, want a run for it and b after it", got)
	}
	mu.Lock()
	broken = ""
	mu.Unlock()

	refresh := *cache
	refresh.Refresh = true
	for n, p := range plan(&refresh) {
		if p.Replay || (n == "a" && p.Detail != "--reconcile runs every hook") {
			t.Errorf("Refresh: %s planned %+v, want it run", n, p)
		}
	}
}
