package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/userfile"
	"github.com/bcollard/marina/sdk"
)

// ValidateCache remembers what installed plugins answered to
// ValidateConfig, so that checking an unchanged config with an unchanged
// binary starts no process. An entry is keyed by everything the answer can
// depend on: the binary (its recorded sha256, and the launch arguments),
// the exact config bytes sent (their sha256), the protocol (the host's and
// the plugin's declared one) and the host version told to the plugin.
//
// Entries live in Dir/<plugin>/<key>.json, written atomically; an entry
// that is unreadable, corrupt or for another key is ignored (a miss) and
// rewritten after the plugin answered. Only answers (diagnostics
// included) are cached, never a failure to get one. At most MaxPerPlugin
// entries are kept per plugin: the least recently used are removed.
//
// A hit does not read the binary: the key pins the digest recorded at
// install, and a plugin is only ever launched after its file was checked
// against it (Start), so a cached answer is always one the recorded
// binary gave.
type ValidateCache struct {
	// Dir holds the entries (created 0700 on first write).
	Dir string
	// MaxPerPlugin bounds the entries per plugin (0: DefaultValidateCacheEntries).
	MaxPerPlugin int
}

// DefaultValidateCacheEntries is the default bound of ValidateCache entries
// per plugin: a few configs for each of a few installed versions.
const DefaultValidateCacheEntries = 32

// maxValidateEntry bounds one entry's file: a larger one is not written,
// and not read.
const maxValidateEntry = 1 << 20

// validateEntryVersion is the format of an entry; another is a miss.
const validateEntryVersion = 1

// validateEntry is one cached answer with the key it answers.
type validateEntry struct {
	Format       int              `json:"format"`
	Plugin       string           `json:"plugin"`
	SHA256       string           `json:"sha256"`
	Args         []string         `json:"args"`
	ConfigSHA256 string           `json:"configSHA256"`
	Protocol     string           `json:"protocol"`
	HostVersion  string           `json:"hostVersion"`
	Diagnostics  []sdk.Diagnostic `json:"diagnostics"`
}

var cacheNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`) })

// validateKey returns the entry a lookup must find for p (Diagnostics
// empty) and its file name, or ok false when p cannot be cached (no
// recorded digest, a name unfit for a directory).
func validateKey(p Plugin, hostVersion string) (key validateEntry, file string, ok bool) {
	sum := strings.ToLower(strings.TrimSpace(p.Spec.SHA256))
	if !sha256RE().MatchString(sum) || !cacheNameRE().MatchString(p.Spec.Name) {
		return validateEntry{}, "", false
	}
	cfg := sha256.Sum256(p.Config)
	protocol := fmt.Sprintf("host %d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor)
	if p.Description != nil {
		protocol += ", plugin " + p.Description.Protocol
	}
	key = validateEntry{
		Format: validateEntryVersion, Plugin: p.Spec.Name, SHA256: sum, Args: slices.Clone(p.Spec.Args),
		ConfigSHA256: hex.EncodeToString(cfg[:]), Protocol: protocol, HostVersion: hostVersion,
	}
	b, err := json.Marshal(key)
	if err != nil {
		return validateEntry{}, "", false
	}
	h := sha256.Sum256(b)
	return key, hex.EncodeToString(h[:]) + ".json", true
}

func (c *ValidateCache) max() int {
	if c.MaxPerPlugin > 0 {
		return c.MaxPerPlugin
	}
	return DefaultValidateCacheEntries
}

// get returns the cached answer for key, if there is a sound one; a hit
// marks the entry as recently used.
func (c *ValidateCache) get(key validateEntry, file string) ([]sdk.Diagnostic, bool) {
	path := filepath.Join(c.Dir, key.Plugin, file)
	b, err := userfile.ReadFile(path, maxValidateEntry)
	if err != nil {
		return nil, false
	}
	var e validateEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, false
	}
	diags := e.Diagnostics
	e.Diagnostics = nil
	if !sameKey(e, key) {
		return nil, false
	}
	for _, d := range diags {
		if d.Severity != sdk.SeverityError && d.Severity != sdk.SeverityWarning {
			return nil, false
		}
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now)
	return diags, true
}

func sameKey(a, b validateEntry) bool {
	return a.Format == b.Format && a.Plugin == b.Plugin && a.SHA256 == b.SHA256 && slices.Equal(a.Args, b.Args) &&
		a.ConfigSHA256 == b.ConfigSHA256 && a.Protocol == b.Protocol && a.HostVersion == b.HostVersion
}

// put stores the answer diags for key, then removes the least recently
// used entries of the plugin beyond the bound.
func (c *ValidateCache) put(key validateEntry, file string, diags []sdk.Diagnostic) error {
	key.Diagnostics = diags
	b, err := json.Marshal(key)
	if err != nil {
		return err
	}
	if len(b) > maxValidateEntry {
		return fmt.Errorf("the answer is %d bytes, over the %d bytes an entry may have", len(b), maxValidateEntry)
	}
	return writeEntry(filepath.Join(c.Dir, key.Plugin), file, b, c.max())
}

// writeEntry writes a cache entry dir/file (dir created 0700), then
// removes the least recently used entries of dir beyond max. An entry that
// is not a plain 0600 file (a directory, a symlink, an unreadable file) is
// replaced, not followed or kept with its mode.
func writeEntry(dir, file string, b []byte, max int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, file)
	if fi, err := os.Lstat(path); err == nil && (!fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600) {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	return pruneEntries(dir, max)
}

// pruneEntries removes the least recently used entries (*.json files) of
// dir beyond max.
func pruneEntries(dir string, max int) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type aged struct {
		name string
		mod  time.Time
	}
	var entries []aged
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".json") || strings.HasPrefix(de.Name(), ".") {
			continue // atomicfile's temporary files are .<name>.tmp-*
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		entries = append(entries, aged{de.Name(), fi.ModTime()})
	}
	if len(entries) <= max {
		return nil
	}
	slices.SortFunc(entries, func(a, b aged) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	var firstErr error
	for _, e := range entries[:len(entries)-max] {
		if err := os.RemoveAll(filepath.Join(dir, e.name)); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
