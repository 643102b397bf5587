package lima

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limainfo"
	"github.com/lima-vm/lima/v2/pkg/limatype"
)

// hermeticHost is a hostEnv that reads nothing of this machine: marina
// lives in <root>/exe/bin, Homebrew's prefixes are under root, no program
// is installed (brew, limactl, go), and the one command that runs is
// codesign, which reports marina signed with the virtualization
// entitlement.
func hermeticHost(t *testing.T, root string) hostEnv {
	return hostEnv{
		exeDirs:  func() []string { return []string{filepath.Join(root, "exe", "bin")} },
		prefixes: []string{filepath.Join(root, "opt", "homebrew"), filepath.Join(root, "usr", "local")},
		lookPath: func(p string) (string, error) { return "", &exec.Error{Name: p, Err: exec.ErrNotFound} },
		run: func(ctx context.Context, c hostCommand) ([]byte, []byte, error) {
			if len(c.Argv) > 0 && c.Argv[0] == "codesign" {
				b, err := os.ReadFile(filepath.Join("testdata", "codesign", "xml-limactl.stdout"))
				return b, nil, err
			}
			t.Errorf("ran %q on a hermetic host", c.Argv)
			return nil, nil, errors.New("not on a hermetic host")
		},
	}
}

// fakeFile creates path (and its directory) and returns it.
func fakeFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGuestAgentLookupOrder puts the agent in every place and takes them
// away one by one, highest priority first: each time the next place wins,
// and brew and limactl run only once the places before them are empty.
func TestGuestAgentLookupOrder(t *testing.T) {
	d, _ := fakeDriver(t, nil)
	root := d.home
	name := "lima-guestagent.Linux-aarch64"
	brewPrefix := filepath.Join(root, "brew-prefix")
	limactlLoc := filepath.Join(root, "lima-install", "share", "lima", name+".gz")
	var ran []string
	d.host.lookPath = func(p string) (string, error) {
		switch p {
		case "brew", "limactl":
			return "/fake/bin/" + p, nil
		}
		return "", exec.ErrNotFound
	}
	d.host.run = func(ctx context.Context, c hostCommand) ([]byte, []byte, error) {
		ran = append(ran, strings.Join(c.Argv, " "))
		switch strings.Join(c.Argv, " ") {
		case "/fake/bin/brew --prefix":
			return []byte(brewPrefix + "\n"), nil, nil
		case "/fake/bin/limactl info":
			b, err := json.Marshal(limainfo.LimaInfo{Version: "2.2.0",
				GuestAgents: map[limatype.Arch]limainfo.GuestAgent{limatype.AARCH64: {Location: limactlLoc}}})
			return b, nil, err
		}
		return nil, nil, errors.New("unexpected command")
	}
	override := fakeFile(t, filepath.Join(root, "override", name))
	places := []string{
		fakeFile(t, filepath.Join(root, "exe", "share", "lima", name+".gz")),
		fakeFile(t, filepath.Join(root, "exe", "share", "lima", name)),
		fakeFile(t, filepath.Join(root, ".marina", "share", "lima", name)),
		fakeFile(t, filepath.Join(brewPrefix, "share", "lima", name+".gz")),
		fakeFile(t, filepath.Join(root, "opt", "homebrew", "share", "lima", name)),
		fakeFile(t, filepath.Join(root, "usr", "local", "share", "lima", name+".gz")),
		fakeFile(t, limactlLoc),
	}
	// An agent for the other architecture is never taken.
	fakeFile(t, filepath.Join(root, ".marina", "share", "lima", "lima-guestagent.Linux-x86_64"))

	d.GuestAgent = override
	if got := d.guestAgentPath(); got != override {
		t.Fatalf("with an override: %q", got)
	}
	d.GuestAgent = ""
	for i, want := range places {
		ran = nil
		if got := d.guestAgentPath(); got != want {
			t.Fatalf("step %d: found %q, want %q", i, got, want)
		}
		wantRan := []string{}
		if i >= 3 {
			wantRan = append(wantRan, "/fake/bin/brew --prefix")
		}
		if i >= 6 {
			wantRan = append(wantRan, "/fake/bin/limactl info")
		}
		if !reflect.DeepEqual(append([]string{}, ran...), wantRan) {
			t.Errorf("step %d: ran %q, want %q", i, ran, wantRan)
		}
		if err := os.Remove(want); err != nil {
			t.Fatal(err)
		}
	}
	got, looked := d.findGuestAgent(context.Background())
	if got != "" {
		t.Fatalf("found %q with every place empty", got)
	}
	wantLooked := []string{
		"next to marina: " + filepath.Join(root, "exe", "share", "lima"),
		"marina's share directory: " + filepath.Join(root, ".marina", "share", "lima"),
		"Homebrew (brew --prefix): " + filepath.Join(brewPrefix, "share", "lima"),
		"Homebrew: " + filepath.Join(root, "opt", "homebrew", "share", "lima"),
		"Homebrew: " + filepath.Join(root, "usr", "local", "share", "lima"),
		"limactl info: " + filepath.Dir(limactlLoc),
	}
	if !reflect.DeepEqual(looked, wantLooked) {
		t.Errorf("looked in\n%q\nwant\n%q", looked, wantLooked)
	}
}

