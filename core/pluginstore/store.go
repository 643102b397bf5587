package pluginstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// Describer launches the plugin binary at binaryPath once and returns what it
// says about itself (sdk.HostClient.Describe). The caller wires it to the
// plugin runtime (core/plugin); the store calls it only at install time and
// from DescribeCached on a cache miss.
type Describer func(ctx context.Context, binaryPath string) (*sdk.Description, error)

// File names inside the store.
const (
	// BinaryPrefix starts every installed plugin binary's name: marina-plugin-<name>.
	BinaryPrefix = "marina-plugin-"
	// ManifestFile is the per-install record in <name>/<version>/<os>_<arch>/.
	ManifestFile = "manifest.json"
	// manifestSchema is the version of manifest.json's format.
	manifestSchema = 1
)

// Defaults for the Store's tunables.
const (
	DefaultMaxArtifactBytes = 512 << 20
	DefaultDescribeTimeout  = 30 * time.Second
)

// nameRE is the plugin name rule (the same as the SDK's).
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`) })

// DefaultRoot is the default store root, ~/.marina/plugins.
func DefaultRoot() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("plugin store: cannot find the home directory: %w", err)
	}
	return filepath.Join(home, ".marina", "plugins"), nil
}

// DefaultLockPath is the default lock file, ~/.marina/plugins.lock.
func DefaultLockPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("plugin lock file: cannot find the home directory: %w", err)
	}
	return filepath.Join(home, ".marina", "plugins.lock"), nil
}

// Store is the versioned plugin store rooted at one directory, with its lock
// file. Its methods are safe for concurrent use; the exported fields are
// settings to change before first use.
type Store struct {
	root     string
	lockPath string
	describe Describer
	// Trust is the signature policy (config pluginTrust): the keys trusted
	// and whether a plugin no trusted key signed is refused (Enforce) at
	// install and before every launch, or only reported (TrustOf).
	Trust Trust

	// HTTPClient downloads https sources and talks to OCI registries; nil
	// means a client built on http.DefaultTransport. Tests and corporate
	// setups set one with their CA.
	HTTPClient *http.Client
	// MaxArtifactBytes caps a download, a copied file and the total size of
	// an unpacked archive; 0 means DefaultMaxArtifactBytes.
	MaxArtifactBytes int64
	// DescribeTimeout bounds the Describer call at install; 0 means
	// DefaultDescribeTimeout.
	DescribeTimeout time.Duration
	// Now returns the install time; nil means time.Now.
	Now func() time.Time
	// BuiltinNames are the plugins built into marina. Install refuses a
	// plugin that calls itself one of them: the built-in would always be
	// chosen and the installed plugin would never run.
	BuiltinNames []string

	lockMu sync.Mutex // serialises lock file read-modify-writes in this process
}

// Open returns the store rooted at root (created on first install) using
// the lock file at lockPath and describe to read a new plugin's description.
func Open(root, lockPath string, describe Describer) *Store {
	return &Store{root: root, lockPath: lockPath, describe: describe}
}

// Root is the store's root directory.
func (s *Store) Root() string { return s.root }

// LockPath is the store's lock file.
func (s *Store) LockPath() string { return s.lockPath }

func (s *Store) maxBytes() int64 {
	if s.MaxArtifactBytes > 0 {
		return s.MaxArtifactBytes
	}
	return DefaultMaxArtifactBytes
}

func (s *Store) describeTimeout() time.Duration {
	if s.DescribeTimeout > 0 {
		return s.DescribeTimeout
	}
	return DefaultDescribeTimeout
}

func (s *Store) isBuiltin(name string) bool {
	for _, b := range s.BuiltinNames {
		if b == name {
			return true
		}
	}
	return false
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Installed is one installed plugin version for one platform, as recorded in
// its manifest.json.
type Installed struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Platform string `json:"platform"` // os/arch
	// Path is the binary's absolute path (not stored in the manifest: it is
	// where the manifest was found).
	Path string `json:"path,omitempty"`
	// SHA256 is the hex sha256 of the binary, established at install.
	SHA256 string `json:"sha256"`
	// Source is where it was installed from: an absolute path, an https URL
	// (without credentials) or an oci:// reference, as given.
	Source string `json:"source"`
	// SourceDigest pins the exact artifact fetched: "sha256:<hex>" of the
	// file, archive or OCI layer for files and URLs (what --sha256 takes), of
	// the OCI manifest (or index) for oci:// sources (what @ takes).
	SourceDigest string `json:"sourceDigest,omitempty"`
	// InsecureSkipChecksum is set when an https install was made without an
	// expected checksum; `plugin list` shows it.
	InsecureSkipChecksum bool      `json:"insecureSkipChecksum,omitempty"`
	InstalledAt          time.Time `json:"installedAt"`
	// Description is what the plugin said about itself at install.
	Description *sdk.Description `json:"description"`
	// Signature is the signature that came with the artifact (nil: none)
	// and SignedDigest the digest it must cover; whether it is trusted is
	// decided when asked (Store.TrustOf), against the keys trusted then.
	Signature    *pluginsign.Signature `json:"signature,omitempty"`
	SignedDigest string                `json:"signedDigest,omitempty"`
}

// manifest is manifest.json: Installed plus a schema number.
type manifest struct {
	Schema int `json:"schema"`
	Installed
}

func (s *Store) platformDir(name, version string, p Platform) string {
	return filepath.Join(s.root, name, version, p.dir())
}

// readInstall reads the manifest in dir and checks it agrees with the path.
func readInstall(dir, name, version string, p Platform) (*Installed, error) {
	mpath := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(mpath)
	if err != nil {
		return nil, err
	}
	var m manifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s is unreadable (%v); remove %s and install the plugin again", mpath, err, dir))
	}
	if m.Schema != manifestSchema {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s has schema %d; this marina reads schema %d (was it written by a newer marina?)", mpath, m.Schema, manifestSchema))
	}
	inst := m.Installed
	if inst.Name != name || inst.Version != version || inst.Platform != p.String() || inst.Description == nil || !isHexSHA256(inst.SHA256) {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s does not describe %s %s for %s (it says %s %s for %s); remove %s and install the plugin again",
			mpath, name, version, p, inst.Name, inst.Version, inst.Platform, dir))
	}
	inst.Path = filepath.Join(dir, BinaryPrefix+name)
	if r := RepositoryOf(inst.Source); r != "" {
		inst.Source = r // installed by an older marina with the tag in it
	}
	return &inst, nil
}

// writeManifest writes inst as dir/manifest.json (dir is a staging directory).
func writeManifest(dir string, inst *Installed) error {
	data, err := json.MarshalIndent(manifest{Schema: manifestSchema, Installed: *inst}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ManifestFile), append(data, '\n'), 0o644)
}

// List returns every installed plugin version for every platform, sorted by
// name, then version, then platform. It reads manifests only; no plugin is
// started. An install whose manifest is unreadable is left out and reported
// in the returned error, next to the readable ones.
func (s *Store) List() ([]Installed, error) {
	names, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugin store %s: %w", s.root, err)
	}
	var out []Installed
	var problems []error
	for _, n := range names {
		if !n.IsDir() || !nameRE().MatchString(n.Name()) {
			continue
		}
		insts, errs := s.listPlugin(n.Name())
		out = append(out, insts...)
		problems = append(problems, errs...)
	}
	sortInstalled(out)
	return out, errors.Join(problems...)
}

// listPlugin returns the installs of one plugin.
func (s *Store) listPlugin(name string) ([]Installed, []error) {
	versions, err := os.ReadDir(filepath.Join(s.root, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	var out []Installed
	var problems []error
	for _, v := range versions {
		if !v.IsDir() {
			continue
		}
		if _, err := semver.StrictNewVersion(v.Name()); err != nil {
			continue
		}
		plats, err := os.ReadDir(filepath.Join(s.root, name, v.Name()))
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for _, pd := range plats {
			p, err := ParsePlatform(pd.Name())
			if err != nil || !pd.IsDir() {
				continue
			}
			inst, err := readInstall(filepath.Join(s.root, name, v.Name(), pd.Name()), name, v.Name(), p)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					err = newError(ErrInvalid, fmt.Sprintf("%s has no %s; remove the directory and install the plugin again", filepath.Join(s.root, name, v.Name(), pd.Name()), ManifestFile))
				}
				problems = append(problems, err)
				continue
			}
			out = append(out, *inst)
		}
	}
	return out, problems
}

func sortInstalled(list []Installed) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Version != b.Version {
			va, ea := semver.StrictNewVersion(a.Version)
			vb, eb := semver.StrictNewVersion(b.Version)
			if ea == nil && eb == nil {
				return va.LessThan(vb)
			}
			return a.Version < b.Version
		}
		return a.Platform < b.Platform
	})
}

// Get returns the install of name at exactly version for this machine's
// platform (or, on Apple silicon, darwin/amd64 when only that is installed).
func (s *Store) Get(name, version string) (*Installed, error) {
	for _, p := range runnablePlatforms() {
		inst, err := readInstall(s.platformDir(name, version, p), name, version, p)
		if err == nil {
			return inst, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, newError(ErrNotInstalled, fmt.Sprintf("plugin %s %s is not installed for %s", name, version, HostPlatform()))
}

// Resolve returns the highest installed version of name that satisfies the
// Masterminds/semver constraint ("" means any release) and that this machine
// can run. If none does, the error lists every installed version and why the
// constraint rejected it.
func (s *Store) Resolve(name, constraint string) (*Installed, error) {
	return s.resolve(name, constraint, func(string) bool { return false })
}

// ResolveAfterRemove returns what Resolve(name, constraint) would select
// once version of name (every version when "") is removed: `plugin remove`
// uses it to tell whether an enabled plugin would be left with nothing to run.
func (s *Store) ResolveAfterRemove(name, constraint, version string) (*Installed, error) {
	return s.resolve(name, constraint, func(v string) bool { return version == "" || v == version })
}

// resolve is Resolve, ignoring the installed versions removed reports.
func (s *Store) resolve(name, constraint string, removed func(version string) bool) (*Installed, error) {
	if !nameRE().MatchString(name) {
		return nil, newError(ErrInvalid, fmt.Sprintf("plugin name %q is invalid: lower-case letters, digits and '-', starting with a letter", name))
	}
	cstr := constraint
	if strings.TrimSpace(cstr) == "" {
		cstr = "*"
	}
	c, err := semver.NewConstraint(cstr)
	if err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("plugin %s: version constraint %q is invalid: %v; write e.g. \"^1.2\" or \">=1.2, <2\"", name, constraint, err))
	}
	all, errs := s.listPlugin(name)
	var insts []Installed
	for _, inst := range all {
		if !removed(inst.Version) {
			insts = append(insts, inst)
		}
	}
	runnable := map[string]int{}
	for i, p := range runnablePlatforms() {
		runnable[p.String()] = i
	}
	var best *Installed
	var bestV *semver.Version
	var reasons []string
	var foreign []string
	seen := map[string]bool{}
	for i := len(insts) - 1; i >= 0; i-- {
		inst := insts[i]
		if _, ok := runnable[inst.Platform]; !ok {
			foreign = append(foreign, inst.Version+" ("+inst.Platform+")")
			continue
		}
		v, err := semver.StrictNewVersion(inst.Version)
		if err != nil {
			continue
		}
		if ok, why := c.Validate(v); !ok {
			if !seen[inst.Version] {
				seen[inst.Version] = true
				msgs := make([]string, len(why))
				for j, w := range why {
					msgs[j] = w.Error()
				}
				reasons = append(reasons, fmt.Sprintf("%s (%s)", inst.Version, strings.Join(msgs, "; ")))
			}
			continue
		}
		if best == nil || v.GreaterThan(bestV) || (v.Equal(bestV) && runnable[inst.Platform] < runnable[best.Platform]) {
			best, bestV = &insts[i], v
		}
	}
	if best != nil {
		return best, nil
	}
	hint := fmt.Sprintf("install a matching version with `marina plugin install SOURCE --version '%s'`", cstr)
	switch {
	case len(reasons) > 0:
		sort.Strings(reasons)
		return nil, newError(ErrNoMatch, fmt.Sprintf("no installed version of plugin %s matches %q: %s; %s", name, cstr, strings.Join(reasons, ", "), hint))
	case len(foreign) > 0:
		return nil, newError(ErrNotInstalled, fmt.Sprintf("plugin %s is installed only for other platforms (%s); this machine is %s: install the %s build", name, strings.Join(foreign, ", "), HostPlatform(), HostPlatform()))
	case len(errs) > 0:
		return nil, fmt.Errorf("plugin %s: no usable install: %w", name, errors.Join(errs...))
	}
	return nil, newError(ErrNotInstalled, fmt.Sprintf("plugin %s is not installed; install it with `marina plugin install SOURCE`", name))
}

// Remove deletes version of plugin name (every platform), or every version
// when version is "". The lock file entry for name is dropped if it pins a
// removed version. Each version directory is renamed out of the tree before
// it is deleted, so no reader sees it half-removed.
func (s *Store) Remove(name, version string) error {
	if !nameRE().MatchString(name) {
		return newError(ErrInvalid, fmt.Sprintf("plugin name %q is invalid", name))
	}
	insts, _ := s.listPlugin(name)
	var installed []string
	for _, in := range insts {
		installed = append(installed, in.Version+" ("+in.Platform+")")
	}
	var victims []string // version directories
	if version == "" {
		entries, err := os.ReadDir(filepath.Join(s.root, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove plugin %s: %w", name, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				victims = append(victims, filepath.Join(s.root, name, e.Name()))
			}
		}
	} else {
		if _, err := semver.StrictNewVersion(version); err != nil {
			return newError(ErrInvalid, fmt.Sprintf("remove plugin %s: version %q is not a semantic version such as 1.2.3", name, version))
		}
		dir := filepath.Join(s.root, name, version)
		if _, err := os.Stat(dir); err == nil {
			victims = append(victims, dir)
		}
	}
	if len(victims) == 0 {
		what := name
		if version != "" {
			what += " " + version
		}
		if len(installed) > 0 {
			return newError(ErrNotInstalled, fmt.Sprintf("plugin %s is not installed; installed: %s", what, strings.Join(installed, ", ")))
		}
		return newError(ErrNotInstalled, fmt.Sprintf("plugin %s is not installed", what))
	}
	for _, dir := range victims {
		trash, err := os.MkdirTemp(s.root, ".remove-")
		if err != nil {
			return fmt.Errorf("remove plugin %s: %w", name, err)
		}
		if err := os.Rename(dir, filepath.Join(trash, "v")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(trash)
			return fmt.Errorf("remove plugin %s: %w", name, err)
		}
		if err := os.RemoveAll(trash); err != nil {
			return fmt.Errorf("remove plugin %s: delete %s: %w", name, trash, err)
		}
	}
	_ = os.Remove(filepath.Join(s.root, name)) // only succeeds when no version is left
	for _, in := range insts {
		if version == "" || in.Version == version {
			_ = os.Remove(s.digestPath(in.Path)) // its listing record
		}
	}
	return s.updateLock(func(lf *LockFile) error {
		if e, ok := lf.Plugins[name]; ok && (version == "" || e.Version == version) {
			delete(lf.Plugins, name)
		}
		return nil
	})
}

// hashFile returns the hex sha256 of the file at path.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f)
}

// hashReader returns the hex sha256 of what r holds.
func hashReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// parseSHA256 normalises a user-supplied digest: hex, optionally prefixed
// "sha256:", any case. "" stays "".
func parseSHA256(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(t, "sha256:")
	if t == "" {
		return "", nil
	}
	if !isHexSHA256(t) {
		return "", newError(ErrInvalid, fmt.Sprintf("--sha256 %q is not a sha256 digest (64 hex digits, optionally prefixed sha256:)", s))
	}
	return t, nil
}

// short abbreviates a hex digest for messages.
func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return sum
}
