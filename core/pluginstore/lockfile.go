package pluginstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/lock"
)

// LockFileVersion is the format version of the lock file this marina writes.
const LockFileVersion = 1

// LockFile is the lock file: which version of each plugin the config
// selected, and the digests of the builds that were trusted. It is JSON,
// meant to be readable in a diff, and may be kept under version control.
type LockFile struct {
	Version int                  `json:"version"`
	Plugins map[string]LockEntry `json:"plugins"`
}

// LockEntry pins one plugin.
type LockEntry struct {
	// Version is the selected version.
	Version string `json:"version"`
	// Constraint is the constraint it was selected with (informational).
	Constraint string `json:"constraint,omitempty"`
	// SHA256 maps a platform ("darwin/arm64") to the hex sha256 of the
	// binary trusted for it. Entries for other platforms are kept when the
	// same version is pinned on another machine, so one lock file serves a
	// team on mixed hardware.
	SHA256 map[string]string `json:"sha256"`
	// Source is where the pinned build came from.
	Source string `json:"source"`
	// Protocol is the plugin protocol the pinned build speaks.
	Protocol string `json:"protocol"`
	// InsecureSkipChecksum records an https install made without a checksum.
	InsecureSkipChecksum bool `json:"insecureSkipChecksum,omitempty"`
}

// ReadLock reads the lock file; a missing file is an empty lock.
func (s *Store) ReadLock() (*LockFile, error) {
	data, err := os.ReadFile(s.lockPath)
	if errors.Is(err, fs.ErrNotExist) {
		return &LockFile{Version: LockFileVersion, Plugins: map[string]LockEntry{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugin lock file %s: %w", s.lockPath, err)
	}
	return s.parseLock(data)
}

func (s *Store) parseLock(data []byte) (*LockFile, error) {
	lf := &LockFile{}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(lf); err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("plugin lock file %s is invalid: %v; fix it or delete it (versions are then selected again)", s.lockPath, err))
		}
		if lf.Version > LockFileVersion {
			return nil, newError(ErrInvalid, fmt.Sprintf("plugin lock file %s has version %d; this marina understands version %d: upgrade marina", s.lockPath, lf.Version, LockFileVersion))
		}
	}
	lf.Version = LockFileVersion
	if lf.Plugins == nil {
		lf.Plugins = map[string]LockEntry{}
	}
	return lf, nil
}

// Pins reports whether lf already records inst as the selected version of
// its plugin, selected by constraint, with inst's digest for its platform:
// pinning it again would change nothing.
func (lf *LockFile) Pins(inst *Installed, constraint string) bool {
	if lf == nil || inst == nil {
		return false
	}
	e, ok := lf.Plugins[inst.Name]
	return ok && e.Version == inst.Version && e.Constraint == constraint && e.SHA256[inst.Platform] == inst.SHA256
}

// updateGuardSuffix names the file beside the lock file that updateLock
// flocks: the lock file itself is replaced by rename on every write, so it
// cannot carry the lock.
const updateGuardSuffix = ".flock"

// updateGuardWait bounds the wait for another process's lock file update
// (each holds it for one read-modify-write).
const updateGuardWait = 30 * time.Second

