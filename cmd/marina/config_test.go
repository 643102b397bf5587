package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// marinaBounded runs the binary like marina does, with stdin and a deadline:
// a command that reads an endless file must not hang the test.
func marinaBounded(t *testing.T, home string, stdin []byte, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, marinaBin, args...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("marina %v still running after 60s", args)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func writeConfigFile(t *testing.T, home, body string) string {
	t.Helper()
	path := filepath.Join(home, ".marina", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigValidateEveryLayer: one run reports the file's problems, the
// --set flags' problems and what the plugins (the built-ins, checked in-process for
// this) say about their config, each located where it was written: a
// plugin's field at its file line or its --set, an unknown plugin enabled by
// --set at that flag, not at the file.
func TestConfigValidateEveryLayer(t *testing.T) {
	home := t.TempDir()
	path := writeConfigFile(t, home, `vm:
  cpus: 0
  memory: 99999999999PiB
plugins:
  metallb:
    enabled: true
    config:
      bogus: 1
  coredns:
    enabled: true
    config:
      cache: -5
`)
	r := marina(t, home, nil, "config", "validate", "-o", "json",
		"--set", "plugins.nosuch.enabled=true", "--set", "vm.disk=1GiB", "--set", "plugins.coredns.config.rolloutTimeout=-1s")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res validateResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.Path+" @ "+p.Where)
	}
	want := []string{
		"vm.cpus @ " + path + ":2:3",
		"vm.memory @ " + path + ":3:3",
		"plugins.metallb.config @ " + path + ":7:5",
		"plugins.coredns.config.cache @ " + path + ":12:7",
		"plugins.coredns.config.rolloutTimeout @ --set plugins.coredns.config.rolloutTimeout=-1s",
		"plugins.nosuch @ --set plugins.nosuch.enabled=true",
		"vm.disk @ --set vm.disk=1GiB",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s\n(%s)", strings.Join(got, "\n"), strings.Join(want, "\n"), r.stderr)
	}
	if res.Valid {
		t.Fatal("valid: true with problems")
	}
	for _, p := range res.Problems {
		if p.Path == "vm.memory" && !strings.Contains(p.Message, "too large") {
			t.Errorf("vm.memory: %s", p.Message)
		}
	}

	// Text output: only --set problems, so the header does not blame the file.
	writeConfigFile(t, home, "vm:\n  cpus: 2\n")
	r = marina(t, home, nil, "config", "validate", "--set", "plugins.nosuch.enabled=true")
	if r.code != 2 || strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "plugins.nosuch: plugin nosuch is not installed") ||
		!strings.Contains(r.stderr, "(--set plugins.nosuch.enabled=true)") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}

// TestConfigValidateFieldRules: the built-ins' field rules (the sdk's
// `marina` tags: enum, min, max) are enforced by `config validate`, one
// problem per field at its file line, with a did-you-mean for a near miss.
func TestConfigValidateFieldRules(t *testing.T) {
	home := t.TempDir()
	path := writeConfigFile(t, home, `plugins:
  registries:
    enabled: true
    config:
      logLevel: debgu
  localdns:
    enabled: true
    config:
      cacheSeconds: 99999
      readyTimeout: 1h
  externaldns:
    enabled: true
    config:
      policy: Sync
`)
	r := marina(t, home, nil, "config", "validate", "-o", "json")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res validateResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.Path+" @ "+p.Where+": "+p.Message)
	}
	want := []string{
		"plugins.registries.config.logLevel @ " + path + ":5:7: must be one of error, warn, info, debug, got \"debgu\"; did you mean \"debug\"? (plugin registries)",
		"plugins.localdns.config.cacheSeconds @ " + path + ":9:7: must be at most 3600, got 99999 (plugin localdns)",
		"plugins.localdns.config.readyTimeout @ " + path + ":10:7: must be at most 10m0s, got 1h (plugin localdns)",
		"plugins.externaldns.config.policy @ " + path + ":14:7: must be one of sync, upsert-only, create-only, got \"Sync\"; did you mean \"sync\"? (values are case-sensitive) (plugin externaldns)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s\n(%s)", strings.Join(got, "\n"), strings.Join(want, "\n"), r.stderr)
	}
}

// TestConfigValidateLargePluginConfig: a plugin config section over the node
// limit used to be dropped and the file called valid.
func TestConfigValidateLargePluginConfig(t *testing.T) {
	home := t.TempDir()
	var b strings.Builder
	b.WriteString("plugins:\n  metallb:\n    enabled: false\n    config:\n      items: [")
	b.WriteString(strings.Repeat("a,", 100100)) // 200 KB, far below the size limit
	b.WriteString("a]\n")
	path := writeConfigFile(t, home, b.String())
	r := marina(t, home, nil, "config", "validate")
	if r.code != 2 || !strings.Contains(r.stderr, "more than 100000 YAML nodes") || !strings.Contains(r.stderr, path+":") {
		t.Fatalf("exit %d\n%.2000s", r.code, r.stderr)
	}
}

// TestConfigValidateSecondDocument: a second document used to be dropped.
func TestConfigValidateSecondDocument(t *testing.T) {
	home := t.TempDir()
	path := writeConfigFile(t, home, "vm:\n  cpus: 4\n---\nvm:\n  cpus: 0\n")
	r := marina(t, home, nil, "config", "validate")
	if r.code != 2 || !strings.Contains(r.stderr, "second YAML document starts at line 3") || !strings.Contains(r.stderr, path+":3:1") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}

// TestUserFilesAreBounded: a device, a named pipe or an oversized file
// given as the config file or a Fleet manifest is refused at once (exit 2),
// never read until memory runs out (-c /dev/zero was OOM-killed at 23 GB).
func TestUserFilesAreBounded(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5 << 20); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		args  []string
		stdin []byte
		want  string
	}{
		{[]string{"-c", "/dev/zero", "config", "validate"}, nil, "the config file is a character device, not a regular file; give the path of a file (/dev/zero)"},
		{[]string{"-c", fifo, "config", "view"}, nil, "the config file is a named pipe (FIFO), not a regular file; give the path of a file (" + fifo + ")"},
		{[]string{"-c", big, "config", "validate"}, nil, "the config file is larger than 1 MiB"},
		{[]string{"-c", fifo, "plugin", "enable", "metallb"}, nil, "named pipe"},
		{[]string{"fleet", "create", "--dry-run", "-f", "/dev/zero"}, nil, "/dev/zero: is a character device"},
		{[]string{"fleet", "create", "--dry-run", "-f", fifo}, nil, "named pipe"},
		{[]string{"fleet", "create", "--dry-run", "-f", "-"}, bytes.Repeat([]byte("#\n"), 3<<20), "<stdin>: is larger than 1 MiB"},
	} {
		r := marinaBounded(t, home, tc.stdin, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("marina %v: exit %d, want 2 and %q\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
}
