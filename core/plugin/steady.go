package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bcollard/marina/core/userfile"
	"github.com/bcollard/marina/sdk"
)

// SteadyCache lets RunHook skip a PostUp that would change nothing: when a
// plugin's last PostUp returned sdk.Result.Steady, marina records its
// result with the hook's inputs; the next PostUp with the same inputs
// whose Steady containers all still exist, run and carry the same spec
// reuses that result (outputs, host changes, warnings) without starting
// the plugin. A `marina up` with nothing to do then starts no plugin
// process.
//
// The inputs are everything the hook is given or runs as: the binary (its
// recorded sha256; for a built-in, marina's own executable, by path, size
// and modification time, and marina's version), the launch arguments, the
// protocol, the config bytes, the environment (sdk.Env: Docker endpoint,
// network, images, mirrors, state directory, ...) and the outputs of the
// plugin's dependencies. Entries live in Dir/<plugin>/<key>.json (0600,
// written atomically); one that is unreadable, corrupt or for another key
// is a miss. A hook that fails or returns no Steady removes its entry.
type SteadyCache struct {
	// Dir holds the entries (created 0700 on first write).
	Dir string
	// Check says whether every container still exists with its ID, is
	// running and carries its spec label: "" when all do, else why not
	// (the hook then runs). An error is a miss too.
	Check func(ctx context.Context, containers []sdk.SteadyContainer) (string, error)
	// Refresh records entries but never reuses one (`marina up
	// --reconcile`: every hook runs).
	Refresh bool
	// MaxPerPlugin bounds the entries per plugin (0: DefaultSteadyEntries).
	MaxPerPlugin int
}

// DefaultSteadyEntries is the default bound of SteadyCache entries per
// plugin: a few labs' configs.
const DefaultSteadyEntries = 8

// steadyEntryVersion is the format of an entry; another is a miss.
const steadyEntryVersion = 1

// steadyKey is what a recorded result is valid for.
type steadyKey struct {
	Format       int      `json:"format"`
	Plugin       string   `json:"plugin"`
	Hook         string   `json:"hook"`
	Binary       string   `json:"binary"`
	Args         []string `json:"args"`
	Protocol     string   `json:"protocol"`
	HostVersion  string   `json:"hostVersion"`
	ConfigSHA256 string   `json:"configSHA256"`
	EnvSHA256    string   `json:"envSHA256"`
	DepsSHA256   string   `json:"depsSHA256"`
}

// steadyRef is where one plugin's result of one hook call is recorded.
type steadyRef struct {
	sc   *SteadyCache
	key  steadyKey
	file string
}

// steadyEntry is a recorded result with the key it is valid for.
type steadyEntry struct {
	steadyKey
	Recorded    time.Time             `json:"recorded"`
	Outputs     map[string]string     `json:"outputs,omitempty"`
	HostChanges []sdk.HostChange      `json:"hostChanges,omitempty"`
	Warnings    []sdk.Diagnostic      `json:"warnings,omitempty"`
	Containers  []sdk.SteadyContainer `json:"containers"`
}

