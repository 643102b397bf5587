package pluginstore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
)

// SourceManifestFile is the manifest a plugin directory or .tar.gz carries.
const SourceManifestFile = "marina-plugin.json"

// SourceManifest is marina-plugin.json, shipped next to the binary in a
// directory or .tar.gz. The install checks the binary's own description
// against it: a disagreement is an error, never a silent preference.
//
//	{"name": "acme", "version": "1.2.0", "protocol": "1.0",
//	 "platforms": ["darwin/arm64", "linux/amd64"],
//	 "binaries": {"darwin/arm64": "darwin_arm64/marina-plugin-acme",
//	              "linux/amd64": "linux_amd64/marina-plugin-acme"}}
type SourceManifest struct {
	// Name and Version are required and must match the binary's description.
	Name    string `json:"name"`
	Version string `json:"version"`
	// Protocol, if set, must match the protocol the binary reports.
	Protocol string `json:"protocol,omitempty"`
	// Platforms, if set, lists the os/arch pairs the plugin is published for.
	Platforms []string `json:"platforms,omitempty"`
	// Binary is the binary's path relative to the manifest (default
	// marina-plugin-<name>); Binaries gives one per os/arch instead.
	Binary   string            `json:"binary,omitempty"`
	Binaries map[string]string `json:"binaries,omitempty"`
	// SHA256, if set, maps os/arch to the hex sha256 of that platform's
	// binary (`marina plugin package` writes it): the install refuses a
	// binary whose digest differs.
	SHA256 map[string]string `json:"sha256,omitempty"`
	// Description, Hooks and ConfigSchema are the plugin's own description
	// (`marina plugin package` copies them from the binary), for a reader
	// of the archive or a registry; Hooks, when set, must be the hooks the
	// binary reports.
	Description  string          `json:"description,omitempty"`
	Hooks        []string        `json:"hooks,omitempty"`
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	// Capabilities, when present (`marina plugin package` writes it, []
	// for none), must be the capabilities the binary declares; publish
	// copies it to the OCI manifests, so a build the capability limits
	// refuse is refused before it is downloaded. nil: not said.
	Capabilities *[]string `json:"capabilities,omitempty"`
}

var protocolRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,4}\.[0-9]{1,4}$`) })

// parseSourceManifest decodes and checks a marina-plugin.json (strictly:
// unknown fields are errors, so a typo is not silently ignored).
func parseSourceManifest(data []byte, where string) (*SourceManifest, error) {
	var m SourceManifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s is invalid: %v; fields are name, version, protocol, platforms, binary, binaries, sha256, description, hooks, configSchema, capabilities", where, err))
	}
	var problems []string
	if !nameRE().MatchString(m.Name) {
		problems = append(problems, fmt.Sprintf("name %q must be lower-case letters, digits and '-', starting with a letter", m.Name))
	}
	if _, err := semver.StrictNewVersion(m.Version); err != nil {
		problems = append(problems, fmt.Sprintf("version %q must be a semantic version such as 1.2.3 (no leading v)", m.Version))
	}
	if m.Protocol != "" && !protocolRE().MatchString(m.Protocol) {
		problems = append(problems, fmt.Sprintf("protocol %q must be MAJOR.MINOR, e.g. 1.0", m.Protocol))
	}
	for _, p := range m.Platforms {
		if _, err := ParsePlatform(p); err != nil {
			problems = append(problems, fmt.Sprintf("platforms: %v", err))
		}
	}
	if m.Binary != "" && len(m.Binaries) > 0 {
		problems = append(problems, "set binary or binaries, not both")
	}
	for p, b := range m.Binaries {
		if _, err := ParsePlatform(p); err != nil {
			problems = append(problems, fmt.Sprintf("binaries: %v", err))
		}
		if !localPath(b) {
			problems = append(problems, fmt.Sprintf("binaries[%s]: %q must be a relative path inside the directory", p, b))
		}
	}
	for p, sum := range m.SHA256 {
		if _, err := ParsePlatform(p); err != nil {
			problems = append(problems, fmt.Sprintf("sha256: %v", err))
		}
		if !isHexSHA256(sum) {
			problems = append(problems, fmt.Sprintf("sha256[%s]: %q is not a hex sha256 (64 lower-case hex digits)", p, sum))
		}
	}
	if len(m.ConfigSchema) > 0 && !json.Valid(m.ConfigSchema) {
		problems = append(problems, "configSchema is not valid JSON")
	}
	if m.Binary != "" && !localPath(m.Binary) {
		problems = append(problems, fmt.Sprintf("binary %q must be a relative path inside the directory", m.Binary))
	}
	if len(problems) > 0 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s is invalid: %s", where, strings.Join(problems, "; ")))
	}
	return &m, nil
}

// localPath reports whether p is relative and stays inside its directory.
func localPath(p string) bool {
	return p != "" && filepath.IsLocal(filepath.FromSlash(p))
}

// binaryFor returns the manifest's binary for target, relative to the manifest.
func (m *SourceManifest) binaryFor(target Platform, where string) (string, error) {
	published := m.Platforms
	if len(m.Binaries) > 0 && len(published) == 0 {
		for p := range m.Binaries {
			published = append(published, p)
		}
	}
	if len(published) > 0 {
		ok := false
		for _, p := range published {
			if pp, _ := ParsePlatform(p); pp == target {
				ok = true
			}
		}
		if !ok {
			sort.Strings(published)
			return "", newError(ErrPlatform, fmt.Sprintf("plugin %s %s is published for %s (%s), not for %s: install it on one of those or ask its author for a %s build",
				m.Name, m.Version, strings.Join(published, ", "), where, target, target))
		}
	}
	if len(m.Binaries) > 0 {
		for p, b := range m.Binaries {
			if pp, _ := ParsePlatform(p); pp == target {
				return b, nil
			}
		}
		return "", newError(ErrPlatform, fmt.Sprintf("%s lists %s but has no binaries entry for it", where, target))
	}
	if m.Binary != "" {
		return m.Binary, nil
	}
	return BinaryPrefix + m.Name, nil
}

// locate finds the manifest and the binary for target in dir (a user's
// directory or an unpacked archive). A directory holding exactly one
// directory and nothing else (the usual tarball layout) is looked into. With
// no manifest, a single marina-plugin-* file is the binary.
func locate(dir string, target Platform, label string) (*SourceManifest, string, error) {
	root := dir
	if _, err := os.Stat(filepath.Join(root, SourceManifestFile)); errors.Is(err, fs.ErrNotExist) {
		if entries, err := os.ReadDir(root); err == nil && len(entries) == 1 && entries[0].IsDir() {
			root = filepath.Join(root, entries[0].Name())
		}
	}
	data, err := os.ReadFile(filepath.Join(root, SourceManifestFile))
	switch {
	case err == nil:
		m, err := parseSourceManifest(data, label+": "+SourceManifestFile)
		if err != nil {
			return nil, "", err
		}
		rel, err := m.binaryFor(target, label+": "+SourceManifestFile)
		if err != nil {
			return nil, "", err
		}
		bin := filepath.Join(root, filepath.FromSlash(rel))
		if err := insideDir(root, bin); err != nil {
			return nil, "", newError(ErrInvalid, fmt.Sprintf("%s: %s names the binary %q, which %v", label, SourceManifestFile, rel, err))
		}
		st, err := os.Stat(bin)
		if err != nil || !st.Mode().IsRegular() {
			return nil, "", newError(ErrInvalid, fmt.Sprintf("%s: %s names the binary %q, which is not a file there", label, SourceManifestFile, rel))
		}
		return m, bin, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("%s: %w", label, err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", label, err)
	}
	var cands []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), BinaryPrefix) && !strings.HasSuffix(e.Name(), ".json") {
			cands = append(cands, e.Name())
		}
	}
	if len(cands) != 1 {
		found := "none"
		if len(cands) > 1 {
			found = strings.Join(cands, ", ")
		}
		return nil, "", newError(ErrInvalid, fmt.Sprintf("%s has no %s and not exactly one %s* file (found %s): add a %s naming the binary",
			label, SourceManifestFile, BinaryPrefix, found, SourceManifestFile))
	}
	return nil, filepath.Join(root, cands[0]), nil
}

// insideDir checks that p, with symlinks resolved, is inside dir.
func insideDir(dir, p string) error {
	rd, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	rp, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("does not exist")
	}
	rel, err := filepath.Rel(rd, rp)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("points outside the directory")
	}
	return nil
}

// maxArchiveEntries bounds the number of entries read from an archive.
const maxArchiveEntries = 10000

// extractTarGz unpacks a .tar.gz into dest, accepting only directories and
// regular files with local paths, and at most max bytes in total.
func extractTarGz(archive, dest string, max int64, label string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return newError(ErrNotPlugin, fmt.Sprintf("%s is not a valid gzip archive: %v", label, err))
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	var total int64
	for i := 0; ; i++ {
		if i >= maxArchiveEntries {
			return newError(ErrInvalid, fmt.Sprintf("%s has more than %d entries; a plugin archive holds a binary and a manifest", label, maxArchiveEntries))
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if i == 0 {
				return newError(ErrInvalid, fmt.Sprintf("%s is an empty archive", label))
			}
			return nil
		}
		if err != nil {
			return newError(ErrNotPlugin, fmt.Sprintf("%s is gzip-compressed but not a valid tar archive: %v; marina installs plain binaries and .tar.gz archives", label, err))
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." {
			continue
		}
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return newError(ErrInvalid, fmt.Sprintf("%s: entry %q escapes the archive; refusing to unpack it", label, hdr.Name))
		}
		target := filepath.Join(dest, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if hdr.FileInfo().Mode()&0o111 != 0 {
				mode = 0o755
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				return newError(ErrInvalid, fmt.Sprintf("%s: entry %q: %v", label, hdr.Name, err))
			}
			n, err := io.Copy(out, io.LimitReader(tr, max-total+1))
			cerr := out.Close()
			total += n
			if total > max {
				return newError(ErrInvalid, fmt.Sprintf("%s unpacks to more than %d MiB (the limit); is it really a plugin archive?", label, max>>20))
			}
			if err != nil {
				return fmt.Errorf("%s: entry %q: %w", label, hdr.Name, err)
			}
			if cerr != nil {
				return cerr
			}
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
			// metadata only
		case tar.TypeSymlink, tar.TypeLink:
			return newError(ErrInvalid, fmt.Sprintf("%s: entry %q is a link; plugin archives may hold only regular files and directories", label, hdr.Name))
		default:
			return newError(ErrInvalid, fmt.Sprintf("%s: entry %q is not a regular file or directory", label, hdr.Name))
		}
	}
}
