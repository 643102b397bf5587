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
	"sort"
	"strings"
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
	// Log, if set, receives a line per step.
	Log func(format string, args ...any)
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
	Artifacts               []PackageArtifact
	// Sums is the SHA256SUMS file written beside the archives.
	Sums string
}

// Package builds a plugin's distributable: for each platform a static
// binary (CGO_ENABLED=0, -trimpath, -s -w) and an archive
// marina-plugin-NAME_VERSION_OS_ARCH.tar.gz holding it and a
// marina-plugin.json (name, version, protocol, the platform, the binary's
// sha256, hooks, description, config schema), which `marina plugin
// install` reads and checks; plus SHA256SUMS of the archives. The host
// build is launched once (Describe) to read what the manifest says. Nothing
// is written to Out unless every platform built.
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
	seen := map[Platform]bool{}
	var uniq []Platform
	for _, p := range platforms {
		if !seen[p] {
			seen[p] = true
			uniq = append(uniq, p)
		}
	}
	platforms = uniq
	log := o.Log
	if log == nil {
		log = func(string, ...any) {}
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

	build := func(p Platform, out string) error {
		ldflags := "-s -w"
		if o.Version != "" {
			ldflags += " -X main.version=" + o.Version
		}
		cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s in %s: %v\n%s", p, dir, err, strings.TrimSpace(stderr.String()))
		}
		log("built %s (%s)", p, time.Since(start).Round(100*time.Millisecond))
		return nil
	}

	// The host build describes the plugin.
	host := HostPlatform()
	hostBin := filepath.Join(stage, "host", "plugin")
	if err := build(host, hostBin); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	desc, err := o.Describe(dctx, hostBin)
	cancel()
	if err != nil {
		return nil, wrapError(ErrNotPlugin, fmt.Sprintf("the plugin built from %s did not describe itself: %v; is its main package calling sdk.Serve?", dir, err), err)
	}
	if err := checkDescription(desc, nil, nil, dir); err != nil {
		return nil, err
	}
	if o.Version != "" && desc.Version != o.Version {
		return nil, newError(ErrInvalid, fmt.Sprintf("built with -X main.version=%s, plugin %s reports version %s: its sdk.Info Version must be the package variable version (the scaffold's `var version`)", o.Version, desc.Name, desc.Version))
	}
	hooks := hookList(desc)
	res := &PackageResult{Name: desc.Name, Version: desc.Version, Protocol: desc.Protocol, Hooks: hooks}
	binName := BinaryPrefix + desc.Name

	type built struct {
		p        Platform
		archive  string
		sum, bin string
	}
	var outs []built
	for _, p := range platforms {
		bin := filepath.Join(stage, p.OS+"_"+p.Arch, binName)
		if p == host {
			if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
				return nil, err
			}
			if err := os.Rename(hostBin, bin); err != nil {
				return nil, err
			}
			hostBin = bin
		} else if err := build(p, bin); err != nil {
			return nil, err
		}
		binSum, err := hashFile(bin)
		if err != nil {
			return nil, err
		}
		m := SourceManifest{
			Name: desc.Name, Version: desc.Version, Protocol: desc.Protocol,
			Platforms: []string{p.String()}, Binary: binName,
			SHA256:      map[string]string{p.String(): binSum},
			Description: desc.Description, Hooks: hooks, ConfigSchema: desc.ConfigSchema,
		}
		manifest, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, err
		}
		archive := filepath.Join(stage, fmt.Sprintf("%s_%s_%s_%s.tar.gz", binName, desc.Version, p.OS, p.Arch))
		if err := writeArchive(archive, append(manifest, '\n'), bin, binName); err != nil {
			return nil, err
		}
		sum, err := hashFile(archive)
		if err != nil {
			return nil, err
		}
		outs = append(outs, built{p: p, archive: archive, sum: sum, bin: binSum})
	}

	// Every platform built: move the archives into Out, then SHA256SUMS.
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	var sums strings.Builder
	sort.Slice(outs, func(i, j int) bool { return outs[i].p.String() < outs[j].p.String() })
	for _, b := range outs {
		dst := filepath.Join(o.Out, filepath.Base(b.archive))
		if err := copyFile(b.archive, dst); err != nil {
			return nil, err
		}
		st, err := os.Stat(dst)
		if err != nil {
			return nil, err
		}
		art := PackageArtifact{Platform: b.p.String(), Path: dst, SHA256: b.sum, BinarySHA256: b.bin, Size: st.Size()}
		if o.SignKey != nil {
			art.Signature = dst + SignatureSuffix
			sig := pluginsign.Sign(o.SignKey, "sha256:"+b.sum)
			if err := os.WriteFile(art.Signature, append(sig.Marshal(), '\n'), 0o644); err != nil {
				return nil, err
			}
		} else if err := os.Remove(dst + SignatureSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err // a stale signature of an earlier build would not match
		}
		res.Artifacts = append(res.Artifacts, art)
		fmt.Fprintf(&sums, "%s  %s\n", b.sum, filepath.Base(b.archive))
	}
	res.Sums = filepath.Join(o.Out, "SHA256SUMS")
	if err := os.WriteFile(res.Sums+".tmp", []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(res.Sums+".tmp", res.Sums); err != nil {
		return nil, err
	}
	return res, nil
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

// copyFile copies src to dst through a temporary file renamed into place.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// hookList is d's hooks as strings (for callers outside this package).
func hookList(d *sdk.Description) []string {
	out := make([]string, len(d.Hooks))
	for i, h := range d.Hooks {
		out[i] = string(h)
	}
	return out
}