// steadyBinary names the code a plugin runs: its recorded digest, or for a
// built-in marina's executable as it is now (a rebuilt marina is another
// key). ok is false when neither is known.
func steadyBinary(p Plugin) (string, bool) {
	if sum := strings.ToLower(strings.TrimSpace(p.Spec.SHA256)); sha256RE().MatchString(sum) {
		return "sha256:" + sum, true
	}
	if p.Builtin == nil || p.Spec.Path == "" {
		return "", false
	}
	fi, err := os.Stat(p.Spec.Path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return fmt.Sprintf("builtin %s size %d mtime %d", p.Spec.Path, fi.Size(), fi.ModTime().UnixNano()), true
}

func sum256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// steadyKeyOf returns the key of call to p's hook and its entry's file
// name; ok is false when p's result cannot be recorded.
func steadyKeyOf(p Plugin, hostVersion string, call sdk.HookCall) (key steadyKey, file string, ok bool) {
	bin, ok := steadyBinary(p)
	if !ok || !cacheNameRE().MatchString(p.Spec.Name) {
		return steadyKey{}, "", false
	}
	env, err := json.Marshal(call.Env)
	if err != nil {
		return steadyKey{}, "", false
	}
	deps, err := json.Marshal(call.Deps) // maps marshal with sorted keys
	if err != nil {
		return steadyKey{}, "", false
	}
	protocol := fmt.Sprintf("host %d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor)
	if p.Description != nil {
		protocol += ", plugin " + p.Description.Protocol
	}
	key = steadyKey{
		Format: steadyEntryVersion, Plugin: p.Spec.Name, Hook: string(call.Hook), Binary: bin, Args: slices.Clone(p.Spec.Args),
		Protocol: protocol, HostVersion: hostVersion,
		ConfigSHA256: sum256(call.ConfigJSON), EnvSHA256: sum256(env), DepsSHA256: sum256(deps),
	}
	b, err := json.Marshal(key)
	if err != nil {
		return steadyKey{}, "", false
	}
	return key, sum256(b) + ".json", true
}

func (c *SteadyCache) max() int {
	if c.MaxPerPlugin > 0 {
		return c.MaxPerPlugin
	}
	return DefaultSteadyEntries
}

// hasEntries says whether plugin n has any entry (if not, its process is
// started as early as without a cache).
func (c *SteadyCache) hasEntries(n string) bool {
	if c.Refresh {
		return false
	}
	des, err := os.ReadDir(filepath.Join(c.Dir, n))
	if err != nil {
		return false
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".json") && !strings.HasPrefix(de.Name(), ".") {
			return true
		}
	}
	return false
}

// lookup returns the recorded result for key when its containers still
// hold, and marks it used; why says what failed otherwise ("" when there
// is no entry).
func (c *SteadyCache) lookup(ctx context.Context, key steadyKey, file string) (e *steadyEntry, why string) {
	e, why = c.peek(ctx, key, file)
	if e != nil {
		now := time.Now()
		_ = os.Chtimes(filepath.Join(c.Dir, key.Plugin, file), now, now)
	}
	return e, why
}

// peek is lookup without marking the entry used: it changes nothing.
func (c *SteadyCache) peek(ctx context.Context, key steadyKey, file string) (e *steadyEntry, why string) {
	if c.Refresh || c.Check == nil {
		return nil, ""
	}
	path := filepath.Join(c.Dir, key.Plugin, file)
	b, err := userfile.ReadFile(path, maxValidateEntry)
	if err != nil {
		return nil, ""
	}
	var got steadyEntry
	if err := json.Unmarshal(b, &got); err != nil {
		return nil, "its record is not valid JSON"
	}
	if !sameSteadyKey(got.steadyKey, key) {
		return nil, "its record is for other inputs"
	}
	for _, d := range got.Warnings {
		if d.Severity != sdk.SeverityError && d.Severity != sdk.SeverityWarning {
			return nil, "its record has an unknown severity"
		}
	}
	reason, err := c.Check(ctx, got.Containers)
	switch {
	case err != nil:
		return nil, "its containers could not be checked: " + err.Error()
	case reason != "":
		return nil, reason
	}
	return &got, ""
}

func sameSteadyKey(a, b steadyKey) bool {
	return a.Format == b.Format && a.Plugin == b.Plugin && a.Hook == b.Hook && a.Binary == b.Binary && slices.Equal(a.Args, b.Args) &&
		a.Protocol == b.Protocol && a.HostVersion == b.HostVersion && a.ConfigSHA256 == b.ConfigSHA256 &&
		a.EnvSHA256 == b.EnvSHA256 && a.DepsSHA256 == b.DepsSHA256
}

// record stores res (as marina accepted it) for key, or removes the entry
// when res has no Steady.
func (c *SteadyCache) record(key steadyKey, file string, res *sdk.Result) error {
	dir := filepath.Join(c.Dir, key.Plugin)
	if res == nil || res.Steady == nil {
		return c.forget(key, file)
	}
	e := steadyEntry{
		steadyKey: key, Recorded: time.Now().UTC(), Outputs: res.Outputs, HostChanges: res.HostChanges,
		Warnings: res.Warnings, Containers: res.Steady.Containers,
	}
	if e.Containers == nil {
		e.Containers = []sdk.SteadyContainer{}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if len(b) > maxValidateEntry {
		return fmt.Errorf("the result is %d bytes, over the %d bytes an entry may have", len(b), maxValidateEntry)
	}
	return writeEntry(dir, file, b, c.max())
}

// forget removes key's entry, if any.
func (c *SteadyCache) forget(key steadyKey, file string) error {
	err := os.Remove(filepath.Join(c.Dir, key.Plugin, file))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// replay is a recorded result as RunHook returns it.
func (e *steadyEntry) result() *sdk.Result {
	res := &sdk.Result{Outputs: e.Outputs, HostChanges: e.HostChanges, Warnings: e.Warnings, Steady: &sdk.Steady{Containers: e.Containers}}
	cleanDiagnostics(res.Warnings)
	return res
}
