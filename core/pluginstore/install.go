package pluginstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// InstallOptions tune Install.
type InstallOptions struct {
	// Version is a semver constraint the installed version must satisfy.
	// For an oci:// repository without a tag it picks the highest matching
	// semver tag (default: the highest release).
	Version string
	// SHA256 is the expected hex sha256 of what is fetched: the binary or
	// .tar.gz file (local or https), the OCI layer, or the binary of a
	// directory source. Required for https unless InsecureSkipChecksum.
	SHA256 string
	// InsecureSkipChecksum allows an https install without SHA256; the
	// install is recorded as such and `plugin list` shows it.
	InsecureSkipChecksum bool
	// Platform is the os/arch to install for; default this machine's. On a
	// Mac with Apple silicon "darwin/amd64" installs an Intel build to run
	// under Rosetta. The Describer must be able to run the binary.
	Platform string
	// Grant is asked, before anything is placed in the store, to grant the
	// capabilities the plugin declares that no installed version of it
	// declared (added; desc says what the plugin is); an error refuses the
	// install. nil refuses every such install with ErrNotGranted.
	Grant func(desc *sdk.Description, added []string) error
}

// sourceKind says how a source string is fetched.
type sourceKind int

const (
	srcFile sourceKind = iota
	srcDir
	srcHTTPS
	srcOCI
)

// classifySource decides what src is and returns the form to fetch: an
// absolute path, a URL without credentials, or the oci:// reference as
// given (an install records its repository, RepositoryOf, as Source).
func classifySource(src string) (sourceKind, string, error) {
	switch {
	case strings.TrimSpace(src) == "":
		// filepath.Abs("") is the working directory: never install that by accident.
		return 0, "", newError(ErrInvalid, "plugin source is empty; give a plugin binary, a directory or .tar.gz with a marina-plugin.json, an https:// URL or an oci:// reference (for the current directory, write .)")
	case strings.HasPrefix(src, "oci://"):
		return srcOCI, src, nil
	case strings.HasPrefix(src, "https://"):
		u, err := url.Parse(src)
		if err != nil || u.Host == "" {
			return 0, "", newError(ErrInvalid, fmt.Sprintf("plugin source %q is not a valid URL", src))
		}
		u.User = nil // never record credentials in the manifest or lock file
		return srcHTTPS, u.String(), nil
	case strings.HasPrefix(src, "http://"):
		return 0, "", newError(ErrInvalid, fmt.Sprintf("plugin source %s uses plain http; use its https:// URL (or download the file and install it from disk)", src))
	case strings.Contains(src, "://"):
		return 0, "", newError(ErrInvalid, fmt.Sprintf("plugin source %q: unsupported scheme; a source is a file, a directory, an https:// URL or an oci:// reference", src))
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return 0, "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, "", newError(ErrSourceNotFound, fmt.Sprintf("plugin source %s does not exist; a source is a file, a directory, an https:// URL or an oci:// reference", src))
		}
		return 0, "", fmt.Errorf("plugin source %s: %w", src, err)
	}
	switch {
	case st.IsDir():
		return srcDir, abs, nil
	case st.Mode().IsRegular():
		return srcFile, abs, nil
	}
	return 0, "", newError(ErrInvalid, fmt.Sprintf("plugin source %s is neither a regular file nor a directory", src))
}

// fetched is what a source left in the staging directory.
type fetched struct {
	binary       string          // the binary, inside the staging directory
	manifest     *SourceManifest // from a directory or archive, if any
	sourceDigest string          // "sha256:<hex>" of the artifact (see Installed.SourceDigest)
	// signature, if any, and the digest it must cover: the archive's
	// (a .tar.gz file and its .sig beside it; an OCI layer and the
	// signature annotation of its manifest).
	signature    *pluginsign.Signature
	signedDigest string
}

