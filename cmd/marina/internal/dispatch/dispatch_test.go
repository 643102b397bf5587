package dispatch

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCoreOnly(t *testing.T) {
	for _, c := range []struct {
		args []string
		core bool
	}{
		{nil, true},
		{[]string{"up"}, true},
		{[]string{"cluster", "create", "dev"}, true},
		{[]string{"--no-wait", "down"}, true},
		{[]string{"-c", "f.yaml", "doctor"}, true},
		{[]string{"--set", "vm.cpus=2", "up"}, true},
		{[]string{"-c", "version"}, true}, // "version" is -c's value: no command
		{[]string{"help"}, true},
		{[]string{"version", "--help"}, true},
		{[]string{"config", "view", "-h"}, true},
		{[]string{"--debug", "version"}, true},
		{[]string{"status", "--debug=true"}, true},
		{[]string{"--", "version"}, true},
		{[]string{"completion", "bash"}, true},
		{[]string{"version"}, false},
		{[]string{"config", "validate"}, false}, // main decides (and hands over)
		{[]string{"-c", "f.yaml", "config", "view"}, false},
		{[]string{"--config=f.yaml", "--set", "a=b", "status"}, false},
		{[]string{"--set=a=b", "st", "-o", "json"}, false},
		{[]string{"--bogus", "plugin", "list"}, false},
		{[]string{"plugin"}, false},
	} {
		if got := CoreOnly(c.args); got != c.core {
			t.Errorf("CoreOnly(%q) = %v, want %v", c.args, got, c.core)
		}
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	core := filepath.Join(dir, CoreName)
	if err := os.WriteFile(core, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(CoreEnv, core)
	if p, _, err := Find(); p != core || err != nil {
		t.Errorf("Find with %s = %q, %v", CoreEnv, p, err)
	}
	t.Setenv(CoreEnv, dir)
	if _, _, err := Find(); err == nil {
		t.Errorf("Find with %s naming a directory: no error", CoreEnv)
	} else if _, ok := err.(*UsageError); !ok {
		t.Errorf("Find with %s naming a directory: %T %v, want a *UsageError", CoreEnv, err, err)
	}
	t.Setenv(CoreEnv, "")
	// The test binary has no marina-core beside it.
	if p, tried, err := Find(); p != "" || err != nil || len(tried) == 0 {
		t.Errorf("Find beside the test binary = %q, %q, %v", p, tried, err)
	}
}

func TestResolve(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "libexec", "bin", "marina")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(tmp, "abs")
	rel := filepath.Join(tmp, "bin", "marina")
	if err := os.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, abs); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../libexec/bin/marina", rel); err != nil {
		t.Fatal(err)
	}
	chain := filepath.Join(tmp, "chain")
	if err := os.Symlink(rel, chain); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{real, abs, rel, chain} {
		got, err := filepath.EvalSymlinks(resolve(p))
		want, _ := filepath.EvalSymlinks(real)
		if err != nil || got != want {
			t.Errorf("resolve(%s) leads to %s (%v), want %s", p, got, err, want)
		}
		if d, _ := filepath.EvalSymlinks(dir(resolve(p))); d != filepath.Dir(want) {
			t.Errorf("dir(resolve(%s)) is %s, want %s", p, d, filepath.Dir(want))
		}
	}
	if dir("marina") != "." || dir("/marina") != "/" || dir("/a/b") != "/a" {
		t.Error("dir is wrong")
	}
}
