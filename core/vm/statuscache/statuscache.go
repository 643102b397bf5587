// Package statuscache keeps marina-core's last answer about a Lima VM it
// found stopped, with a fingerprint of everything that answer was read
// from, so that the front (cmd/marina) can answer `marina status` for a
// stopped VM — the state a Mac lab is in after `marina down` — without
// Lima's libraries and without starting marina-core.
//
// The answer is reused only while nothing it depends on changed: the same
// marina build (version, commit, build date), the same config (its values,
// as JSON), and the same files in the VM's Lima instance directory and in
// Lima's _config directory — names, types, sizes and modification times of
// every entry, and the contents of the small ones (lima.yaml, marina's
// record). A VM that starts writes its pid files and sockets there, so its
// fingerprint changes and the front hands the command to marina-core, which
// asks Lima. marina-core records an entry only when the fingerprint taken
// before Lima's inspection equals the one taken after it.
//
// Standard library only (and marina's light packages): the front links it.
package statuscache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/buildinfo"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/userfile"
	"github.com/bcollard/marina/core/vm"
)

// format is the entry format; another is a miss.
const format = 1

// hashLimit is the size up to which a file's content is part of the
// fingerprint (lima.yaml, marina's record, pid files, Lima's config
// files); larger ones (disk images, logs) count by size and time.
const hashLimit = 64 << 10

// LimaConfigDir is the name of Lima's config directory in its home (Lima's
// filenames.ConfigDir: default.yaml and override.yaml, which change what
// an instance's lima.yaml means).
const LimaConfigDir = "_config"

// entry is one cached answer.
type entry struct {
	Format      int       `json:"format"`
	Build       string    `json:"build"`
	Config      string    `json:"config"`
	Fingerprint string    `json:"fingerprint"`
	Status      vm.Status `json:"status"`
}

// Path is where the answer for the Lima VM vmName is kept, under home's
// ~/.marina.
func Path(home, vmName string) string {
	return filepath.Join(home, ".marina", "cache", "status", "lima-"+vmName+".json")
}

// FingerprintVM is Fingerprint of the Lima VM vmName under limaHome: its
// instance directory and Lima's config directory. marina-core and the
// front both fingerprint a VM with it.
func FingerprintVM(limaHome, vmName string) (string, error) {
	return Fingerprint(filepath.Join(limaHome, vmName), filepath.Join(limaHome, LimaConfigDir))
}

// Fingerprint digests the instance directory instDir and Lima's config
// directory limaConfigDir (either may be absent). An error means the
// directories could not be read: no answer may be kept or reused then.
func Fingerprint(instDir, limaConfigDir string) (string, error) {
	h := sha256.New()
	for _, dir := range []string{instDir, limaConfigDir} {
		if err := digestDir(h, dir); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digestDir writes dir's entries (sorted by name) to h: name, type and
// permission bits, size, modification time, and the content of small
// regular files.
func digestDir(h io.Writer, dir string) error {
	fmt.Fprintf(h, "dir %q\n", dir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(h, "absent")
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries { // os.ReadDir sorts by name
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s changed while being read", dir)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %s %d %d\n", e.Name(), info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() && info.Size() <= hashLimit {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			fmt.Fprintf(h, "content %x\n", sum)
		}
	}
	return nil
}

// configDigest is the digest of cfg's values.
func configDigest(cfg *config.Config) (string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// build identifies this marina build.
func build() string {
	i := buildinfo.Get()
	return strconv.Quote(i.Version) + " " + strconv.Quote(i.Commit) + " " + strconv.Quote(i.BuildDate)
}

// Save records st, marina-core's answer for the VM of cfg read from files
// whose fingerprint is fp, at path (atomically; 0600 in a 0700 directory).
func Save(path string, cfg *config.Config, fp string, st vm.Status) error {
	cd, err := configDigest(cfg)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(entry{Format: format, Build: build(), Config: cd, Fingerprint: fp, Status: st}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// Lookup returns the answer kept at path if this build recorded it for the
// same config and the same fingerprint fp; ok is false otherwise (no
// entry, another build, config or fingerprint, or an unreadable entry).
func Lookup(path string, cfg *config.Config, fp string) (st vm.Status, ok bool) {
	// Regular files only, and small: a FIFO or a runaway file there is a
	// miss, never a hang.
	b, err := userfile.ReadFile(path, hashLimit)
	if err != nil {
		return vm.Status{}, false
	}
	var e entry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return vm.Status{}, false
	}
	cd, err := configDigest(cfg)
	if err != nil || e.Format != format || e.Build != build() || e.Config != cd || e.Fingerprint != fp {
		return vm.Status{}, false
	}
	if e.Status.Driver != "lima" || e.Status.Name != cfg.VM.Name || e.Status.State != vm.Stopped {
		return vm.Status{}, false
	}
	return e.Status, true
}
