package main

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/cmd/marina/internal/dispatch"
)

// The front and marina-core, built once, side by side in binDir as
// released; frontOnly holds a copy of the front alone.
var binDir, frontBin, coreBin, frontOnly string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "marina-front-test")
	if err != nil {
		panic(err)
	}
	binDir = filepath.Join(dir, "bin")
	frontBin, coreBin = filepath.Join(binDir, "marina"), filepath.Join(binDir, dispatch.CoreName)
	build := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), ".", "../marina-core")
	build.Env = append(os.Environ(), buildCgo())
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building marina and marina-core: " + err.Error())
	}
	frontOnly = filepath.Join(dir, "alone", "marina")
	if err := os.MkdirAll(filepath.Dir(frontOnly), 0o755); err != nil {
		panic(err)
	}
	if b, err := os.ReadFile(frontBin); err != nil {
		panic(err)
	} else if err := os.WriteFile(frontOnly, b, 0o755); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCgo is the CGO_ENABLED `make build` uses on this OS.
func buildCgo() string {
	if runtime.GOOS == "darwin" {
		return "CGO_ENABLED=1"
	}
	return "CGO_ENABLED=0"
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs bin with env (plus PATH) and args.
func run(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return result{out.String(), errb.String(), code}
}

// frontCases are command lines the front answers itself, valid and not:
// each must give what marina-core gives, byte for byte, and exit the same.
var frontCases = [][]string{
	{"version"},
	{"version", "-o", "json"},
	{"version", "--output=yaml"},
	{"version", "-o", "xml"},
	{"version", "extra"},
	{"version", "--bogus"},
	{"config", "path"},
	{"config", "view"},
	{"config", "view", "-o", "json"},
	{"config", "view", "-o", "yaml"},
	{"config", "view", "--set", "vm.cpus=6"},
	{"--set", "vm.cpus=lots", "config", "view"},
	{"config", "view", "--set", "no.such.key=1"},
	{"-c", "{{home}}/bad.yaml", "config", "view"},
	{"--config={{home}}/good.yaml", "config", "view", "-o", "json"},
	{"config", "view", "-c", "{{home}}/missing.yaml"},
	{"--no-wait", "config", "path"},
}

// home returns a private home with a valid and an invalid config file.
func home(t *testing.T) string {
	h := t.TempDir()
	for name, body := range map[string]string{
		"good.yaml":        "vm:\n  cpus: 3\ndns:\n  zone: lab.internal\n",
		"bad.yaml":         "vm:\n  cpus: [1\n",
		"constrained.yaml": "vm:\n  driver: lima\nplugins:\n  acme:\n    enabled: false\n    version: \">=1.0, <2\"\n",
	} {
		if err := os.WriteFile(filepath.Join(h, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func expand(args []string, home string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "{{home}}", home)
	}
	return out
}

// TestFrontAnswersAlone: with no marina-core anywhere, the front answers
// every one of its command lines exactly as marina-core does (so it
// answered them itself, and the same way), and stray MARINA_* variables
// warn the same.
func TestFrontAnswersAlone(t *testing.T) {
	h := home(t)
	for _, env := range [][]string{{"HOME=" + h}, {"HOME=" + h, "MARINA_VM_CPUS=5", "MARINA_NO_SUCH=1"}} {
		for _, c := range frontCases {
			args := expand(c, h)
			front := run(t, frontOnly, env, args...)
			core := run(t, coreBin, env, args...)
			if front != core {
				t.Errorf("marina %q with %q:\nfront (alone): exit %d\nstdout:\n%s\nstderr:\n%s\nmarina-core: exit %d\nstdout:\n%s\nstderr:\n%s",
					args, env, front.code, front.stdout, front.stderr, core.code, core.stdout, core.stderr)
			}
		}
	}
	// The table holds failures of each kind, so equality is not vacuous.
	codes := map[int]bool{}
	for _, c := range frontCases {
		codes[run(t, frontOnly, []string{"HOME=" + h}, expand(c, h)...).code] = true
	}
	if !codes[0] || !codes[2] {
		t.Errorf("exit statuses seen %v: the cases must include successes and usage errors", codes)
	}
}

// TestFrontHandsOver: every other command line is marina-core's: through
// the front it gives what marina-core gives (output and exit status), from
// the front's directory or through a symlink to it (Homebrew links
// bin/marina to libexec/bin/marina), or from $MARINA_CORE.
func TestFrontHandsOver(t *testing.T) {
	h := home(t)
	env := []string{"HOME=" + h}
	link := filepath.Join(t.TempDir(), "marina")
	if err := os.Symlink(frontBin, link); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{
		{},
		{"--help"},
		{"version", "--help"},
		{"help", "config", "view"},
		{"--debug", "version"},
		{"config"},
		{"config", "validate", "-c", h + "/bad.yaml"},
		{"config", "validate", "-c", h + "/good.yaml", "-o", "json"},
		{"no-such-command"},
		{"plugin", "info", "metallb"},
		{"cluster", "list", "-o", "xml"},
		{"--", "version"},
		// a plugin version constraint: only marina-core parses semver
		{"--set", "plugins.acme.version=^1.2", "config", "view"},
		{"--set", "plugins.acme.version=not-semver", "--set", "vm.cpus=0", "config", "view"},
		{"-c", h + "/constrained.yaml", "status", "-o", "json"},
	}
	for _, args := range cases {
		core := run(t, coreBin, env, args...)
		for _, front := range []string{frontBin, link} {
			if got := run(t, front, env, args...); got != core {
				t.Errorf("%s %q:\nthrough the front: exit %d\nstdout:\n%s\nstderr:\n%s\nmarina-core: exit %d\nstdout:\n%s\nstderr:\n%s",
					front, args, got.code, got.stdout, got.stderr, core.code, core.stdout, core.stderr)
			}
		}
		if got := run(t, frontOnly, append([]string{dispatch.CoreEnv + "=" + coreBin}, env...), args...); got != core {
			t.Errorf("%s=%s marina %q: exit %d, stderr %s; marina-core: exit %d", dispatch.CoreEnv, coreBin, args, got.code, got.stderr, core.code)
		}
	}
	// Not vacuous: the cases include failures with each status.
	if r := run(t, frontBin, env, "config", "validate", "-c", h+"/bad.yaml"); r.code != 2 {
		t.Errorf("config validate of an invalid file through the front: exit %d, want 2\n%s", r.code, r.stderr)
	}
	if r := run(t, frontBin, env, "no-such-command"); r.code == 0 || !strings.Contains(r.stderr, "no-such-command") {
		t.Errorf("an unknown command through the front: exit %d\n%s", r.code, r.stderr)
	}
}

// TestFrontWithoutCore: a command line that is marina-core's fails, when
// marina-core is not there, with exit 1 and what to do; a $MARINA_CORE that
// names no program is a usage error naming the variable.
func TestFrontWithoutCore(t *testing.T) {
	env := []string{"HOME=" + t.TempDir()}
	for _, args := range [][]string{{"doctor"}, {"--help"}, {"version", "--help"}, {"config", "validate"}, {"config", "view", "--set", "plugins.acme.version=^1"}} {
		r := run(t, frontOnly, env, args...)
		if r.code != 1 || r.stdout != "" {
			t.Errorf("marina %q without marina-core: exit %d, stdout %q; want exit 1 and nothing on stdout", args, r.code, r.stdout)
		}
		for _, want := range []string{filepath.Join(filepath.Dir(frontOnly), dispatch.CoreName), "go install github.com/bcollard/marina/cmd/marina@latest github.com/bcollard/marina/cmd/marina-core@latest", dispatch.CoreEnv} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("marina %q without marina-core: stderr lacks %q:\n%s", args, want, r.stderr)
			}
		}
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "nothing"), t.TempDir(), plain} {
		r := run(t, frontOnly, append([]string{dispatch.CoreEnv + "=" + bad}, env...), "doctor")
		if r.code != 2 || !strings.Contains(r.stderr, dispatch.CoreEnv+"="+bad) {
			t.Errorf("%s=%s marina doctor: exit %d, want 2 and the variable named:\n%s", dispatch.CoreEnv, bad, r.code, r.stderr)
		}
	}
}