// Install installs the plugin at src: a binary file, a directory or .tar.gz
// with a marina-plugin.json, an https:// URL to a binary or .tar.gz, or an
// oci://host/repo[:tag|@sha256:...] reference. See the package
// documentation for the steps; nothing is visible in the store until all of
// them have passed. Installing an already installed version is a no-op when
// the binary is identical and an ErrVersionExists error otherwise.
func (s *Store) Install(ctx context.Context, src string, opts InstallOptions) (*Installed, error) {
	if s.describe == nil {
		return nil, errors.New("plugin store: no Describer configured (it launches a plugin to read its description)")
	}
	target := HostPlatform()
	if opts.Platform != "" {
		p, err := ParsePlatform(opts.Platform)
		if err != nil {
			return nil, err
		}
		target = p
	}
	want, err := parseSHA256(opts.SHA256)
	if err != nil {
		return nil, err
	}
	var constraint *semver.Constraints
	if opts.Version != "" {
		if constraint, err = semver.NewConstraint(opts.Version); err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("--version %q is not a semver constraint: %v; write e.g. \"^1.2\" or \"1.2.3\"", opts.Version, err))
		}
	}
	kind, source, err := classifySource(src)
	if err != nil {
		return nil, err
	}
	if kind == srcHTTPS && want == "" && !opts.InsecureSkipChecksum {
		return nil, newError(ErrChecksumRequired, fmt.Sprintf("installing from %s needs the expected checksum: pass --sha256 with the digest the publisher lists (e.g. in SHA256SUMS), or --insecure-skip-checksum to trust whatever the URL serves", source))
	}
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return nil, fmt.Errorf("plugin store %s: %w", s.root, err)
	}
	s.sweep()
	tmp, err := os.MkdirTemp(s.root, ".install-")
	if err != nil {
		return nil, fmt.Errorf("plugin store %s: %w", s.root, err)
	}
	defer os.RemoveAll(tmp)

	var f *fetched
	switch kind {
	case srcFile:
		f, err = s.fetchFile(source, tmp, target, want)
	case srcDir:
		f, err = s.fetchDir(source, tmp, target, want)
	case srcHTTPS:
		f, err = s.fetchURL(ctx, source, tmp, target, want)
	case srcOCI:
		f, err = s.fetchOCI(ctx, source, tmp, target, want, constraint)
	}
	if err != nil {
		return nil, err
	}
	if kind == srcOCI {
		// One spelling of an OCI source, however it was installed (by
		// name, by tag, by digest, by upgrade): the repository. The
		// version is the install's own; the trust decision and every
		// listing see the same string.
		source = RepositoryOf(source)
	}
	return s.installBinary(ctx, f, tmp, target, source, constraint, kind == srcHTTPS && want == "", opts.Grant)
}

