package lima

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limatype"
)

// LimaModule is the module marina's Lima library (and the guest agent it
// builds) comes from.
const LimaModule = "github.com/lima-vm/lima/v2"

// hostCommand is a command marina runs on this machine: argv (never a shell
// line), in Dir ("" = the current directory), with Env added to the
// environment. Progress, when set, receives stderr line by line as it comes.
type hostCommand struct {
	Argv     []string
	Dir      string
	Env      []string
	Progress func(line string)
}

// hostRunner runs a hostCommand and returns its stdout and stderr; err is
// the exit error (or the failure to start it).
type hostRunner func(ctx context.Context, c hostCommand) (stdout, stderr []byte, err error)

// runHost is hostRunner on the real machine.
func runHost(ctx context.Context, c hostCommand) ([]byte, []byte, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Stdout = &out
	cmd.WaitDelay = 5 * time.Second
	if c.Progress == nil {
		cmd.Stderr = &errb
		err := cmd.Run()
		return out.Bytes(), errb.Bytes(), err
	}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(&errb, pw)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.Progress(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	_ = pw.Close()
	wg.Wait()
	return out.Bytes(), errb.Bytes(), err
}

// hostEnv is where the driver reads this machine beyond Lima: the commands
// it runs (codesign, brew, limactl, go) and the places it looks. The zero
// value is the real machine; tests set the fields.
type hostEnv struct {
	// run runs commands (nil: runHost).
	run hostRunner
	// exeDirs are the directories of the running program: as started
	// (os.Args[0], so a Homebrew symlink counts) and with symlinks
	// resolved (nil: selfDirs).
	exeDirs func() []string
	// prefixes are Homebrew's well-known prefixes, looked in after
	// `brew --prefix` (nil: /opt/homebrew and /usr/local).
	prefixes []string
	// lookPath finds a program (nil: exec.LookPath, then wellKnownGo for go).
	lookPath func(string) (string, error)
}

func (h hostEnv) runner() hostRunner {
	if h.run != nil {
		return h.run
	}
	return runHost
}

func (h hostEnv) dirsOfExe() []string {
	if h.exeDirs != nil {
		return h.exeDirs()
	}
	return selfDirs()
}

func (h hostEnv) homebrewPrefixes() []string {
	if h.prefixes != nil {
		return h.prefixes
	}
	return []string{"/opt/homebrew", "/usr/local"}
}

// wellKnownGo are where Go's installers put the go command, for a PATH
// that lacks it (a login shell's PATH is not always the one marina gets).
var wellKnownGo = []string{"/usr/local/go/bin/go", "/opt/homebrew/bin/go", "/usr/local/bin/go"}

func (h hostEnv) find(program string) (string, error) {
	if h.lookPath != nil {
		return h.lookPath(program)
	}
	p, err := exec.LookPath(program)
	if err == nil || program != "go" {
		return p, err
	}
	for _, c := range wellKnownGo {
		if fi, serr := os.Stat(c); serr == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", err
}

// selfDirs is where the running program lives, as Lima's usrlocal.SelfDirs
// computes it: the directory of os.Args[0] (a symlink is not resolved, so
// /opt/homebrew/bin/marina yields /opt/homebrew) and of os.Executable with
// symlinks resolved (the Cellar, or the release archive's bin/).
func selfDirs() []string {
	var dirs []string
	if os.Args[0] != "" {
		if p, err := exec.LookPath(os.Args[0]); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				dirs = append(dirs, filepath.Dir(abs))
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		if d := filepath.Dir(exe); len(dirs) == 0 || dirs[0] != d {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// guestAgentName is Lima's file name of the guest agent for a Linux VM of
// goarch: lima-guestagent.Linux-aarch64 or lima-guestagent.Linux-x86_64.
func guestAgentName(goarch string) string {
	return "lima-guestagent." + limatype.LINUX + "-" + limatype.NewArch(goarch)
}

// guestAgentPlace is one place the guest agent is looked for.
type guestAgentPlace struct {
	// what names the place in messages.
	what string
	// files are the candidates, in order (.gz before the plain file, as
	// Lima chooses).
	files []string
	// check, when set, is asked before a file found here is used: an
	// error says why this place's agent does not fit marina.
	check func(ctx context.Context) error
}

func inDir(what, dir, name string) guestAgentPlace {
	return guestAgentPlace{what: what, files: []string{filepath.Join(dir, name+".gz"), filepath.Join(dir, name)}}
}

// guestAgentPlaces yields the places to look, in order, each computed only
// when the previous ones had nothing (brew and limactl are only run when
// needed):
//
//  1. <dir of marina>/../share/lima — the release archive's and the
//     Homebrew formula's layout (bin/marina, share/lima/...);
//  2. ~/.marina/share/lima — marina's own (where it builds the agent);
//  3. Homebrew's Lima: $(brew --prefix)/share/lima, /opt/homebrew/share/lima,
//     /usr/local/share/lima;
//  4. where `limactl info` says (guestAgents.<arch>.location).
//
// The override (Driver.GuestAgent) comes before all of them.
func (d *Driver) guestAgentPlaces(ctx context.Context, yield func(guestAgentPlace) bool) {
	name := guestAgentName(d.goarch)
	seen := map[string]bool{}
	dir := func(what, dir string) bool {
		dir = filepath.Clean(dir)
		if seen[dir] {
			return true
		}
		seen[dir] = true
		return yield(inDir(what, dir, name))
	}
	for _, exeDir := range d.host.dirsOfExe() {
		if !dir("next to marina", filepath.Join(filepath.Dir(exeDir), "share", "lima")) {
			return
		}
	}
	if !dir("marina's share directory", d.shareLima()) {
		return
	}
	// Another Lima's agent is used only when that Lima's major version is
	// marina's: a host agent and a guest agent of different Lima releases
	// are not known to work together (Lima always ships them as a pair).
	brew := func(what, prefix string) bool {
		share := filepath.Clean(filepath.Join(prefix, "share", "lima"))
		if seen[share] {
			return true
		}
		seen[share] = true
		p := inDir(what, share, name)
		p.check = func(ctx context.Context) error { return d.limaAt(ctx, prefix) }
		return yield(p)
	}
	if prefix := d.brewPrefix(ctx); prefix != "" {
		if !brew("Homebrew (brew --prefix)", prefix) {
			return
		}
	}
	for _, p := range d.host.homebrewPrefixes() {
		if !brew("Homebrew", p) {
			return
		}
	}
	if loc, version := d.limactlGuestAgent(ctx); loc != "" && !seen[filepath.Dir(loc)] {
		yield(guestAgentPlace{what: "limactl info", files: []string{loc},
			check: func(context.Context) error { return compatibleLima(version) }})
	}
}

// limaAt checks the Lima installed under prefix (<prefix>/bin/limactl
// --version): nil when it is of marina's major version or cannot be told.
func (d *Driver) limaAt(ctx context.Context, prefix string) error {
	limactl := filepath.Join(prefix, "bin", "limactl")
	if _, err := os.Stat(limactl); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _, err := d.host.runner()(ctx, hostCommand{Argv: []string{limactl, "--version"}})
	if err != nil {
		return nil
	}
	// "limactl version 2.0.3"
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return nil
	}
	return compatibleLima(f[len(f)-1])
}

// compatibleLima accepts a Lima version of marina's major version (or an
// unknown one, "").
func compatibleLima(version string) error {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	if v == "" {
		return nil
	}
	major, _, _ := strings.Cut(v, ".")
	want, _, _ := strings.Cut(strings.TrimPrefix(LimaVersion, "v"), ".")
	if major != want {
		return fmt.Errorf("from Lima %s; marina runs Lima %s and takes only a v%s.x guest agent", v, LimaVersion, want)
	}
	return nil
}

// brewPrefix is `brew --prefix`, or "" without Homebrew.
func (d *Driver) brewPrefix(ctx context.Context) string {
	brew, err := d.host.find("brew")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _, err := d.host.runner()(ctx, hostCommand{Argv: []string{brew, "--prefix"}})
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// limactlGuestAgent is the guest agent a Lima installation reports for the
// VM's architecture (`limactl info`), and that Lima's version; "" when none.
func (d *Driver) limactlGuestAgent(ctx context.Context) (location, version string) {
	limactl, err := d.host.find("limactl")
	if err != nil {
		return "", ""
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _, err := d.host.runner()(ctx, hostCommand{Argv: []string{limactl, "info"}})
	if err != nil {
		return "", ""
	}
	location, version, err = parseLimactlInfo(out, limatype.NewArch(d.goarch))
	if err != nil {
		return "", ""
	}
	return location, version
}

// limactlInfo is the part of `limactl info` marina reads (Lima's
// limainfo.LimaInfo, since Lima v1.1.0): the guest agent per architecture;
// the key of a Linux guest agent is the bare architecture.
type limactlInfo struct {
	Version     string `json:"version"`
	GuestAgents map[string]struct {
		Location string `json:"location"`
	} `json:"guestAgents"`
}

// parseLimactlInfo returns the guest agent `limactl info` lists for arch
// (a Lima architecture: aarch64, x86_64), or "" when it lists none, and
// Lima's version.
func parseLimactlInfo(out []byte, arch limatype.Arch) (location, version string, err error) {
	var info limactlInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return "", "", fmt.Errorf("limactl info: %w", err)
	}
	return info.GuestAgents[arch].Location, info.Version, nil
}

// findGuestAgent returns the guest agent for the VM's architecture and the
// places it looked in (for messages); path is "" when none has it.
func (d *Driver) findGuestAgent(ctx context.Context) (path string, looked []string) {
	if d.GuestAgent != "" {
		return d.GuestAgent, nil
	}
	d.guestAgentPlaces(ctx, func(p guestAgentPlace) bool {
		for _, f := range p.files {
			if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if p.check != nil {
				if err := p.check(ctx); err != nil {
					looked = append(looked, p.what+": "+f+" (not used: "+err.Error()+")")
					return true
				}
			}
			path = f
			return false
		}
		looked = append(looked, p.what+": "+filepath.Dir(p.files[0]))
		return true
	})
	return path, looked
}

// ensureGuestAgent makes sure a guest agent is there before a start: the
// override must exist; otherwise it is looked up (findGuestAgent) and, as
// a last resort, built with the local Go toolchain into ~/.marina/share/lima.
// What it found or built is what the start then uses (guestAgentPath), so
// the places are not searched again.
func (d *Driver) ensureGuestAgent(ctx context.Context, say func(string)) error {
	if say == nil {
		say = func(string) {}
	}
	name := guestAgentName(d.goarch)
	if d.GuestAgent != "" {
		if _, err := os.Stat(d.GuestAgent); err != nil {
			return fmt.Errorf("the Lima guest agent %s: %w", d.GuestAgent, err)
		}
		return nil
	}
	path, looked := d.findGuestAgent(ctx)
	if path != "" {
		d.guestAgent = path
		return nil
	}
	goBin, err := d.host.find("go")
	if err != nil {
		return fmt.Errorf("the Lima guest agent %s is not installed (marina looked in %s) and there is no Go toolchain to build it. "+
			"Install marina's release archive (it ships share/lima/%s.gz beside bin/marina) or its Homebrew formula; "+
			"or install Go (https://go.dev/dl/) and run `marina up` again, which builds it into %s",
			name, strings.Join(looked, "; "), name, d.shareLima())
	}
	out := filepath.Join(d.shareLima(), name)
	say(fmt.Sprintf("Lima's guest agent %s is not installed: building it from %s@%s with %s (once; about a minute)",
		name, LimaModule, LimaVersion, goBin))
	start := time.Now()
	if err := buildGuestAgent(ctx, d.host.runner(), goBin, d.goarch, out, say); err != nil {
		return fmt.Errorf("the Lima guest agent %s is not installed (marina looked in %s) and building it failed: %w. "+
			"Install marina's release archive or Homebrew formula instead (they ship it)", name, strings.Join(looked, "; "), err)
	}
	say(fmt.Sprintf("built %s in %s", out, time.Since(start).Round(time.Second)))
	d.guestAgent = out
	return nil
}

// BuildGuestAgent builds Lima's guest agent for a Linux VM of goarch (arm64
// or amd64) from the Lima module marina pins (LimaModule@LimaVersion, from
// the Go module cache or proxy) with the Go toolchain goBin, and writes it
// to out. progress (may be nil) receives the build's progress lines.
func BuildGuestAgent(ctx context.Context, goBin, goarch, out string, progress func(string)) error {
	return buildGuestAgent(ctx, runHost, goBin, goarch, out, progress)
}

// limaModuleDirArgv asks the go command for the pinned Lima module's
// directory in the module cache (downloading it when missing).
func limaModuleDirArgv(goBin string) []string {
	return []string{goBin, "mod", "download", "-json", LimaModule + "@" + LimaVersion}
}

// guestAgentBuild is the build command: run in the Lima module's directory,
// as Lima's Makefile builds its guest agents (CGO_ENABLED=0, stripped,
// version stamped), with go.mod and go.sum as Lima pinned them.
func guestAgentBuild(goBin, moduleDir, goarch, out string) hostCommand {
	return hostCommand{
		Argv: []string{goBin, "build", "-mod=readonly", "-trimpath",
			"-ldflags=-s -w -X " + LimaModule + "/pkg/version.Version=" + LimaVersion,
			"-o", out, "./cmd/lima-guestagent"},
		Dir: moduleDir,
		// GOFLAGS and GOWORK are cleared: a user's -mod=vendor or go.work
		// must not apply to a build in the module cache.
		Env: []string{"GOOS=linux", "GOARCH=" + goarch, "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off"},
	}
}

func buildGuestAgent(ctx context.Context, run hostRunner, goBin, goarch, out string, progress func(string)) error {
	say := func(s string) {
		if progress != nil {
			progress(s)
		}
	}
	switch goarch {
	case "arm64", "amd64":
	default:
		return fmt.Errorf("no Lima guest agent for a %s VM: marina's VMs are arm64 or amd64", goarch)
	}
	// Outside any module: `go mod download mod@version` then works alike
	// from every directory.
	tmpDir := os.TempDir()
	stdout, stderr, err := run(ctx, hostCommand{Argv: limaModuleDirArgv(goBin), Dir: tmpDir, Env: []string{"GOFLAGS=", "GOWORK=off"}})
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(stdout, &mod); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || mod.Error != "" || mod.Dir == "" {
		return fmt.Errorf("%s: %s", strings.Join(limaModuleDirArgv(goBin), " "), cmdDetail(err, mod.Error, stderr))
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".building"
	defer os.Remove(tmp)
	c := guestAgentBuild(goBin, mod.Dir, goarch, tmp)
	c.Progress = func(line string) {
		if strings.HasPrefix(line, "go: downloading ") {
			say(line)
		}
	}
	say("GOOS=linux GOARCH=" + goarch + " CGO_ENABLED=0 go build ./cmd/lima-guestagent in " + mod.Dir)
	if _, stderr, err := run(ctx, c); err != nil {
		return fmt.Errorf("%s (in %s): %s", strings.Join(c.Argv, " "), mod.Dir, cmdDetail(err, "", stderr))
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// cmdDetail is the most telling part of a failed command: its error
// message, else the end of its stderr, else the exit error.
func cmdDetail(err error, msg string, stderr []byte) string {
	if msg != "" {
		return msg
	}
	if s := strings.TrimSpace(string(stderr)); s != "" {
		if lines := strings.Split(s, "\n"); len(lines) > 15 {
			s = "...\n" + strings.Join(lines[len(lines)-15:], "\n")
		}
		return s
	}
	if err == nil {
		return "no module directory reported"
	}
	return err.Error()
}