// TestAnswers: which command lines the front keeps (in process, on its own
// command tree).
func TestAnswers(t *testing.T) {
	keep := [][]string{
		{"version"}, {"version", "-o", "json"}, {"config", "view"}, {"config", "path"}, {"status"}, {"st", "-o", "yaml"},
		{"-c", "x.yaml", "config", "view"}, {"--set", "vm.cpus=2", "config", "view"}, {"plugin", "list"}, {"plugin", "ls", "-o", "wide"},
		{"config", "view", "--set", "a=b"}, {"version", "--bogus"}, {"version", "extra"},
	}
	give := [][]string{
		{}, {"help"}, {"--help"}, {"-h"}, {"version", "-h"}, {"--help=true"}, {"--debug", "version"},
		{"version", "--debug=true"}, {"config"}, {"config", "validate"}, {"doctor"}, {"plugin"}, {"plugin", "info", "x"},
		{"up"}, {"completion", "bash"}, {"__complete", "ver"}, {"--", "version"}, {"-c", "help", "config", "view"},
		{"no-such"},
	}
	for _, args := range keep {
		if !answers(newRoot(), args) {
			t.Errorf("answers(%q) = false, want true", args)
		}
	}
	for _, args := range give {
		if answers(newRoot(), args) {
			t.Errorf("answers(%q) = true, want false (marina-core's)", args)
		}
	}
	// Every command the front has is marina-core's too, with the same
	// flags: the front is a subset, never a variant.
	var paths []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() {
			paths = append(paths, c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot())
	slices.Sort(paths)
	// dispatch's first words (it decides before cobra exists) are the
	// front's top-level commands and their aliases, no more, no less.
	var words []string
	for _, c := range newRoot().Commands() {
		words = append(words, c.Name())
		words = append(words, c.Aliases...)
	}
	slices.Sort(words)
	if front := slices.Sorted(slices.Values(dispatch.FrontCommands)); !slices.Equal(words, front) {
		t.Errorf("the front's top-level commands and aliases are %q, dispatch.FrontCommands %q", words, front)
	}
	if want := []string{"marina config path", "marina config view", "marina plugin list", "marina status", "marina version"}; !slices.Equal(paths, want) {
		t.Errorf("the front's commands are %q, want %q (update the docs and this test together)", paths, want)
	}
}

// TestFrontStatus: the front answers status for a lab whose machine
// certainly does not run (the lima VM never created; no engine at the host
// driver's socket), exactly as marina-core does, and hands every other lab
// over: a created VM (Lima's reader is marina-core's), something listening
// at the Docker socket.
func TestFrontStatus(t *testing.T) {
	h := home(t)
	missing := "DOCKER_HOST=unix://" + filepath.Join(h, "no-docker.sock")
	alone := [][]string{
		{"HOME=" + h, "MARINA_VM_DRIVER=lima"},
		{"HOME=" + h, "MARINA_VM_DRIVER=lima", "MARINA_VM_NAME=other", "MARINA_NETWORK_BRIDGECIDR=172.31.0.0/16"},
		{"HOME=" + h, "MARINA_VM_DRIVER=host", missing},
		{"HOME=" + h, "MARINA_VM_DRIVER=host", "DOCKER_HOST=tcp://127.0.0.1:1"},
	}
	for _, env := range alone {
		for _, args := range [][]string{{"status"}, {"st"}, {"status", "-o", "json"}, {"status", "-o", "yaml"}, {"status", "-o", "wide"}, {"status", "extra"}} {
			front, core := run(t, frontOnly, env, args...), run(t, coreBin, env, args...)
			if front != core {
				t.Errorf("marina %q with %q:\nfront (alone): exit %d\nstdout:\n%s\nstderr:\n%s\nmarina-core: exit %d\nstdout:\n%s\nstderr:\n%s",
					args, env, front.code, front.stdout, front.stderr, core.code, core.stdout, core.stderr)
			}
		}
	}
	// Not vacuous: the host lab is reported stopped, with the probe's words.
	if r := run(t, frontOnly, alone[2], "status"); r.code != 0 || !strings.Contains(r.stdout, "driver host: stopped (the Docker engine at unix://") ||
		!strings.Contains(r.stdout, "The machine is not running: run marina up.") {
		t.Errorf("marina status of a host lab without Docker: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, frontOnly, alone[0], "status"); r.code != 0 || !strings.Contains(r.stdout, "driver lima: absent") {
		t.Errorf("marina status of a lima lab never created: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Handed over: a created VM, and an endpoint where something listens.
	created := t.TempDir()
	if err := os.MkdirAll(filepath.Join(created, ".marina", "lima", "marina"), 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "listening.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // not Docker: every request gets the same 503
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_ = req.Body.Close()
					_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\nConnection: close\r\n\r\nnot me\n"))
				}
			}()
		}
	}()
	for _, env := range [][]string{
		{"HOME=" + created, "MARINA_VM_DRIVER=lima"},
		{"HOME=" + h, "MARINA_VM_DRIVER=host", "DOCKER_HOST=unix://" + sock},
	} {
		if r := run(t, frontOnly, env, "status"); r.code != 1 || !strings.Contains(r.stderr, dispatch.CoreName+", the program behind") {
			t.Errorf("marina status with %q and no marina-core: exit %d, want the front to hand over (and fail to find marina-core)\n%s%s", env, r.code, r.stdout, r.stderr)
		}
		if front, core := run(t, frontBin, env, "status", "-o", "json"), run(t, coreBin, env, "status", "-o", "json"); front != core {
			t.Errorf("marina status with %q through the front: %+v\nmarina-core: %+v", env, front, core)
		}
	}
}

// TestFrontPluginList: the front lists a lab whose plugins are all built in
// exactly as marina-core does (a disabled dependency included), and hands
// over every other: something installed, a lock file, a plugin of the
// config that is not built in, a version constraint.
func TestFrontPluginList(t *testing.T) {
	h := home(t)
	env := []string{"HOME=" + h}
	alone := [][]string{
		{"plugin", "list"}, {"plugin", "ls", "-o", "wide"}, {"plugin", "list", "-o", "json"}, {"plugin", "list", "-o", "yaml"},
		{"plugin", "list", "-o", "xml"}, {"plugin", "list", "extra"},
		{"--set", "plugins.localdns.enabled=false", "plugin", "list"},
		{"--set", "plugins.localdns.enabled=false", "plugin", "list", "-o", "json"},
		{"--set", "plugins.metallb.enabled=false", "--set", "plugins.coredns.enabled=false", "plugin", "list", "-o", "wide"},
	}
	for _, args := range alone {
		front, core := run(t, frontOnly, env, args...), run(t, coreBin, env, args...)
		if front != core {
			t.Errorf("marina %q:\nfront (alone): exit %d\nstdout:\n%s\nstderr:\n%s\nmarina-core: exit %d\nstdout:\n%s\nstderr:\n%s",
				args, front.code, front.stdout, front.stderr, core.code, core.stdout, core.stderr)
		}
	}
	// Not vacuous: a disabled dependency makes externaldns unavailable.
	if r := run(t, frontOnly, env, "--set", "plugins.localdns.enabled=false", "plugin", "list"); r.code != 0 ||
		!strings.Contains(r.stdout, "externaldns  0.1.0    built-in  2      unavailable") || !strings.Contains(r.stdout, "localdns     0.1.0    built-in  2      disabled") {
		t.Errorf("plugin list with localdns disabled: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(h, ".marina")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plugin list wrote to ~/.marina: %v", err)
	}

	installed, locked := home(t), home(t)
	if err := os.MkdirAll(filepath.Join(installed, ".marina", "plugins", "acme", "1.0.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(locked, ".marina"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(locked, ".marina", "plugins.lock"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		home string
		args []string
	}{
		{installed, []string{"plugin", "list", "-o", "json"}},
		{locked, []string{"plugin", "list"}},
		{h, []string{"--set", "plugins.acme.enabled=true", "plugin", "list"}},
		{h, []string{"--set", "plugins.acme.version=^1", "plugin", "list", "-o", "wide"}},
	} {
		env := []string{"HOME=" + c.home}
		if r := run(t, frontOnly, env, c.args...); r.code != 1 || !strings.Contains(r.stderr, dispatch.CoreName+", the program behind") {
			t.Errorf("marina %q (home %s) without marina-core: exit %d, want the front to hand over\n%s%s", c.args, c.home, r.code, r.stdout, r.stderr)
		}
		if front, core := run(t, frontBin, env, c.args...), run(t, coreBin, env, c.args...); front != core {
			t.Errorf("marina %q through the front: %+v\nmarina-core: %+v", c.args, front, core)
		}
	}
}

// TestDispatchFirst: a command line that is certainly marina-core's is
// handed over before the front initializes cobra, viper or the YAML
// packages (GODEBUG=inittrace: the front's init lines end where
// marina-core's runtime starts again), and a front command still
// initializes them (the trace is read right).
func TestDispatchFirst(t *testing.T) {
	env := []string{"HOME=" + t.TempDir(), "GODEBUG=inittrace=1"}
	frontInits := func(args ...string) []string {
		r := run(t, frontBin, env, args...)
		var pkgs []string
		for _, line := range strings.Split(r.stderr, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
				if f[1] == "internal/bytealg" && len(pkgs) > 0 {
					break // marina-core starts
				}
				pkgs = append(pkgs, f[1])
			}
		}
		return pkgs
	}
	heavy := func(p string) bool {
		return strings.Contains(p, "spf13") || strings.Contains(p, "yaml") || strings.Contains(p, "gotenv") || strings.Contains(p, "core/homeenv")
	}
	if pkgs := frontInits("cluster", "list", "--help"); len(pkgs) == 0 || slices.ContainsFunc(pkgs, heavy) {
		t.Errorf("handing `cluster list --help` over, the front initialized %q", pkgs)
	}
	if pkgs := frontInits("version"); !slices.ContainsFunc(pkgs, heavy) {
		t.Errorf("answering version, the front's init trace shows none of its packages: %q", pkgs)
	}
}