// installBinary checks the fetched binary, describes it, and moves it into
// the store.
func (s *Store) installBinary(ctx context.Context, f *fetched, tmp string, target Platform, source string, constraint *semver.Constraints, insecure bool, grant func(*sdk.Description, []string) error) (*Installed, error) {
	head, err := readHead(f.binary)
	if err != nil {
		return nil, err
	}
	bkind, what := sniff(head)
	if bkind != kindELF && bkind != kindMachO && bkind != kindScript {
		return nil, newError(ErrNotPlugin, fmt.Sprintf("the plugin binary from %s is %s, not an executable", source, what))
	}
	if err := checkPlatform(f.binary, "the plugin binary from "+source, bkind, target); err != nil {
		return nil, err
	}
	if err := os.Chmod(f.binary, 0o755); err != nil {
		return nil, err
	}
	sum, err := hashFile(f.binary)
	if err != nil {
		return nil, err
	}
	if m := f.manifest; m != nil {
		if want, ok := m.SHA256[target.String()]; ok && want != sum {
			return nil, newError(ErrChecksum, fmt.Sprintf("the %s binary from %s has sha256 %s, but its %s says %s: the archive was altered or assembled wrong; nothing was installed",
				target, source, sum, SourceManifestFile, want))
		}
	}

	// The signature is checked before the binary runs at all (Describe
	// launches it): under enforce, nothing untrusted is executed.
	described := source
	if m := f.manifest; m != nil {
		described = m.Name + " " + m.Version + " from " + source
	}
	if err := s.refuseUntrusted(described, f.signature, f.signedDigest, source); err != nil {
		return nil, err
	}

	dctx, cancel := context.WithTimeout(ctx, s.describeTimeout())
	desc, err := s.describe(dctx, f.binary)
	cancel()
	if err != nil {
		return nil, wrapError(ErrNotPlugin, fmt.Sprintf("the plugin binary from %s did not describe itself: %v; is it a marina plugin (built with the marina SDK's sdk.Serve) for this platform?", source, err), err)
	}
	if err := checkDescription(desc, f.manifest, constraint, source); err != nil {
		return nil, err
	}

	if s.isBuiltin(desc.Name) {
		return nil, newError(ErrBuiltinName, fmt.Sprintf("the plugin binary from %s calls itself %s, the name of a plugin built into marina: the built-in always wins, so this plugin would never run. Rename it (sdk.Info Name) and rebuild; nothing was installed", source, desc.Name))
	}

	// What the plugin may ask for: the limits of pluginTrust, then the
	// user's consent to what it asks for anew.
	if err := s.refuseCapabilities(desc.Name+" "+desc.Version+" from "+source, desc, source); err != nil {
		return nil, err
	}
	if added := s.NewCapabilities(desc); len(added) > 0 {
		if grant == nil {
			return nil, newError(ErrNotGranted, fmt.Sprintf("plugin %s %s asks for capabilities %s, which nobody granted; nothing was installed", desc.Name, desc.Version, strings.Join(added, ", ")))
		}
		if err := grant(desc, added); err != nil {
			return nil, err
		}
	}

	inst := &Installed{
		Name: desc.Name, Version: desc.Version, Platform: target.String(),
		SHA256: sum, Source: source, SourceDigest: f.sourceDigest,
		InsecureSkipChecksum: insecure, InstalledAt: s.now(), Description: desc,
		Signature: f.signature, SignedDigest: f.signedDigest,
	}
	stage := filepath.Join(tmp, "stage")
	if err := os.Mkdir(stage, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(f.binary, filepath.Join(stage, BinaryPrefix+desc.Name)); err != nil {
		return nil, err
	}
	if err := syncFile(filepath.Join(stage, BinaryPrefix+desc.Name)); err != nil {
		return nil, err
	}
	if err := writeManifest(stage, inst); err != nil {
		return nil, err
	}
	placed, err := s.place(stage, inst, target)
	if err != nil {
		return nil, err
	}
	_ = s.putCache(sum, desc)
	return placed, nil
}

// checkDescription refuses a description that is malformed, disagrees with
// the source manifest or the --version constraint, or speaks a protocol this
// marina cannot.
func checkDescription(d *sdk.Description, m *SourceManifest, c *semver.Constraints, source string) error {
	if d == nil {
		return newError(ErrNotPlugin, fmt.Sprintf("the plugin binary from %s returned no description", source))
	}
	if !nameRE().MatchString(d.Name) {
		return newError(ErrInvalid, fmt.Sprintf("the plugin binary from %s calls itself %q, which is not a valid plugin name (lower-case letters, digits and '-')", source, d.Name))
	}
	v, err := semver.StrictNewVersion(d.Version)
	if err != nil {
		return newError(ErrInvalid, fmt.Sprintf("plugin %s from %s reports version %q, which is not a semantic version such as 1.2.3 (no leading v)", d.Name, source, d.Version))
	}
	if m != nil {
		if m.Name != d.Name || m.Version != d.Version {
			return newError(ErrInvalid, fmt.Sprintf("%s in %s says %s %s, but the binary describes itself as %s %s: fix the manifest or rebuild the binary",
				SourceManifestFile, source, m.Name, m.Version, d.Name, d.Version))
		}
		if len(m.Hooks) > 0 && strings.Join(m.Hooks, ",") != hookNames(d) {
			return newError(ErrInvalid, fmt.Sprintf("%s in %s lists hooks %s, but plugin %s %s implements %s: fix the manifest or rebuild the binary",
				SourceManifestFile, source, strings.Join(m.Hooks, ","), d.Name, d.Version, hookNames(d)))
		}
		if m.Capabilities != nil && !slices.Equal(*m.Capabilities, d.Capabilities) && !(len(*m.Capabilities) == 0 && len(d.Capabilities) == 0) {
			return newError(ErrInvalid, fmt.Sprintf("%s in %s lists capabilities [%s], but plugin %s %s declares [%s]: fix the manifest or rebuild the binary",
				SourceManifestFile, source, strings.Join(*m.Capabilities, ","), d.Name, d.Version, strings.Join(d.Capabilities, ",")))
		}
		if m.Protocol != "" && m.Protocol != d.Protocol {
			return newError(ErrInvalid, fmt.Sprintf("%s in %s says protocol %s, but plugin %s %s speaks protocol %s: fix the manifest",
				SourceManifestFile, source, m.Protocol, d.Name, d.Version, d.Protocol))
		}
	}
	if err := checkProtocol("plugin "+d.Name+" "+d.Version, d.Protocol); err != nil {
		return err
	}
	if c != nil {
		if ok, why := c.Validate(v); !ok {
			return newError(ErrNoMatch, fmt.Sprintf("plugin %s %s from %s does not satisfy --version %q: %v", d.Name, d.Version, source, c.String(), errors.Join(why...)))
		}
	}
	return nil
}

// hookNames lists d's hooks, comma-separated, in the SDK's order.
func hookNames(d *sdk.Description) string { return strings.Join(hookList(d), ",") }

// checkProtocol applies the protocol rule (same major, plugin minor at most
// this marina's minor) to what, e.g. "plugin acme 2.0.0".
func checkProtocol(what, protocol string) error {
	host := fmt.Sprintf("%d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor)
	major, minor, ok := parseProtocol(protocol)
	if !ok {
		return newError(ErrProtocol, fmt.Sprintf("%s reports protocol %q, which is not MAJOR.MINOR; this marina speaks protocol %s", what, protocol, host))
	}
	switch {
	case major == sdk.ProtocolMajor && minor <= sdk.ProtocolMinor:
		return nil
	case major == sdk.ProtocolMajor:
		return newError(ErrProtocol, fmt.Sprintf("%s speaks protocol %s; this marina speaks protocol %s — it needs a marina release that speaks protocol %d.%d or later (upgrade marina), or an older build of the plugin",
			what, protocol, host, major, minor))
	case major > sdk.ProtocolMajor:
		return newError(ErrProtocol, fmt.Sprintf("%s speaks protocol %s; this marina speaks protocol %s — it needs a marina release that speaks protocol %d.x",
			what, protocol, host, major))
	}
	return newError(ErrProtocol, fmt.Sprintf("%s speaks protocol %s; this marina speaks protocol %s — it needs an older marina release that speaks protocol %d.x, or a build of the plugin for protocol %d.x",
		what, protocol, host, major, sdk.ProtocolMajor))
}

func parseProtocol(p string) (major, minor int, ok bool) {
	if !protocolRE().MatchString(p) {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(p, ".")
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	return major, minor, err1 == nil && err2 == nil
}

// beforePlaceRename, when set by a test, runs just before place renames the
// staged directory into the store: it lets a test make another install win
// the race at exactly that point.
var beforePlaceRename func(final string)

// maxPlaceAttempts bounds the retries when concurrent installs or removes
// change the target directory under us.
const maxPlaceAttempts = 5

// place renames the staged platform directory into the store. If the version
// is already there: same digest and intact → no-op (the existing install is
// returned); same digest but damaged → the staged copy replaces it;
// different digest → ErrVersionExists.
func (s *Store) place(stage string, inst *Installed, p Platform) (*Installed, error) {
	final := s.platformDir(inst.Name, inst.Version, p)
	for range maxPlaceAttempts {
		existing, err := readInstall(final, inst.Name, inst.Version, p)
		switch {
		case err == nil:
			if existing.SHA256 != inst.SHA256 {
				return nil, newError(ErrVersionExists, fmt.Sprintf(
					"plugin %s %s (%s) is already installed from %s with sha256 %s; this build from %s has sha256 %s. An installed version is never modified in place; remove it first with `marina plugin remove %s@%s`",
					inst.Name, inst.Version, p, existing.Source, short(existing.SHA256), inst.Source, short(inst.SHA256), inst.Name, inst.Version))
			}
			if sum, err := hashFile(existing.Path); err == nil && sum == existing.SHA256 {
				return existing, nil
			}
			// Repair: the installed copy no longer matches its own manifest;
			// the staged build has the recorded digest, so it restores the
			// version rather than modifying it.
			trash, err := os.MkdirTemp(s.root, ".remove-")
			if err != nil {
				return nil, err
			}
			err = os.Rename(final, filepath.Join(trash, "v"))
			_ = os.RemoveAll(trash)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("replace damaged plugin %s %s: %w", inst.Name, inst.Version, err)
			}
			continue
		case errors.Is(err, fs.ErrNotExist):
			if _, serr := os.Stat(final); serr == nil {
				return nil, newError(ErrInvalid, fmt.Sprintf("%s exists but has no %s (was it changed by hand?); remove that directory and install again", final, ManifestFile))
			}
		default:
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			return nil, err
		}
		if beforePlaceRename != nil {
			beforePlaceRename(final)
		}
		err = os.Rename(stage, final)
		if err == nil {
			_ = syncDir(filepath.Dir(final))
			placed := *inst
			placed.Path = filepath.Join(final, BinaryPrefix+inst.Name)
			return &placed, nil
		}
		if !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("install plugin %s %s: %w", inst.Name, inst.Version, err)
		}
		// Another install won the race (exists) or a remove took the parent
		// away (not exist): look again.
	}
	return nil, fmt.Errorf("install plugin %s %s: %s kept changing during the install (concurrent installs or removes); try again", inst.Name, inst.Version, final)
}

// staleAfter is the age after which leftovers of interrupted installs and
// removes are deleted.
const staleAfter = 24 * time.Hour

// sweep deletes old .install-* and .remove-* directories left by crashes.
func (s *Store) sweep() {
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".install-") && !strings.HasPrefix(e.Name(), ".remove-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleAfter {
			_ = os.RemoveAll(filepath.Join(s.root, e.Name()))
		}
	}
}

