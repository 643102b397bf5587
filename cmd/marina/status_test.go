package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/cmd/marina/internal/dispatch"
	"github.com/bcollard/marina/core/vm/lima/limatest"
)

// TestFrontStatusStoppedLima: a created, stopped Lima VM (a Mac lab after
// `marina down`). The first status is marina-core's (only Lima's reader
// knows the state) and leaves its answer in ~/.marina/cache/status; then
// the front answers alone, byte for byte as marina-core does, until a file
// of the VM, Lima's config or marina's config changes.
func TestFrontStatusStoppedLima(t *testing.T) {
	h := home(t)
	inst := limatest.CreatedVM(t, h)
	env := []string{"HOME=" + h, "MARINA_VM_DRIVER=lima"}
	formats := [][]string{{"status"}, {"status", "-o", "json"}, {"status", "-o", "yaml"}}

	handsOver := func(env []string, why string) {
		t.Helper()
		if r := run(t, frontOnly, env, "status"); r.code != 1 || !strings.Contains(r.stderr, dispatch.CoreName+", the program behind") {
			t.Errorf("%s: the front answered alone (exit %d), want it to hand over\n%s%s", why, r.code, r.stdout, r.stderr)
		}
	}
	answersAlone := func(env []string, why string) {
		t.Helper()
		for _, args := range formats {
			front, core := run(t, frontOnly, env, args...), run(t, coreBin, env, args...)
			if front != core {
				t.Errorf("%s: marina %q\nfront (alone): exit %d\nstdout:\n%s\nstderr:\n%s\nmarina-core: exit %d\nstdout:\n%s\nstderr:\n%s",
					why, args, front.code, front.stdout, front.stderr, core.code, core.stdout, core.stderr)
			}
		}
	}

	handsOver(env, "a created VM marina-core never looked at")
	if r := run(t, frontBin, env, "status"); r.code != 0 || !strings.Contains(r.stdout, "driver lima: stopped (the VM is stopped; `marina up` starts it)") {
		t.Fatalf("marina status of a created VM: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	answersAlone(env, "after marina-core found the VM stopped")

	// marina's config changes what status reports (drift): marina-core's
	// again, then the front's for the new config.
	cpus := append(env[:len(env):len(env)], "MARINA_VM_CPUS=2")
	handsOver(cpus, "another vm.cpus")
	if r := run(t, coreBin, cpus, "status"); !strings.Contains(r.stdout, "vm.cpus") {
		t.Errorf("marina-core status with vm.cpus 2 reports no drift:\n%s%s", r.stdout, r.stderr)
	}
	answersAlone(cpus, "after marina-core saw vm.cpus 2")
	handsOver(env, "back to the first config (one answer is kept per VM)")

	// The VM starting: Lima's host agent writes its pid file.
	if r := run(t, coreBin, env, "status"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	answersAlone(env, "before ha.pid")
	if err := os.WriteFile(filepath.Join(inst, "ha.pid"), []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	handsOver(env, "ha.pid written")
	if err := os.Remove(filepath.Join(inst, "ha.pid")); err != nil {
		t.Fatal(err)
	}
	answersAlone(env, "ha.pid gone again")

	// Lima's own config (an override of every instance) and lima.yaml.
	conf := filepath.Join(h, ".marina", "lima", "_config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "override.yaml"), []byte("cpus: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	handsOver(env, "Lima's override.yaml written")
	if err := os.Remove(filepath.Join(conf, "override.yaml")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(inst, "lima.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("# edited\n")
	_ = f.Close()
	handsOver(env, "lima.yaml edited")
}