// TestGuestAgentOfAnotherLima: Homebrew's or limactl's agent is taken
// only from a Lima of marina's major version.
func TestGuestAgentOfAnotherLima(t *testing.T) {
	d, _ := fakeDriver(t, nil)
	d.GuestAgent = ""
	root := d.home
	name := "lima-guestagent.Linux-aarch64"
	homebrew := filepath.Join(root, "opt", "homebrew")
	agent := fakeFile(t, filepath.Join(homebrew, "share", "lima", name+".gz"))
	fakeFile(t, filepath.Join(homebrew, "bin", "limactl"))
	elsewhere := fakeFile(t, filepath.Join(root, "lima-1", "share", "lima", name))
	brewVersion, infoVersion := "1.0.3", "v1.2.0"
	d.host.lookPath = func(p string) (string, error) {
		if p == "limactl" {
			return "/fake/bin/limactl", nil
		}
		return "", exec.ErrNotFound
	}
	d.host.run = func(ctx context.Context, c hostCommand) ([]byte, []byte, error) {
		switch strings.Join(c.Argv, " ") {
		case filepath.Join(homebrew, "bin", "limactl") + " --version":
			return []byte("limactl version " + brewVersion + "\n"), nil, nil
		case "/fake/bin/limactl info":
			b, err := json.Marshal(limainfo.LimaInfo{Version: infoVersion,
				GuestAgents: map[limatype.Arch]limainfo.GuestAgent{limatype.AARCH64: {Location: elsewhere}}})
			return b, nil, err
		}
		t.Errorf("ran %q", c.Argv)
		return nil, nil, errors.New("unexpected")
	}
	got, looked := d.findGuestAgent(context.Background())
	if got != "" {
		t.Fatalf("took %q from Lima 1.x", got)
	}
	joined := strings.Join(looked, "\n")
	for _, want := range []string{
		"Homebrew: " + agent + " (not used: from Lima 1.0.3; marina runs Lima v2.2.0 and takes only a v2.x guest agent)",
		"limactl info: " + elsewhere + " (not used: from Lima 1.2.0;",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("looked lacks %q:\n%s", want, joined)
		}
	}
	// The message of a failed start says so.
	err := d.ensureGuestAgent(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "not used: from Lima 1.0.3") {
		t.Errorf("ensureGuestAgent = %v", err)
	}
	// Same major version: taken.
	infoVersion = "v2.0.1"
	if got, _ := d.findGuestAgent(context.Background()); got != elsewhere {
		t.Errorf("limactl info of Lima 2.0.1: %q", got)
	}
	brewVersion = "2.1.0"
	if got, _ := d.findGuestAgent(context.Background()); got != agent {
		t.Errorf("Homebrew's Lima 2.1.0: %q", got)
	}
}

