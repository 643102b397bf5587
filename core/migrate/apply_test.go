package migrate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
)

func plan(t *testing.T, home string, opts Options) *Plan {
	t.Helper()
	if opts.KubeconfigFiles == nil {
		opts.KubeconfigFiles = []string{filepath.Join(home, ".kube", "config")}
	}
	p, err := NewPlan(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func apply(t *testing.T, p *Plan) (*Result, []string) {
	t.Helper()
	var lines []string
	res, err := Apply(t.Context(), p, func(r StepResult) { lines = append(lines, r.Line(p.Home)) })
	if err != nil {
		t.Fatalf("Apply: %v\n%s", err, strings.Join(lines, "\n"))
	}
	return res, lines
}

func outcomes(res *Result) map[string]Outcome {
	m := map[string]Outcome{}
	for _, s := range res.Steps {
		m[s.What()] = s.Outcome
	}
	return m
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestApplyDefaults migrates a stopped klimax with a host cache and two
// clusters, then runs again: the second run finds everything done and
// changes nothing.
func TestApplyDefaults(t *testing.T) {
	home := newHome(t)
	scenarios[0].build(t, home) // defaults
	dockerio := filepath.Join(home, ".klimax", "registry-cache", "registry-dockerio")
	cacheBefore := snapshot(t, dockerio)
	diskBefore, _ := os.ReadFile(filepath.Join(home, ".klimax", "klimax", "diffdisk"))

	p := plan(t, home, Options{})
	res, lines := apply(t, p)
	got := outcomes(res)
	for what, want := range map[string]Outcome{
		"config": OutcomeDone, "registry cache registry-dockerio": OutcomeDone, "registry cache registry-quayio": OutcomeDone,
		"kubeconfig dev": OutcomeDone, "kubeconfig prod": OutcomeDone, "context dev": OutcomeKept,
		"VM klimax": OutcomeDone, "VM mount": OutcomeDone, "VM contents": OutcomeManual, "cluster dev": OutcomeManual,
	} {
		if got[what] != want {
			t.Errorf("%s: %s, want %s\n%s", what, got[what], want, strings.Join(lines, "\n"))
		}
	}

	// The config: 0600, and what marina loads is the plan's config.
	cfgPath := filepath.Join(home, ".marina", "config.yaml")
	if m := mode(t, cfgPath); m != 0o600 {
		t.Errorf("config mode %v", m)
	}
	l, err := config.Load(config.LoadOptions{Path: cfgPath, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.VM.Name != "klimax" || asYAML(t, l.Config) != asYAML(t, p.Config) {
		t.Errorf("loaded config differs from the plan's:\n%s", asYAML(t, l.Config))
	}

	// The cache: moved whole (content, modes, times), the source gone.
	moved := filepath.Join(home, ".marina", "registry-cache", "registry-dockerio")
	if after := snapshot(t, moved); after != cacheBefore {
		t.Errorf("the moved cache differs:\nbefore:\n%s\nafter:\n%s", cacheBefore, after)
	}
	if exists(dockerio) {
		t.Error("the klimax cache is still there")
	}

	// Kubeconfigs: copied 0600, originals kept.
	for _, n := range []string{"dev", "prod"} {
		dst := filepath.Join(home, ".kube", "marina", n+".kubeconfig")
		b, err := os.ReadFile(dst)
		if err != nil || string(b) != kubeconfigFor(n) {
			t.Errorf("%s: %v %q", dst, err, b)
		}
		if m := mode(t, dst); m != 0o600 {
			t.Errorf("%s mode %v", dst, m)
		}
		if m := mode(t, filepath.Dir(dst)); m != 0o700 {
			t.Errorf("%s mode %v", filepath.Dir(dst), m)
		}
		if b, err := os.ReadFile(filepath.Join(home, ".kube", "klimax", n+".kubeconfig")); err != nil || string(b) != kubeconfigFor(n) {
			t.Errorf("the original kubeconfig of %s changed: %v", n, err)
		}
	}

	// The VM: moved into marina's LIMA_HOME; its disk intact; its mount
	// shares marina's cache; the rest of lima.yaml as it was.
	vmDir := filepath.Join(home, ".marina", "lima", "klimax")
	if exists(filepath.Join(home, ".klimax", "klimax")) {
		t.Error("the VM directory is still in ~/.klimax")
	}
	if disk, _ := os.ReadFile(filepath.Join(vmDir, "diffdisk")); !bytes.Equal(disk, diskBefore) {
		t.Error("the VM disk changed")
	}
	found, done, err := cacheMount(filepath.Join(vmDir, "lima.yaml"), paths{home})
	if err != nil || found || !done {
		t.Errorf("mount: klimax's %v, marina's %v, %v", found, done, err)
	}
	ly, _ := os.ReadFile(filepath.Join(vmDir, "lima.yaml"))
	for _, want := range []string{"mountPoint: " + filepath.Join(home, ".marina", "registry-cache"), "sysctl -w fs.inotify.max_user_watches=524288", "hostSocket: '{{.Home}}/.klimax.docker.sock'", "vzNAT: true"} {
		if !strings.Contains(string(ly), want) {
			t.Errorf("lima.yaml lacks %q:\n%s", want, ly)
		}
	}
	if m := mode(t, filepath.Join(vmDir, "lima-version")); m != 0o444 {
		t.Errorf("lima-version mode %v", m)
	}

	// Second run: nothing left to change, and nothing changes.
	before := snapshot(t, home)
	p2 := plan(t, home, Options{})
	for _, s := range p2.Steps {
		if s.Action.Changes() {
			t.Errorf("second plan still wants to %s %s", s.Action, s.What())
		}
	}
	res2, lines2 := apply(t, p2)
	got2 := outcomes(res2)
	for _, what := range []string{"config", "registry cache", "kubeconfig dev", "kubeconfig prod", "VM klimax", "VM mount"} {
		if got2[what] != OutcomeAlreadyDone {
			t.Errorf("second run: %s is %s, want already-done\n%s", what, got2[what], strings.Join(lines2, "\n"))
		}
	}
	if after := snapshot(t, home); after != before {
		t.Errorf("the second run changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestApplyRefusesExistingConfig: a marina config that differs stops the
// migration before anything changes (exit status 2); --force replaces it
// and keeps the old one as .bak.
func TestApplyRefusesExistingConfig(t *testing.T) {
	home := newHome(t)
	scenarios[0].build(t, home)
	cfgPath := filepath.Join(home, ".marina", "config.yaml")
	old := "vm:\n  cpus: 6\n"
	write(t, cfgPath, old, 0o644)
	before := snapshot(t, home)

	p := plan(t, home, Options{})
	res, err := Apply(t.Context(), p, nil)
	if err == nil || res != nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "vm.cpus") {
		t.Fatalf("Apply = %v, %v (exit %d)", res, err, exitcode.Of(err))
	}
	if after := snapshot(t, home); after != before {
		t.Fatalf("a refused migration changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	p = plan(t, home, Options{Force: true})
	res, _ = apply(t, p)
	if o := outcomes(res)["config"]; o != OutcomeDone {
		t.Fatalf("config: %s", o)
	}
	if b, _ := os.ReadFile(cfgPath + ".bak"); string(b) != old {
		t.Errorf(".bak = %q, want the old file", b)
	}
	if b, _ := os.ReadFile(cfgPath); !bytes.Equal(b, p.ConfigYAML()) {
		t.Errorf("config not replaced")
	}
	if m := mode(t, cfgPath); m != 0o600 {
		t.Errorf("a replaced config holding credentials must be 0600, is %v", m)
	}
	// With the same content again, --force changes nothing (no new .bak).
	before = snapshot(t, home)
	apply(t, plan(t, home, Options{Force: true}))
	if after := snapshot(t, home); after != before {
		t.Errorf("--force with nothing to do changed files")
	}
}

// TestApplyAcrossFilesystems: when rename fails with EXDEV, the registry
// cache is copied, verified, renamed into place and the original removed;
// the VM is never copied: its step fails, saying what to do, and it stays
// where it was.
func TestApplyAcrossFilesystems(t *testing.T) {
	home := newHome(t)
	scenarios[0].build(t, home)
	src := filepath.Join(home, ".klimax", "registry-cache", "registry-quayio")
	before := snapshot(t, src)
	vmBefore := snapshot(t, filepath.Join(home, ".klimax", "klimax"))
	rename = func(from, to string) error {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EXDEV}
	}
	t.Cleanup(func() { rename = os.Rename })

	p := plan(t, home, Options{})
	var lines []string
	res, err := Apply(t.Context(), p, func(r StepResult) { lines = append(lines, r.Line(home)) })
	if err == nil || !strings.Contains(err.Error(), "mv ") {
		t.Fatalf("Apply: %v", err)
	}
	got := map[string]StepResult{}
	for _, s := range res.Steps {
		got[s.What()] = s
	}
	if r := got["registry cache registry-quayio"]; r.Outcome != OutcomeDone || !strings.Contains(r.Detail, "verified") {
		t.Errorf("cache: %+v", r)
	}
	if after := snapshot(t, filepath.Join(home, ".marina", "registry-cache", "registry-quayio")); after != before {
		t.Errorf("copied cache differs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if exists(src) || exists(filepath.Join(home, ".marina", "registry-cache", "registry-quayio"+tmpSuffix)) {
		t.Error("the original or the temporary copy is left")
	}
	if r := got["VM klimax"]; r.Outcome != OutcomeFailed {
		t.Errorf("VM: %+v", r)
	}
	if r := got["VM mount"]; r.Outcome != OutcomeSkipped {
		t.Errorf("mount after a failed VM move: %+v", r)
	}
	if after := snapshot(t, filepath.Join(home, ".klimax", "klimax")); after != vmBefore {
		t.Error("the VM directory changed after a failed move")
	}
}

// TestCopyVerificationFailureKeepsOriginal: a copy that does not match the
// original is thrown away and the original kept.
func TestCopyVerificationFailureKeepsOriginal(t *testing.T) {
	home := newHome(t)
	registryCache(t, home, "registry-dockerio")
	src := filepath.Join(home, ".klimax", "registry-cache", "registry-dockerio")
	dst := filepath.Join(home, ".marina", "registry-cache", "registry-dockerio")
	before := snapshot(t, src)
	rename = func(from, to string) error {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EXDEV}
	}
	afterCopy = func(dir string) {
		_ = os.WriteFile(filepath.Join(dir, "docker", "registry", "v2", "repositories", "library", "nginx", "_layers", "sha256", "abcdef", "link"), []byte("sha256:XXXXXX"), 0o600)
	}
	t.Cleanup(func() { rename, afterCopy = os.Rename, nil })

	_, err := moveDir(t.Context(), src, dst)
	if err == nil || !strings.Contains(err.Error(), "SHA-256") || !strings.Contains(err.Error(), "original is kept") {
		t.Fatalf("moveDir: %v", err)
	}
	if after := snapshot(t, src); after != before {
		t.Error("the original changed")
	}
	if exists(dst) || exists(dst+tmpSuffix) {
		t.Error("a copy is left behind")
	}
}

// TestVMStates: what the pid files say decides whether the VM moves.
func TestVMStates(t *testing.T) {
	cases := []struct {
		state      string
		action     Action
		note       string
		cacheMoves bool
	}{
		{"stopped", ActionMove, "rename into marina's LIMA_HOME", true},
		{"stale", ActionMove, "process", true},
		{"running", ActionManual, "stop it first: `klimax down`", false},
		{"garbage", ActionManual, "its state is unknown (ha.pid does not hold a process id (\"not-a-pid\")): stop it first: `klimax down`", false},
	}
	for _, tc := range cases {
		t.Run(tc.state, func(t *testing.T) {
			home := newHome(t)
			klimaxConfigFile(t, home, "defaults")
			limaInstance(t, home, "klimax", tc.state, true)
			registryCache(t, home, "registry-dockerio")
			p := plan(t, home, Options{})
			if p.Config.VM.Name != "klimax" {
				t.Errorf("vm.name %q: a VM that can be adopted keeps its name", p.Config.VM.Name)
			}
			var vm, cache Step
			for _, s := range p.Steps {
				switch s.Kind {
				case KindVM:
					vm = s
				case KindRegistryCache:
					cache = s
				}
			}
			if vm.Action != tc.action || !strings.Contains(vm.Note, tc.note) {
				t.Errorf("VM step %s %q, want %s ~%q", vm.Action, vm.Note, tc.action, tc.note)
			}
			if (cache.Action == ActionMove) != tc.cacheMoves {
				t.Errorf("cache step %s %q", cache.Action, cache.Note)
			}
			apply(t, p)
			if moved := exists(filepath.Join(home, ".marina", "lima", "klimax")); moved != (tc.action == ActionMove) {
				t.Errorf("VM moved: %v", moved)
			}
			if moved := exists(filepath.Join(home, ".marina", "registry-cache", "registry-dockerio")); moved != tc.cacheMoves {
				t.Errorf("cache moved: %v", moved)
			}
		})
	}
}

// TestVMStartedAfterPlan: a VM started between the plan and Apply is not
// moved, nor is the cache its mirrors use.
func TestVMStartedAfterPlan(t *testing.T) {
	home := newHome(t)
	klimaxConfigFile(t, home, "defaults")
	dir := limaInstance(t, home, "klimax", "stopped", true)
	registryCache(t, home, "registry-dockerio")
	p := plan(t, home, Options{})
	write(t, filepath.Join(dir, "ha.pid"), strconv.Itoa(os.Getpid()), 0o644)
	res, _ := apply(t, p)
	got := outcomes(res)
	if got["VM klimax"] != OutcomeSkipped || got["registry cache registry-dockerio"] != OutcomeSkipped {
		t.Errorf("outcomes %v", got)
	}
	if !exists(dir) || !exists(filepath.Join(home, ".klimax", "registry-cache", "registry-dockerio")) {
		t.Error("something moved under a running VM")
	}
}

// TestVMCannotMove: a target that exists, and a path too long for Lima's
// sockets, are reported; nothing moves.
func TestVMCannotMove(t *testing.T) {
	t.Run("target exists", func(t *testing.T) {
		home := newHome(t)
		klimaxConfigFile(t, home, "defaults")
		limaInstance(t, home, "klimax", "stopped", false)
		write(t, filepath.Join(home, ".marina", "lima", "klimax", "lima.yaml"), "vmType: vz\n", 0o644)
		p := plan(t, home, Options{})
		vm := stepOf(p, KindVM)
		if vm.Action != ActionSkip || !strings.Contains(vm.Note, "marina already has a VM") {
			t.Errorf("VM step %+v", vm)
		}
	})
	t.Run("socket path too long", func(t *testing.T) {
		home := filepath.Join(newHome(t), strings.Repeat("h", 90))
		klimaxConfigFile(t, home, "defaults")
		limaInstance(t, home, "klimax", "stopped", false)
		p := plan(t, home, Options{})
		vm := stepOf(p, KindVM)
		if vm.Action != ActionManual || !strings.Contains(vm.Note, "too long a path for Lima's sockets") || !strings.Contains(vm.Note, "`klimax destroy`, then `marina up`") {
			t.Errorf("VM step %+v", vm)
		}
		if p.Config.VM.Name != config.DefaultVMName {
			t.Errorf("vm.name %q: a VM that is recreated takes marina's default name", p.Config.VM.Name)
		}
	})
}

func stepOf(p *Plan, k Kind) Step {
	for _, s := range p.Steps {
		if s.Kind == k {
			return s
		}
	}
	return Step{}
}

// TestRegistryCacheTargetNotEmpty: a mirror cache marina already has is
// not overwritten; an empty one is replaced.
func TestRegistryCacheTargetNotEmpty(t *testing.T) {
	home := newHome(t)
	klimaxConfigFile(t, home, "guest-cache")
	registryCache(t, home, "registry-dockerio", "registry-quayio")
	write(t, filepath.Join(home, ".marina", "registry-cache", "registry-dockerio", "marina-blob"), "mine", 0o644)
	if err := os.MkdirAll(filepath.Join(home, ".marina", "registry-cache", "registry-quayio"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, _ := apply(t, plan(t, home, Options{}))
	got := outcomes(res)
	if got["registry cache registry-dockerio"] != OutcomeSkipped || got["registry cache registry-quayio"] != OutcomeDone {
		t.Fatalf("outcomes %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".marina", "registry-cache", "registry-dockerio", "marina-blob")); string(b) != "mine" {
		t.Error("marina's cache was touched")
	}
	if !exists(filepath.Join(home, ".klimax", "registry-cache", "registry-dockerio", "docker")) {
		t.Error("klimax's cache was removed although it was not moved")
	}
}

// TestKubeconfigConflicts: an existing different per-cluster file is kept;
// one marina wrote (recreated cluster) counts as the cluster being done.
func TestKubeconfigConflicts(t *testing.T) {
	home := newHome(t)
	klimaxConfigFile(t, home, "guest-cache")
	kubeconfigs(t, home, "dev", "prod")
	write(t, filepath.Join(home, ".kube", "marina", "dev.kubeconfig"), "apiVersion: v1\nkind: Config\n", 0o600)
	marinaOwn := strings.Replace(kubeconfigFor("prod"), "  name: prod\ncurrent-context", "    extensions:\n    - name: marina.dev\n      extension:\n        managedBy: marina\n  name: prod\ncurrent-context", 1)
	if marinaOwn == kubeconfigFor("prod") {
		t.Fatal("fixture: no marker added")
	}
	write(t, filepath.Join(home, ".kube", "marina", "prod.kubeconfig"), marinaOwn, 0o600)
	p := plan(t, home, Options{})
	want := map[string]Action{"kubeconfig dev": ActionSkip, "kubeconfig prod": ActionKeep, "cluster prod": ActionDone, "cluster dev": ActionManual}
	for _, s := range p.Steps {
		if a, ok := want[s.What()]; ok && s.Action != a {
			t.Errorf("%s: %s (%s), want %s", s.What(), s.Action, s.Note, a)
		}
	}
	before := snapshot(t, filepath.Join(home, ".kube"))
	apply(t, p)
	if after := snapshot(t, filepath.Join(home, ".kube")); after != before {
		t.Error("kubeconfigs changed although every copy conflicts")
	}
}

// TestApplyInterrupted: a cancelled context stops before the next step.
func TestApplyInterrupted(t *testing.T) {
	home := newHome(t)
	scenarios[0].build(t, home)
	p := plan(t, home, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := snapshot(t, home)
	_, err := Apply(ctx, p, nil)
	if err == nil || !errors.Is(err, ctx.Err()) {
		t.Fatalf("err = %v", err)
	}
	if after := snapshot(t, home); after != before {
		t.Error("a cancelled migration changed files")
	}
}
