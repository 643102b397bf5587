package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
)

// fileSHA256 returns the hex sha256 of the file at path.
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// describeOnce returns what the plugin of spec says of itself (as the
// store records it at install).
func describeOnce(t *testing.T, spec Spec) *sdk.Description {
	t.Helper()
	inst, err := Start(context.Background(), spec, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	d, err := inst.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// cacheEntries returns the entry files of plugin under dir.
func cacheEntries(t *testing.T, dir, plugin string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, plugin, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// validateWith runs Validate for p alone with cache, returning the
// diagnostics of the ConfigError (if any) and any other error.
func validateWith(t *testing.T, p Plugin, cache *ValidateCache, opts Options) ([]sdk.Diagnostic, error) {
	t.Helper()
	d := NewDispatcher([]Plugin{p}, opts)
	d.CacheValidation(cache)
	defer d.Close()
	err := d.Validate(context.Background())
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Diagnostics, nil
	}
	return nil, err
}

// TestValidateCache: an installed plugin (recorded digest) is started to
// check a config only the first time that binary sees that config; a
// corrupt, mismatched, unreadable or misplaced entry is a miss and is
// rewritten; another config, binary or host version is a miss; failures
// are not cached; the entries per plugin are bounded.
func TestValidateCache(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	touch := filepath.Join(t.TempDir(), "touch")
	bin := testPluginBin
	sum := fileSHA256(t, bin)
	spec := tp("cachy", marker, "-touch", touch)
	spec.Path, spec.SHA256 = bin, sum
	desc := describeOnce(t, tp("cachy", marker))
	dir := t.TempDir()
	cache := &ValidateCache{Dir: dir, MaxPerPlugin: 3}
	opts := testOpts()
	starts := func() int { return len(touched(t, touch)) }
	check := func(what, cfg string, wantStarts int, wantDiag string) {
		t.Helper()
		diags, err := validateWith(t, Plugin{Spec: spec, Config: []byte(cfg), Description: desc}, cache, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := ""
		if len(diags) > 0 {
			got = diags[0].Path + ": " + diags[0].Summary
		}
		if len(diags) > 1 || got != wantDiag {
			t.Errorf("%s: diagnostics %+v, want %q", what, diags, wantDiag)
		}
		if n := starts(); n != wantStarts {
			t.Errorf("%s: %d plugin starts in all, want %d", what, n, wantStarts)
		}
	}
	const bad = "replicas: must be 0 or more, got -1"

	check("first check of a good config", `{"replicas":1}`, 1, "")
	check("same config again", `{"replicas":1}`, 1, "")
	check("another config", `{"replicas":-1}`, 2, bad)
	check("that config again: the diagnostics come from the cache", `{"replicas":-1}`, 2, bad)
	check("the first config again", `{"replicas":1}`, 2, "")
	check("the same config in other bytes is another key", `{"replicas": 1}`, 3, "")

	entries := cacheEntries(t, dir, "cachy")
	if len(entries) != 3 {
		t.Fatalf("entries = %v, want 3", entries)
	}
	entryOf := func(cfg string) string {
		key, file, ok := validateKey(Plugin{Spec: spec, Config: []byte(cfg), Description: desc}, opts.HostVersion)
		if !ok {
			t.Fatalf("no key for %s", cfg)
		}
		return filepath.Join(dir, key.Plugin, file)
	}
	good, badEntry := entryOf(`{"replicas":1}`), entryOf(`{"replicas":-1}`)

	// Tampering: garbage, another key's answer, a directory, an unreadable file.
	if err := os.WriteFile(badEntry, []byte(`{"format":1,"diagnostics":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	check("a truncated entry is a miss", `{"replicas":-1}`, 4, bad)
	check("and was rewritten", `{"replicas":-1}`, 4, bad)
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badEntry, goodBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	check("another config's answer under this key is a miss", `{"replicas":-1}`, 5, bad)
	forged := strings.Replace(string(goodBytes), `"diagnostics":null`, `"diagnostics":[{"severity":"fatal","summary":"x"}]`, 1)
	if forged == string(goodBytes) {
		t.Fatalf("entry format changed: %s", goodBytes)
	}
	if err := os.WriteFile(good, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	check("an entry with an unknown severity is a miss", `{"replicas":1}`, 6, "")
	if err := os.Remove(good); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(good, 0o700); err != nil {
		t.Fatal(err)
	}
	check("a directory in place of the entry is a miss", `{"replicas":1}`, 7, "")
	check("and was replaced by the entry", `{"replicas":1}`, 7, "")
	if os.Geteuid() != 0 {
		if err := os.Chmod(good, 0); err != nil {
			t.Fatal(err)
		}
		check("an unreadable entry is a miss", `{"replicas":1}`, 8, "")
		check("and was rewritten readable", `{"replicas":1}`, 8, "")
	}
	n := starts()

	// Another host version or binary is another key.
	other := opts
	other.HostVersion = "test-2"
	if _, err := validateWith(t, Plugin{Spec: spec, Config: []byte(`{"replicas":1}`), Description: desc}, cache, other); err != nil {
		t.Fatal(err)
	}
	if got := starts(); got != n+1 {
		t.Errorf("another host version: %d starts, want %d", got, n+1)
	}
	copyBin := filepath.Join(t.TempDir(), "testplugin")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyBin, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	rebuilt := spec
	rebuilt.Path, rebuilt.SHA256 = copyBin, fileSHA256(t, copyBin)
	if _, err := validateWith(t, Plugin{Spec: rebuilt, Config: []byte(`{"replicas":1}`), Description: desc}, cache, opts); err != nil {
		t.Fatal(err)
	}
	if got := starts(); got != n+2 {
		t.Errorf("another binary: %d starts, want %d", got, n+2)
	}

	// Bounded: the least recently used entries go.
	if got := cacheEntries(t, dir, "cachy"); len(got) != 3 {
		t.Errorf("entries = %d, want the bound 3", len(got))
	}
	check("the most recently used entry survived", `{"replicas":1}`, n+2, "")

	// No digest, no cache: every check starts the plugin.
	plainTouch := filepath.Join(t.TempDir(), "touch")
	plain := tp("plain", marker, "-touch", plainTouch)
	for i := 0; i < 2; i++ {
		if _, err := validateWith(t, Plugin{Spec: plain, Config: []byte(`{}`)}, cache, opts); err != nil {
			t.Fatal(err)
		}
	}
	if got := touched(t, plainTouch); len(got) != 2 {
		t.Errorf("a plugin without a recorded digest: starts %q, want 2", got)
	}
	if entries := cacheEntries(t, dir, "plain"); len(entries) != 0 {
		t.Errorf("a plugin without a recorded digest was cached: %v", entries)
	}

	// A failure to answer is not cached.
	broken := tp("broken", marker, "-start", "exit")
	broken.Path, broken.SHA256 = bin, sum
	for i := 0; i < 2; i++ {
		if _, err := validateWith(t, Plugin{Spec: broken, Config: []byte(`{}`)}, cache, opts); err == nil {
			t.Fatal("a plugin that exits at start validated")
		}
	}
	if entries := cacheEntries(t, dir, "broken"); len(entries) != 0 {
		t.Errorf("a failed check was cached: %v", entries)
	}
	assertNoProcesses(t, marker)
}

// builtinConfig is the config of builtinPlugin.
type builtinConfig struct {
	Replicas int    `json:"replicas"`
	Mode     string `json:"mode"`
}

func (c *builtinConfig) Validate() []sdk.Diagnostic {
	if c.Mode == "panic" {
		panic("validate exploded")
	}
	if c.Replicas < 0 {
		return []sdk.Diagnostic{sdk.Errorf("replicas", "must be 0 or more, got %d", c.Replicas)}
	}
	return nil
}

// builtinPlugin stands for a plugin compiled into marina.
type builtinPlugin struct{ name string }

func (p builtinPlugin) Info() sdk.Info {
	return sdk.Info{Name: p.name, Version: "1.0.0", Config: &builtinConfig{}}
}
func (builtinPlugin) PostUp(context.Context, *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{}, nil
}

// TestValidateBuiltinInProcess: a built-in's config is checked in-process
// (its Spec points at nothing that could start), with did-you-mean and its
// own Validate, and a panic is a KindPanic *Error with the stack.
func TestValidateBuiltinInProcess(t *testing.T) {
	t.Parallel()
	nowhere := filepath.Join(t.TempDir(), "no-such-binary")
	builtin := func(cfg string) Plugin {
		return Plugin{Spec: Spec{Name: "inproc", Path: nowhere, Version: "1.0.0"}, Config: []byte(cfg), Builtin: builtinPlugin{"inproc"}}
	}
	d := NewDispatcher([]Plugin{builtin(`{"replicas":-1,"mdoe":"x"}`)}, testOpts())
	defer d.Close()
	descs, err := d.Describe(context.Background())
	if err != nil || descs["inproc"] == nil || descs["inproc"].Name != "inproc" {
		t.Fatalf("Describe = %v, %v", descs, err)
	}
	var ce *ConfigError
	if err := d.Validate(context.Background()); !errors.As(err, &ce) || len(ce.Diagnostics) != 1 || ce.Diagnostics[0].Summary != `unknown field "mdoe"; did you mean "mode"?` {
		t.Fatalf("Validate = %v", err)
	}
	for cfg, want := range map[string]string{`{"replicas":-1}`: "replicas: must be 0 or more, got -1", `{"replicas":2}`: ""} {
		diags, err := validateWith(t, builtin(cfg), nil, testOpts())
		got := ""
		if len(diags) > 0 {
			got = fmt.Sprintf("%s: %s", diags[0].Path, diags[0].Summary)
		}
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %q", cfg, diags, err, want)
		}
	}
	_, err = validateWith(t, builtin(`{"mode":"panic"}`), nil, testOpts())
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindPanic || pe.Cause != "panicked: validate exploded" || !strings.Contains(pe.Detail, "goroutine") {
		t.Errorf("panic: %#v", err)
	}
	wrong := builtin(`{}`)
	wrong.Builtin = builtinPlugin{"other"}
	if _, err := validateWith(t, wrong, nil, testOpts()); !errors.As(err, &pe) || pe.Kind != KindIdentity {
		t.Errorf("a built-in of another name: %v", err)
	}
}