func TestCompatibleLima(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "2.2.0": true, "v2.0.0-rc.1": true, "2": true, "1.2.0": false, "v0.23.2": false, "3.0.0": false} {
		if err := compatibleLima(v); (err == nil) != ok {
			t.Errorf("compatibleLima(%q) = %v", v, err)
		}
	}
}

// TestParseLimactlInfo reads what Lima's own type (limainfo.LimaInfo, which
// `limactl info` prints) marshals to.
func TestParseLimactlInfo(t *testing.T) {
	b, err := json.Marshal(limainfo.LimaInfo{Version: "2.2.0", GuestAgents: map[limatype.Arch]limainfo.GuestAgent{
		limatype.AARCH64: {Location: "/opt/homebrew/share/lima/lima-guestagent.Linux-aarch64.gz"},
		"Darwin-aarch64": {Location: "/opt/homebrew/share/lima/lima-guestagent.Darwin-aarch64.gz"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, v, err := parseLimactlInfo(b, limatype.AARCH64); err != nil || got != "/opt/homebrew/share/lima/lima-guestagent.Linux-aarch64.gz" || v != "2.2.0" {
		t.Errorf("aarch64: %q, %q, %v", got, v, err)
	}
	if got, _, err := parseLimactlInfo(b, limatype.X8664); err != nil || got != "" {
		t.Errorf("x86_64: %q, %v", got, err)
	}
	// Before Lima v1.1.0 there was no guestAgents field.
	if got, v, err := parseLimactlInfo([]byte(`{"version":"0.23.2","vmTypes":["qemu","vz"]}`), limatype.AARCH64); err != nil || got != "" || v != "0.23.2" {
		t.Errorf("old limactl: %q, %q, %v", got, v, err)
	}
	if _, _, err := parseLimactlInfo([]byte("limactl: unknown command"), limatype.AARCH64); err == nil {
		t.Error("garbage parsed")
	}
}

// buildFake stands in for the go command: `go mod download -json` reports
// modDir (or modErr), `go build -o OUT` writes OUT after two progress lines
// (or fails with buildErr).
type buildFake struct {
	t        *testing.T
	modDir   string
	modErr   string
	buildErr string
	cmds     []hostCommand
}

func (b *buildFake) run(ctx context.Context, c hostCommand) ([]byte, []byte, error) {
	b.cmds = append(b.cmds, c)
	switch {
	case len(c.Argv) > 2 && c.Argv[1] == "mod":
		out, _ := json.Marshal(map[string]string{"Path": LimaModule, "Version": LimaVersion, "Dir": b.modDir, "Error": b.modErr})
		if b.modErr != "" {
			return out, nil, &exec.ExitError{}
		}
		return out, nil, nil
	case len(c.Argv) > 2 && c.Argv[1] == "build":
		c.Progress("go: downloading github.com/mdlayher/vsock v1.3.0")
		c.Progress("some compiler chatter")
		if b.buildErr != "" {
			return nil, []byte("go: downloading x\n" + b.buildErr + "\n"), &exec.ExitError{}
		}
		out := c.Argv[slices.Index(c.Argv, "-o")+1]
		return nil, nil, os.WriteFile(out, []byte("\x7fELF"), 0o755)
	}
	b.t.Errorf("unexpected command %q", c.Argv)
	return nil, nil, errors.New("unexpected")
}

func TestEnsureGuestAgentBuilds(t *testing.T) {
	d, _ := fakeDriver(t, nil)
	d.GuestAgent = ""
	d.goarch = "arm64"
	fake := &buildFake{t: t, modDir: "/root/go/pkg/mod/github.com/lima-vm/lima/v2@v2.2.0"}
	d.host.run = fake.run
	d.host.lookPath = func(p string) (string, error) {
		if p == "go" {
			return "/usr/local/go/bin/go", nil
		}
		return "", exec.ErrNotFound
	}
	var lines []string
	if err := d.ensureGuestAgent(context.Background(), func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(d.home, ".marina", "share", "lima", "lima-guestagent.Linux-aarch64")
	if len(fake.cmds) != 2 {
		t.Fatalf("ran %d commands: %+v", len(fake.cmds), fake.cmds)
	}
	mod, build := fake.cmds[0], fake.cmds[1]
	if want := []string{"/usr/local/go/bin/go", "mod", "download", "-json", "github.com/lima-vm/lima/v2@v2.2.0"}; !reflect.DeepEqual(mod.Argv, want) {
		t.Errorf("mod download argv %q, want %q", mod.Argv, want)
	}
	wantBuild := []string{"/usr/local/go/bin/go", "build", "-mod=readonly", "-trimpath",
		"-ldflags=-s -w -X github.com/lima-vm/lima/v2/pkg/version.Version=v2.2.0",
		"-o", out + ".building", "./cmd/lima-guestagent"}
	if !reflect.DeepEqual(build.Argv, wantBuild) {
		t.Errorf("build argv\n%q\nwant\n%q", build.Argv, wantBuild)
	}
	if build.Dir != fake.modDir {
		t.Errorf("build dir %q, want the module's %q", build.Dir, fake.modDir)
	}
	for _, kv := range []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS="} {
		if !slices.Contains(build.Env, kv) {
			t.Errorf("build env %q lacks %s", build.Env, kv)
		}
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "\x7fELF" {
		t.Errorf("%s: %q, %v", out, b, err)
	}
	if _, err := os.Stat(out + ".building"); !os.IsNotExist(err) {
		t.Errorf("the temporary output is left: %v", err)
	}
	if got := d.guestAgentPath(); got != out {
		t.Errorf("after the build guestAgentPath = %q, want %q", got, out)
	}
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"is not installed: building it from github.com/lima-vm/lima/v2@v2.2.0 with /usr/local/go/bin/go",
		"go: downloading github.com/mdlayher/vsock v1.3.0", "built " + out} {
		if !strings.Contains(joined, want) {
			t.Errorf("progress lacks %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "compiler chatter") {
		t.Errorf("progress passes every stderr line:\n%s", joined)
	}

	// Found now: no second build.
	fake.cmds = nil
	if err := d.ensureGuestAgent(context.Background(), nil); err != nil || len(fake.cmds) != 0 {
		t.Errorf("second ensure: %v, ran %+v", err, fake.cmds)
	}
}

func TestEnsureGuestAgentFails(t *testing.T) {
	goFound := func(p string) (string, error) {
		if p == "go" {
			return "/usr/local/go/bin/go", nil
		}
		return "", exec.ErrNotFound
	}
	for _, tc := range []struct {
		name string
		edit func(d *Driver, f *buildFake)
		want []string
	}{
		{name: "override missing", edit: func(d *Driver, f *buildFake) { d.GuestAgent = filepath.Join(d.home, "nope") },
			want: []string{"nope: no such file"}},
		{name: "no go", want: []string{"there is no Go toolchain", "release archive", "https://go.dev/dl/",
			"next to marina: ", "marina's share directory: "}},
		{name: "module not downloadable", edit: func(d *Driver, f *buildFake) {
			d.host.lookPath = goFound
			f.modErr = "github.com/lima-vm/lima/v2@v2.2.0: proxy unreachable"
		}, want: []string{"building it failed", "go mod download -json github.com/lima-vm/lima/v2@v2.2.0: github.com/lima-vm/lima/v2@v2.2.0: proxy unreachable", "release archive"}},
		{name: "build fails", edit: func(d *Driver, f *buildFake) {
			d.host.lookPath = goFound
			f.buildErr = "cmd/lima-guestagent/main.go:1:1: boom"
		}, want: []string{"building it failed", "./cmd/lima-guestagent (in /mod/lima", "boom", "release archive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := fakeDriver(t, nil)
			d.GuestAgent = ""
			fake := &buildFake{t: t, modDir: "/mod/lima"}
			d.host.run = fake.run
			if tc.edit != nil {
				tc.edit(d, fake)
			}
			err := d.ensureGuestAgent(context.Background(), nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			entries, _ := os.ReadDir(d.shareLima())
			if len(entries) != 0 {
				t.Errorf("left in %s: %v", d.shareLima(), entries)
			}
		})
	}
}

// TestBuildGuestAgentReal builds Lima's guest agent for linux/amd64 from the
// pinned module with this machine's Go toolchain (the module cache, or the
// module proxy), as `marina up` does when no agent is installed.
func TestBuildGuestAgentReal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Lima's guest agent (about a minute the first time)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH (go test puts GOROOT/bin there): %v", err)
	}
	out := filepath.Join(t.TempDir(), "share", "lima", guestAgentName("amd64"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var lines []string
	start := time.Now()
	if err := BuildGuestAgent(ctx, goBin, "amd64", out, func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, strings.Join(lines, "\n"))
	}
	t.Logf("built %s in %s", out, time.Since(start).Round(time.Millisecond))
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
		t.Errorf("%s: machine %v class %v type %v, want a 64-bit x86-64 executable", out, f.Machine, f.Class, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (CGO_ENABLED=0 builds a static binary)", out)
		}
	}
	bi, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bi.Path != LimaModule+"/cmd/lima-guestagent" {
		t.Errorf("main package %q", bi.Path)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"GOOS": "linux", "GOARCH": "amd64", "CGO_ENABLED": "0"} {
		if settings[k] != v {
			t.Errorf("built with %s=%q, want %q", k, settings[k], v)
		}
	}
	if settings["-trimpath"] != "true" {
		t.Errorf("built without -trimpath: %v", settings)
	}
	// -trimpath keeps -ldflags out of the build info; the version stamp
	// shows when the agent runs (it can here: this is a linux/amd64 host).
	// Lima ships its agents 0644 (the host agent copies them into the VM).
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		if err := os.Chmod(out, 0o755); err != nil {
			t.Fatal(err)
		}
		v, err := exec.CommandContext(ctx, out, "--version").Output()
		if want := "lima-guestagent version " + strings.TrimPrefix(LimaVersion, "v"); err != nil || strings.TrimSpace(string(v)) != want {
			t.Errorf("%s --version = %q, %v; want %q", out, v, err, want)
		}
	}
	if _, err := os.Stat(out + ".building"); !os.IsNotExist(err) {
		t.Errorf("temporary output left: %v", err)
	}
}

// TestSelfDirs runs this test binary through a symlink, as Homebrew runs
// /opt/homebrew/bin/marina: the symlink's directory comes first (its
// ../share/lima is the prefix's), then the resolved executable's.
func TestSelfDirs(t *testing.T) {
	if os.Getenv("MARINA_TEST_SELFDIRS") == "1" {
		for _, d := range selfDirs() {
			fmt.Println("SELFDIR " + d)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "prefix", "bin", "marina")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "-test.run=^TestSelfDirs$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MARINA_TEST_SELFDIRS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var dirs []string
	for _, l := range strings.Split(string(out), "\n") {
		if d, ok := strings.CutPrefix(l, "SELFDIR "); ok {
			dirs = append(dirs, d)
		}
	}
	if want := []string{filepath.Dir(link), filepath.Dir(real)}; !reflect.DeepEqual(dirs, want) {
		t.Errorf("selfDirs through a symlink = %q, want %q", dirs, want)
	}
}