// updateLock applies fn to the lock file and writes it atomically if it
// changed. A missing lock file that would stay empty is not created.
// Updates are serialised across processes (a flock on the lock file's
// guard file), not only within this one: commands that only read the
// lab, such as `plugin list`, record the config's selection without
// holding marina's process lock, next to an install that does.
func (s *Store) updateLock(fn func(*LockFile) error) error {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.lockPath), 0o755); err != nil {
		return fmt.Errorf("plugin lock file %s: %w", s.lockPath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), updateGuardWait)
	defer cancel()
	guard, err := lock.Acquire(ctx, s.lockPath+updateGuardSuffix, lock.Options{Wait: true, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("plugin lock file %s: %w", s.lockPath, err)
	}
	defer guard.Release()
	var fnErr error // returned as is, not wrapped by atomicfile.Update
	err = atomicfile.Update(s.lockPath, 0o644, func(old []byte) ([]byte, error) {
		lf, err := s.parseLock(old)
		if err == nil {
			err = fn(lf)
		}
		if err != nil {
			fnErr = err
			return nil, err
		}
		if old == nil && len(lf.Plugins) == 0 {
			fnErr = errNoChange
			return nil, errNoChange
		}
		data, err := json.MarshalIndent(lf, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(data, '\n'), nil
	})
	if errors.Is(fnErr, errNoChange) {
		return nil
	}
	if fnErr != nil {
		return fnErr
	}
	return err
}

// errNoChange aborts an atomicfile.Update without writing.
var errNoChange = errors.New("no change")

// Pin records inst as the selected version of its plugin, with the
// constraint it was selected by. Pinning the version the lock file already
// pins adds this platform's digest; a different digest for the same version
// and platform is refused (that is what the lock file is for): the error
// says how to trust the new build instead.
func (s *Store) Pin(inst *Installed, constraint string) error {
	if inst == nil || inst.Description == nil || !isHexSHA256(inst.SHA256) {
		return newError(ErrInvalid, "pin: the install record is incomplete (no description or sha256); use one returned by Resolve, Get or List")
	}
	err := s.updateLock(func(lf *LockFile) error {
		e, ok := lf.Plugins[inst.Name]
		if !ok || e.Version != inst.Version {
			e = LockEntry{SHA256: map[string]string{}}
		}
		if prev, ok := e.SHA256[inst.Platform]; ok && prev != inst.SHA256 {
			return newError(ErrLockMismatch, fmt.Sprintf(
				"the lock file %s pins plugin %s %s (%s) to sha256 %s from %s, but the installed build has sha256 %s (from %s); to trust the installed build instead, delete the %q entry from %s and run again",
				s.lockPath, inst.Name, inst.Version, inst.Platform, short(prev), e.Source, short(inst.SHA256), inst.Source, inst.Name, s.lockPath))
		}
		if e.SHA256 == nil {
			e.SHA256 = map[string]string{}
		}
		e.Version, e.Constraint = inst.Version, constraint
		e.SHA256[inst.Platform] = inst.SHA256
		e.Source, e.Protocol = inst.Source, inst.Description.Protocol
		e.InsecureSkipChecksum = inst.InsecureSkipChecksum
		lf.Plugins[inst.Name] = e
		return nil
	})
	return err
}

// Unpin drops name from the lock file (the next selection pins again).
func (s *Store) Unpin(name string) error {
	return s.updateLock(func(lf *LockFile) error {
		delete(lf.Plugins, name)
		return nil
	})
}

// Verify checks inst before it is launched: the binary's sha256 must equal
// the one recorded in its manifest at install and, if the lock file pins
// this version, the one pinned for this platform. A modified, replaced or
// missing binary is refused with an error that says what to reinstall.
func (s *Store) Verify(inst *Installed) error {
	lf, err := s.ReadLock()
	if err != nil {
		return err
	}
	return s.verify(inst, lf, s.hashAndRecord)
}

// verify checks inst against its manifest and lf, the binary's digest
// given by digest: hashAndRecord before a launch, listedDigest to list.
func (s *Store) verify(inst *Installed, lf *LockFile, digest func(string) (string, error)) error {
	if inst == nil {
		return newError(ErrInvalid, "verify: no plugin given")
	}
	p, err := ParsePlatform(inst.Platform)
	if err != nil {
		return err
	}
	m, err := readInstall(s.platformDir(inst.Name, inst.Version, p), inst.Name, inst.Version, p)
	if errors.Is(err, fs.ErrNotExist) {
		return newError(ErrNotInstalled, fmt.Sprintf("plugin %s %s (%s) is not installed (anymore); install it with `marina plugin install %s`", inst.Name, inst.Version, inst.Platform, installRef(inst.Source, inst.Version)))
	}
	if err != nil {
		return err
	}
	if inst.SHA256 != "" && inst.SHA256 != m.SHA256 {
		return newError(ErrModified, fmt.Sprintf("plugin %s %s was reinstalled with another build (sha256 %s) after it was selected (sha256 %s); run the command again", inst.Name, inst.Version, short(m.SHA256), short(inst.SHA256)))
	}
	sum, err := digest(m.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return newError(ErrModified, fmt.Sprintf("plugin %s %s: binary %s is missing; reinstall it with `marina plugin install %s`", m.Name, m.Version, m.Path, installRef(m.Source, m.Version)))
	}
	if err != nil {
		return fmt.Errorf("plugin %s %s: hash binary: %w", m.Name, m.Version, err)
	}
	if sum != m.SHA256 {
		return newError(ErrModified, fmt.Sprintf("plugin %s %s: binary %s was modified after install (sha256 %s, expected %s); reinstall it with `marina plugin install %s`",
			m.Name, m.Version, m.Path, short(sum), short(m.SHA256), installRef(m.Source, m.Version)))
	}
	if e, ok := lf.Plugins[m.Name]; ok && e.Version == m.Version {
		if want, ok := e.SHA256[m.Platform]; ok && want != sum {
			return newError(ErrLockMismatch, fmt.Sprintf("plugin %s %s: binary %s has sha256 %s, but the lock file %s pins sha256 %s (from %s): it is not the build that was locked; reinstall that build with `marina plugin remove %s@%s` then `marina plugin install %s`",
				m.Name, m.Version, m.Path, short(sum), s.lockPath, short(want), sourceOr(e.Source), m.Name, m.Version, installRef(repositoryOrSource(e.Source), e.Version)))
		}
	}
	if err := s.checkTrust(m); err != nil {
		return err
	}
	return s.refuseCapabilities(m.Name+" "+m.Version+" from "+sourceOr(m.Source), m.Description, m.Source)
}

// repositoryOrSource is src's OCI repository (an older lock file may hold
// a tag), or src when it is not an OCI reference.
func repositoryOrSource(src string) string {
	if r := RepositoryOf(src); r != "" {
		return r
	}
	return src
}

// installRef is what `marina plugin install` takes to install version of
// the plugin from src again: an OCI repository gets the version's tag.
func installRef(src, version string) string {
	if RepositoryOf(src) != "" && version != "" {
		return src + ":" + version
	}
	return sourceOr(src)
}

func sourceOr(src string) string {
	if src == "" {
		return "SOURCE"
	}
	return src
}

// VerifyResult is the outcome of verifying one install (or one lock entry).
type VerifyResult struct {
	Installed Installed
	// Pinned is true when the lock file selects this version.
	Pinned bool
	// Err is nil when the install is intact; otherwise errors.Is tells
	// ErrModified, ErrLockMismatch or ErrNotInstalled (a pinned version
	// that is not installed) apart.
	Err error
}

// VerifyAll verifies every install in the store and reports lock entries
// whose version is not installed for this machine. The error is about
// reading the store or the lock file; per-install problems are in the
// results (an unreadable manifest is reported in the error, as by List).
func (s *Store) VerifyAll() ([]VerifyResult, error) {
	lf, err := s.ReadLock()
	if err != nil {
		return nil, err
	}
	return s.VerifyInstalls(lf)
}

// VerifyInstalls is VerifyAll against the lock file lf, already read. With
// a nil lf (the lock file is unreadable) every binary is still checked
// against the sha256 recorded in its manifest.
func (s *Store) VerifyInstalls(lf *LockFile) ([]VerifyResult, error) {
	return s.verifyInstalls(lf, s.hashAndRecord)
}

// ListInstalls is VerifyInstalls as `marina plugin list` shows it: a
// binary's digest is the one recorded when it was last hashed while the
// file is unchanged since (listedDigest), so listing does not read every
// binary each time. A nil lf is allowed, so `plugin list` can show a
// modified binary even next to a corrupt lock file. `plugin verify` and
// every launch hash.
func (s *Store) ListInstalls(lf *LockFile) ([]VerifyResult, error) {
	return s.verifyInstalls(lf, s.listedDigest)
}

func (s *Store) verifyInstalls(lf *LockFile, digest func(string) (string, error)) ([]VerifyResult, error) {
	if lf == nil {
		lf = &LockFile{Version: LockFileVersion, Plugins: map[string]LockEntry{}}
	}
	insts, listErr := s.List()
	var out []VerifyResult
	pinnedHere := map[string]bool{}
	for _, inst := range insts {
		e, ok := lf.Plugins[inst.Name]
		pinned := ok && e.Version == inst.Version
		if pinned {
			pinnedHere[inst.Name] = true
		}
		out = append(out, VerifyResult{Installed: inst, Pinned: pinned, Err: s.verify(&inst, lf, digest)})
	}
	names := make([]string, 0, len(lf.Plugins))
	for n := range lf.Plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if pinnedHere[n] {
			continue
		}
		e := lf.Plugins[n]
		out = append(out, VerifyResult{
			Installed: Installed{Name: n, Version: e.Version, Platform: HostPlatform().String(), Source: e.Source},
			Pinned:    true,
			Err: newError(ErrNotInstalled, fmt.Sprintf("the lock file %s pins plugin %s %s, which is not installed; install it with `marina plugin install %s`",
				s.lockPath, n, e.Version, strings.TrimSpace(installRef(repositoryOrSource(e.Source), e.Version)))),
		})
	}
	return out, listErr
}
