package pluginstore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// DefaultPackagePlatforms are the platforms `marina plugin package` builds
// for unless told otherwise: the Macs marina runs on and Linux hosts.
var DefaultPackagePlatforms = []Platform{
	{OS: "darwin", Arch: "arm64"}, {OS: "darwin", Arch: "amd64"},
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
}

// DefaultPackageJobs is how many platforms Package builds at once unless
// told otherwise: half this machine's CPUs, at least 1. go build already
// compiles the packages of one build in parallel (-p, default one per
// CPU), so more builds than CPUs only compete; builds side by side fill
// the stretches where one build cannot use every core (the link, the
// narrow parts of the package graph) without each compiler getting less
// than about two cores, or the builds' memory adding up on a small machine.
func DefaultPackageJobs() int { return max(1, runtime.NumCPU()/2) }

// PackageOptions say what Package builds.
type PackageOptions struct {
	// Dir is the plugin's main package (a directory of its Go module).
	Dir string
	// Out is where the archives and SHA256SUMS are written (created if
	// missing); an archive already there with the same name is replaced.
	Out string
	// Platforms to build for (DefaultPackagePlatforms when empty). The
	// host's platform is always built, to describe the plugin.
	Platforms []Platform
	// Version, if set, is stamped with -ldflags -X main.version=VERSION
	// (the scaffold's convention) and must be what the plugin reports.
	Version string
	// Describe launches the host build once to read its description.
	Describe Describer
	// SignKey, if set, signs each archive: ARCHIVE.sig beside it (which
	// install reads, and publish puts on the registry).
	SignKey ed25519.PrivateKey
	// Go is the go command (default "go" from PATH).
	Go string
	// Jobs is how many platforms are built at once: 0 means
	// DefaultPackageJobs(); it is cut to runtime.NumCPU() and to the
	// number of builds.
	Jobs int
	// Progress, if set, is told as each build starts and ends. It is
	// called from the building goroutines, concurrently.
	Progress func(PackageEvent)
	// Log, if set and Progress is not, receives the events as plain
	// lines (PackageEvent.String).
	Log func(format string, args ...any)
}

// PackagePhase is where one platform's build is.
type PackagePhase string

// The phases of a build, as PackageEvent reports them. A build ends with
// exactly one of built, failed, cancelled (stopped because another build
// failed, the description was refused, or the context ended) or not-run
// (never started, for the same reasons).
const (
	PackageBuilding  PackagePhase = "building"
	PackageBuilt     PackagePhase = "built"
	PackageFailed    PackagePhase = "failed"
	PackageCancelled PackagePhase = "cancelled"
	PackageNotRun    PackagePhase = "not-run"
)

// PackageEvent is one step of one platform's build.
type PackageEvent struct {
	Platform Platform
	Phase    PackagePhase
	// DescribeOnly: this machine's platform, not among those packaged,
	// built only to read the plugin's description.
	DescribeOnly bool
	// Index is the build's place (1-based, in starting order) among Total.
	Index, Total int
	// Elapsed is the build's time so far (built, failed, cancelled).
	Elapsed time.Duration
	// Size is the binary's size in bytes (built).
	Size int64
}

// Name is the build's name in progress output: the platform, and why it
// is built when only to describe the plugin.
func (e PackageEvent) Name() string {
	if e.DescribeOnly {
		return e.Platform.String() + " for the plugin's description"
	}
	return e.Platform.String()
}

// String is the event as one plain line: "building linux/arm64 …",
// "built linux/arm64 in 41s (24.8 MB)", "linux/arm64 FAILED after 3.2s",
// "linux/arm64 cancelled after 1.1s", "linux/arm64 not built".
func (e PackageEvent) String() string {
	switch e.Phase {
	case PackageBuilding:
		return "building " + e.Name() + " …"
	case PackageBuilt:
		return fmt.Sprintf("built %s in %s (%.1f MB)", e.Name(), FormatElapsed(e.Elapsed), float64(e.Size)/1e6)
	case PackageFailed:
		return e.Name() + " FAILED after " + FormatElapsed(e.Elapsed)
	case PackageCancelled:
		return e.Name() + " cancelled after " + FormatElapsed(e.Elapsed)
	case PackageNotRun:
		return e.Name() + " not built"
	}
	return e.Name() + " " + string(e.Phase)
}

