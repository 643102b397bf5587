package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/sdk"
)

// pluginStarts runs `marina --debug ARGS` with a private HOME and counts,
// per plugin, the plugin processes the run started, by two independent
// signs: marina's own debug line when it launched the process and waits
// for its handshake ("waiting for RPC address", go-plugin's client), and
// the line every served plugin writes on stderr when it listens ("plugin
// address", go-plugin's server), which marina copies to the run's log
// file as "[NAME] ...". The signs must agree.
func pluginStarts(t *testing.T, home string, args ...string) (result, map[string]int) {
	t.Helper()
	logs := filepath.Join(home, ".marina", "logs")
	if err := os.RemoveAll(logs); err != nil {
		t.Fatal(err)
	}
	r := marinaBounded(t, home, nil, append([]string{"--debug"}, args...)...)
	launched := map[string]int{}
	for _, m := range regexp.MustCompile(`msg="waiting for RPC address" plugin=([a-z0-9-]+)`).FindAllStringSubmatch(r.stderr, -1) {
		launched[m[1]]++
	}
	served := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\[([a-z0-9-]+)\] .*"plugin address"`).FindAllStringSubmatch(string(b), -1) {
			served[m[1]]++
		}
	}
	if fmt.Sprint(launched) != fmt.Sprint(served) {
		t.Fatalf("marina %v: launched %v but served %v\n%s", args, launched, served, r.stderr)
	}
	// What the user sees, without the debug lines.
	var kept []string
	for _, l := range strings.SplitAfter(r.stderr, "\n") {
		if !strings.Contains(l, "level=DEBUG") {
			kept = append(kept, l)
		}
	}
	r.stderr = strings.Join(kept, "")
	return r, launched
}

// TestValidateDefaultConfigStartsNoPlugin (issue 14): `config validate` of
// the default config checks the five built-ins' config in-process: no
// plugin process starts; a typo in a built-in's config is still reported
// with did-you-mean at its file line, still without a start.
func TestValidateDefaultConfigStartsNoPlugin(t *testing.T) {
	home := t.TempDir()
	r, starts := pluginStarts(t, home, "config", "validate")
	if r.code != 0 || !strings.Contains(r.stdout, "defaults are valid") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if len(starts) != 0 {
		t.Errorf("config validate of the default config started plugins: %v", starts)
	}
	if r := marina(t, home, nil, "plugin", "list", "-o", "json"); !strings.Contains(r.stdout, `"metallb"`) || !strings.Contains(r.stdout, `"active"`) {
		t.Fatalf("the built-ins are not enabled by default, so nothing was checked:\n%s", r.stdout)
	}

	path := writeConfigFile(t, home, "plugins:\n  coredns:\n    enabled: true\n    config:\n      cahce: 30\n")
	r, starts = pluginStarts(t, home, "config", "validate")
	if r.code != 2 || !strings.Contains(r.stderr, `plugins.coredns.config.cahce: unknown field "cahce"; did you mean "cache"? (plugin coredns) (`+path+":5:") {
		t.Fatalf("typo in coredns's config: exit %d\n%s", r.code, r.stderr)
	}
	if len(starts) != 0 {
		t.Errorf("a typo in a built-in's config started plugins: %v", starts)
	}
}

// TestValidateCachesInstalledPlugin (issue 14): an installed plugin is
// started to check its config the first time only; a changed config starts
// it again; a tampered cache entry is ignored (the plugin is asked again)
// and the answer is the same every time.
func TestValidateCachesInstalledPlugin(t *testing.T) {
	home := t.TempDir()
	install(t, home, testPlugin(t, "acme", "1.0.0"))
	writeConfigFile(t, home, "plugins:\n  acme:\n    enabled: true\n")
	step := func(what string, wantCode, wantStarts int) result {
		t.Helper()
		r, starts := pluginStarts(t, home, "config", "validate")
		if r.code != wantCode {
			t.Fatalf("%s: exit %d, want %d\n%s", what, r.code, wantCode, r.stderr)
		}
		if starts["acme"] != wantStarts || len(starts) > wantStarts {
			t.Errorf("%s: starts %v, want acme %d and no other", what, starts, wantStarts)
		}
		return r
	}
	step("first check", 0, 1)
	step("same binary, same config", 0, 0)

	// acme takes no config: saying it has one is a problem it reports.
	path := writeConfigFile(t, home, "plugins:\n  acme:\n    enabled: true\n    config:\n      replicas: 2\n")
	first := step("changed config", 2, 1)
	if !strings.Contains(first.stderr, "plugin acme takes no config") || !strings.Contains(first.stderr, path+":") {
		t.Fatalf("changed config: %s", first.stderr)
	}
	if again := step("changed config again", 2, 0); again.stderr != first.stderr {
		t.Errorf("the cached answer reads differently:\n%s\nwant:\n%s", again.stderr, first.stderr)
	}

	entries, _ := filepath.Glob(filepath.Join(home, ".marina", "cache", "validate", "acme", "*.json"))
	if len(entries) != 2 {
		t.Fatalf("cache entries: %v, want 2 (two configs)", entries)
	}
	for _, e := range entries {
		var v map[string]any
		b, err := os.ReadFile(e)
		if err != nil || json.Unmarshal(b, &v) != nil {
			t.Fatalf("entry %s: %v\n%s", e, err, b)
		}
		if err := os.WriteFile(e, []byte(`{"format":1,"plugin":"acme","diagnostics":[{"severity":"error","summary":"forged`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if tampered := step("tampered cache", 2, 1); tampered.stderr != first.stderr || strings.Contains(tampered.stderr, "forged") {
		t.Errorf("after tampering:\n%s\nwant:\n%s", tampered.stderr, first.stderr)
	}
	step("rewritten entry", 2, 0)
}

// TestValidateBuiltinsMatchTheirServer (issue 14): for every built-in, the
// in-process check marina now runs answers exactly what the built-in
// answers when served as `marina plugin-server NAME` (the process marina
// used to start), for its defaults, a typo'd field, a wrong type and
// config it takes as it is.
func TestValidateBuiltinsMatchTheirServer(t *testing.T) {
	configs := []string{``, `{}`, `{"nosuchfield":1}`, `{"enabled":"yes"}`, `[1]`, `null`}
	opts := plugin.Options{Logger: slog.New(slog.DiscardHandler), HostVersion: "test", KillGrace: time.Second}
	for name, newPlugin := range builtins() {
		t.Run(name, func(t *testing.T) {
			d, err := sdk.Describe(newPlugin())
			if err != nil {
				t.Fatal(err)
			}
			cfgs := append([]string(nil), configs...)
			if len(d.ConfigDefaults) > 0 {
				cfgs = append(cfgs, string(d.ConfigDefaults))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inst, err := plugin.Start(ctx, plugin.Spec{Name: name, Path: marinaBin, Args: []string{pluginset.ServeArg, name}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Close()
			for _, cfg := range cfgs {
				served, serr := inst.ValidateConfig(ctx, []byte(cfg))
				local, lerr := sdk.ValidateConfig(newPlugin(), []byte(cfg))
				if serr != nil || lerr != nil {
					t.Fatalf("config %q: served %v, in-process %v", cfg, serr, lerr)
				}
				if fmt.Sprintf("%#v", local) != fmt.Sprintf("%#v", served) {
					t.Errorf("config %q:\nin-process %#v\nserved     %#v", cfg, local, served)
				}
			}
		})
	}
}