// fetchFile copies a local binary or .tar.gz into the staging directory.
func (s *Store) fetchFile(source, tmp string, target Platform, want string) (*fetched, error) {
	r, err := os.Open(source)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	artifact := filepath.Join(tmp, "artifact")
	kind, sum, err := copyArtifact(r, artifact, s.maxBytes(), source, func(kind artifactKind, what string) error {
		if kind == kindUnknown {
			return newError(ErrNotPlugin, fmt.Sprintf("%s is %s, not a plugin binary or a .tar.gz archive", source, what))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkSum(source, sum, want); err != nil {
		return nil, err
	}
	f, err := s.unpack(artifact, kind, sum, tmp, target, source)
	if err != nil {
		return nil, err
	}
	if kind == kindGzip {
		f.signedDigest = "sha256:" + sum
		if f.signature, err = readSignatureFile(source + SignatureSuffix); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// fetchDir copies the binary of a plugin directory into the staging directory.
func (s *Store) fetchDir(source, tmp string, target Platform, want string) (*fetched, error) {
	m, bin, err := locate(source, target, source)
	if err != nil {
		return nil, err
	}
	r, err := os.Open(bin)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	artifact := filepath.Join(tmp, "artifact")
	_, sum, err := copyArtifact(r, artifact, s.maxBytes(), bin, binaryOnly(bin))
	if err != nil {
		return nil, err
	}
	if err := checkSum(bin, sum, want); err != nil {
		return nil, err
	}
	return &fetched{binary: artifact, manifest: m, sourceDigest: "sha256:" + sum}, nil
}

// unpack turns a fetched artifact into a binary: a binary is used as is, a
// .tar.gz is extracted and searched for its manifest and binary.
func (s *Store) unpack(artifact string, kind artifactKind, sum, tmp string, target Platform, label string) (*fetched, error) {
	if kind != kindGzip {
		return &fetched{binary: artifact, sourceDigest: "sha256:" + sum}, nil
	}
	dir := filepath.Join(tmp, "unpacked")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if err := extractTarGz(artifact, dir, s.maxBytes(), label); err != nil {
		return nil, err
	}
	m, bin, err := locate(dir, target, label)
	if err != nil {
		return nil, err
	}
	return &fetched{binary: bin, manifest: m, sourceDigest: "sha256:" + sum}, nil
}

func binaryOnly(label string) func(artifactKind, string) error {
	return func(kind artifactKind, what string) error {
		if kind == kindELF || kind == kindMachO || kind == kindScript {
			return nil
		}
		return newError(ErrNotPlugin, fmt.Sprintf("%s is %s, not a plugin binary", label, what))
	}
}

// checkSum compares an artifact's digest with the expected one, if any.
func checkSum(label, got, want string) error {
	if want == "" || got == want {
		return nil
	}
	return newError(ErrChecksum, fmt.Sprintf("checksum mismatch for %s: it has sha256 %s, expected %s; the file changed since the checksum was published, or --sha256 is wrong. Nothing was installed", label, got, want))
}

// copyArtifact copies at most max bytes of r to a new file dst. The leading
// bytes are classified and passed to check before anything is written, so a
// wrong kind of file (an HTML page) fails fast, before hashing. It returns
// the kind and hex sha256 of the content.
func copyArtifact(r io.Reader, dst string, max int64, label string, check func(artifactKind, string) error) (artifactKind, string, error) {
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, "", fmt.Errorf("read %s: %w", label, err)
	}
	head = head[:n]
	kind, what := sniff(head)
	if err := check(kind, what); err != nil {
		return 0, "", err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, "", err
	}
	defer out.Close()
	h := sha256.New()
	w := io.MultiWriter(out, h)
	if _, err := w.Write(head); err != nil {
		return 0, "", err
	}
	m, err := io.Copy(w, io.LimitReader(r, max-int64(n)+1))
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", label, err)
	}
	if int64(n)+m > max {
		return 0, "", newError(ErrInvalid, fmt.Sprintf("%s is larger than %d MiB, the limit for a plugin (Store.MaxArtifactBytes); is it really a plugin?", label, max>>20))
	}
	if err := out.Sync(); err != nil {
		return 0, "", err
	}
	if err := out.Close(); err != nil {
		return 0, "", err
	}
	return kind, hex.EncodeToString(h.Sum(nil)), nil
}

func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head[:n], nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