// FormatElapsed renders a build's time compactly: 850ms, 41.3s, 4m32s.
func FormatElapsed(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// PackageArtifact is one archive Package wrote.
type PackageArtifact struct {
	Platform string `json:"platform"`
	Path     string `json:"path"`
	// SHA256 is the archive's digest; BinarySHA256 the binary's inside it
	// (also in the archive's marina-plugin.json).
	SHA256       string `json:"sha256"`
	BinarySHA256 string `json:"binarySha256"`
	Size         int64  `json:"size"`
	// Signature is the .sig written beside the archive ("" unsigned).
	Signature string `json:"signature,omitempty"`
}

// PackageResult is what Package built.
type PackageResult struct {
	Name, Version, Protocol string
	Hooks                   []string
	// Artifacts are sorted by platform.
	Artifacts []PackageArtifact
	// Sums is the SHA256SUMS file written beside the archives.
	Sums string
}

// packageBuild is one go build of a Package run, and what came of it.
type packageBuild struct {
	p            Platform
	describeOnly bool
	bin          string // the binary, in the staging directory
	binSum       string
	archive, sum string // the archive, in the staging directory, and its sha256
}

// Package builds a plugin's distributable: for each platform a static
// binary (CGO_ENABLED=0, -trimpath, -s -w) and an archive
// marina-plugin-NAME_VERSION_OS_ARCH.tar.gz holding it and a
// marina-plugin.json (name, version, protocol, the platform, the binary's
// sha256, hooks, description, config schema), which `marina plugin
// install` reads and checks; plus SHA256SUMS of the archives.
//
// The platforms are built concurrently, o.Jobs at once, this machine's
// first: as soon as it is built it is launched once (Describe) to read
// what the manifests say. The first build that fails (or a description
// that is refused) cancels the others and is the error, with the
// compiler's output. Everything is built and archived in a staging
// directory; nothing is written to Out unless every platform built, and
// then the archives, signatures and SHA256SUMS are copied beside their
// places under temporary names and renamed into place only once all are
// written.
func Package(ctx context.Context, o PackageOptions) (*PackageResult, error) {
	if o.Describe == nil {
		return nil, errors.New("package: no Describer configured (it launches the plugin once to read its description)")
	}
	goCmd := o.Go
	if goCmd == "" {
		goCmd = "go"
	}
	if _, err := exec.LookPath(goCmd); err != nil {
		return nil, fmt.Errorf("plugin package builds with the Go toolchain, and %q is not in PATH: install Go (go.dev/dl) and run it again", goCmd)
	}
	if o.Version != "" {
		if _, err := semver.StrictNewVersion(o.Version); err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("--version %q must be a semantic version such as 1.2.3 (no leading v)", o.Version))
		}
	}
	platforms := o.Platforms
	if len(platforms) == 0 {
		platforms = DefaultPackagePlatforms
	}
	progress := o.Progress
	if progress == nil {
		progress = func(PackageEvent) {}
		if o.Log != nil {
			progress = func(e PackageEvent) { o.Log("%s", e) }
		}
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, newError(ErrInvalid, fmt.Sprintf("plugin package: %s is not a directory (give the plugin's main package directory, e.g. .)", o.Dir))
	}
	stage, err := os.MkdirTemp("", "marina-package-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	// The go command's work directories go here too (GOTMPDIR): a build
	// cancelled midway leaves its work directory behind, and this one goes.
	gotmp := filepath.Join(stage, "gotmp")
	if err := os.Mkdir(gotmp, 0o700); err != nil {
		return nil, err
	}

	// This machine's platform first: its binary describes the plugin.
	host := HostPlatform()
	builds := []*packageBuild{{p: host, describeOnly: !slices.Contains(platforms, host)}}
	for _, p := range platforms {
		if !slices.ContainsFunc(builds, func(b *packageBuild) bool { return b.p == p }) {
			builds = append(builds, &packageBuild{p: p})
		}
	}
	for _, b := range builds {
		b.bin = filepath.Join(stage, b.p.OS+"_"+b.p.Arch, "plugin")
	}
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = DefaultPackageJobs()
	}
	jobs = min(jobs, runtime.NumCPU(), len(builds))

	var desc *sdk.Description // set by the host's build, read once all returned
	event := func(i int, phase PackagePhase) PackageEvent {
		return PackageEvent{Platform: builds[i].p, DescribeOnly: builds[i].describeOnly, Index: i + 1, Total: len(builds), Phase: phase}
	}
	starting := func(i int) { progress(event(i, PackageBuilding)) }
	started, err := runBounded(ctx, jobs, len(builds), starting, func(ctx context.Context, i int) error {
		b := builds[i]
		ev := event(i, PackageBuilding)
		start := time.Now()
		err := goBuild(ctx, goCmd, dir, gotmp, b.p, o.Version, b.bin)
		ev.Elapsed = time.Since(start)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(b.bin); err == nil {
				ev.Size = st.Size()
			}
		}
		switch {
		case err != nil && ctx.Err() != nil:
			ev.Phase = PackageCancelled
			progress(ev)
			return fmt.Errorf("go build for %s stopped: %w", b.p, context.Cause(ctx))
		case err != nil:
			ev.Phase = PackageFailed
			progress(ev)
			return err
		}
		ev.Phase = PackageBuilt
		progress(ev)
		if b.p != host {
			return nil
		}
		d, err := describe(ctx, o.Describe, b.bin, dir, o.Version)
		desc = d
		return err
	})
	for i := started; i < len(builds); i++ {
		progress(event(i, PackageNotRun))
	}
	if err != nil {
		return nil, err
	}
	hooks := hookList(desc)
	res := &PackageResult{Name: desc.Name, Version: desc.Version, Protocol: desc.Protocol, Hooks: hooks}
	binName := BinaryPrefix + desc.Name

	// Every platform built: an archive each, in the staging directory.
	var outs []*packageBuild
	for _, b := range builds {
		if !b.describeOnly {
			outs = append(outs, b)
		}
	}
	slices.SortFunc(outs, func(a, b *packageBuild) int { return strings.Compare(a.p.String(), b.p.String()) })
	if _, err := runBounded(ctx, jobs, len(outs), nil, func(_ context.Context, i int) error {
		b := outs[i]
		var err error
		if b.binSum, err = hashFile(b.bin); err != nil {
			return err
		}
		caps := append([]string{}, desc.Capabilities...) // [] for none: the manifest says so
		m := SourceManifest{
			Name: desc.Name, Version: desc.Version, Protocol: desc.Protocol,
			Platforms: []string{b.p.String()}, Binary: binName,
			SHA256:      map[string]string{b.p.String(): b.binSum},
			Description: desc.Description, Hooks: hooks, ConfigSchema: desc.ConfigSchema,
			Capabilities: &caps,
		}
		manifest, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		b.archive = filepath.Join(stage, fmt.Sprintf("%s_%s_%s_%s.tar.gz", binName, desc.Version, b.p.OS, b.p.Arch))
		if err := writeArchive(b.archive, append(manifest, '\n'), b.bin, binName); err != nil {
			return err
		}
		b.sum, err = hashFile(b.archive)
		return err
	}); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("plugin package stopped before writing %s: %w", o.Out, context.Cause(ctx))
	}

	// Into Out: every file is first written beside its place under a
	// temporary name; only when all are written are they renamed into
	// place, SHA256SUMS last. A failure before that removes the temporary
	// files and leaves Out as it was.
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	var (
		pending []string // temporary files not renamed yet
		stale   []string // signatures of an earlier build, which would not match
		sums    strings.Builder
	)
	defer func() {
		for _, tmp := range pending {
			os.Remove(tmp)
		}
	}()
	place := func(dst string, write func(io.Writer) error) error {
		tmp := dst + ".tmp"
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		pending = append(pending, tmp)
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	for _, b := range outs {
		dst := filepath.Join(o.Out, filepath.Base(b.archive))
		if err := place(dst, func(w io.Writer) error { return copyInto(w, b.archive) }); err != nil {
			return nil, err
		}
		st, err := os.Stat(b.archive)
		if err != nil {
			return nil, err
		}
		art := PackageArtifact{Platform: b.p.String(), Path: dst, SHA256: b.sum, BinarySHA256: b.binSum, Size: st.Size()}
		if o.SignKey != nil {
			art.Signature = dst + SignatureSuffix
			sig := pluginsign.Sign(o.SignKey, "sha256:"+b.sum)
			if err := place(art.Signature, func(w io.Writer) error {
				_, err := w.Write(append(sig.Marshal(), '\n'))
				return err
			}); err != nil {
				return nil, err
			}
		} else {
			stale = append(stale, dst+SignatureSuffix)
		}
		res.Artifacts = append(res.Artifacts, art)
		fmt.Fprintf(&sums, "%s  %s\n", b.sum, filepath.Base(b.archive))
	}
	res.Sums = filepath.Join(o.Out, "SHA256SUMS")
	if err := place(res.Sums, func(w io.Writer) error {
		_, err := io.WriteString(w, sums.String())
		return err
	}); err != nil {
		return nil, err
	}
	for len(pending) > 0 {
		tmp := pending[0]
		if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
			return nil, err
		}
		pending = pending[1:]
	}
	for _, sig := range stale {
		if err := os.Remove(sig); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return res, nil
}

// goBuild builds the plugin in dir for p into out, as a release is built:
// CGO_ENABLED=0, -trimpath, -ldflags "-s -w" (and -X main.version=VERSION
// when version is set). The error carries the compiler's output.
func goBuild(ctx context.Context, goCmd, dir, gotmp string, p Platform, version, out string) error {
	ldflags := "-s -w"
	if version != "" {
		ldflags += " -X main.version=" + version
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOTMPDIR="+gotmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Cancelled, the go command is killed; a compiler it started may run
	// on for a moment, holding stderr: Wait gives it this long to finish.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s in %s: %v\n%s", p, dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// describe launches the host build once, reads its description and checks
// it (and that it reports version, when set).
func describe(ctx context.Context, d Describer, bin, dir, version string) (*sdk.Description, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	desc, err := d(dctx, bin)
	cancel()
	if err != nil {
		return nil, wrapError(ErrNotPlugin, fmt.Sprintf("the plugin built from %s did not describe itself: %v; is its main package calling sdk.Serve?", dir, err), err)
	}
	if err := checkDescription(desc, nil, nil, dir); err != nil {
		return nil, err
	}
	if version != "" && desc.Version != version {
		return nil, newError(ErrInvalid, fmt.Sprintf("built with -X main.version=%s, plugin %s reports version %s: its sdk.Info Version must be the package variable version (the scaffold's `var version`)", version, desc.Name, desc.Version))
	}
	return desc, nil
}

// runBounded calls fn(ctx, i) for each i in [0, n), each in a goroutine of
// its own, at most jobs at once, starting them in order (starting, if set,
// is called with i just before, in the caller's goroutine, so in order).
// The first error cancels the context the others were given (its cause is
// that error), no further call starts, and once the running calls have
// returned it is returned. started is how many calls started: the indices
// from started on never ran.
func runBounded(ctx context.Context, jobs, n int, starting func(int), fn func(context.Context, int) error) (started int, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		slots = make(chan struct{}, max(jobs, 1))
	)
	for started < n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		i := started
		started++
		if starting != nil {
			starting(i)
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx) // cancelled from outside before a call failed
	}
	return started, first
}

// writeArchive writes a .tar.gz with marina-plugin.json and the binary,
// with fixed times and owners (the same inputs give the same archive).
func writeArchive(path string, manifest []byte, bin, binName string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	add := func(name string, mode int64, r io.Reader, size int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(SourceManifestFile, 0o644, bytes.NewReader(manifest), int64(len(manifest))); err != nil {
		return err
	}
	bf, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer bf.Close()
	st, err := bf.Stat()
	if err != nil {
		return err
	}
	if err := add(binName, 0o755, bf, st.Size()); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// copyInto copies the file src to w.
func copyInto(w io.Writer, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.Copy(w, in)
	return err
}

// hookList is d's hooks as strings (for callers outside this package).
func hookList(d *sdk.Description) []string {
	out := make([]string, len(d.Hooks))
	for i, h := range d.Hooks {
		out[i] = string(h)
	}
	return out
}
