package pluginstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/bcollard/marina/core/atomicfile"
)

// racyWindow: a binary whose status changed (ctime) this close before its
// hashing started is hashed again next time rather than remembered. A
// file system stamps ctime from a coarse clock that may lag the wall
// clock by a tick; a write racing the hash could otherwise carry a ctime
// from before it (git's "racily clean" entries, the same rule).
var racyWindow = time.Second

// digestRecord is what hashing an installed binary found, and the file it
// found it in: the inode and the status the kernel keeps for it.
type digestRecord struct {
	Path     string    `json:"path"`
	File     fileStamp `json:"file"`
	SHA256   string    `json:"sha256"`
	HashedAt int64     `json:"hashedAtUnixNano"`
}

// digestDir holds one record per installed binary, named by the digest of
// its path.
func (s *Store) digestDir() string { return filepath.Join(s.root, ".cache", "digests") }

func (s *Store) digestPath(binary string) string {
	sum := sha256.Sum256([]byte(binary))
	return filepath.Join(s.digestDir(), hex.EncodeToString(sum[:16])+".json")
}

// listedDigest is the sha256 of the binary at path as `marina plugin list`
// reports it: the one recorded when the binary was last hashed, while the
// file is the same inode with the same size, mode, mtime and ctime, and
// that ctime is older than the hashing. No write, truncation, chmod,
// rename over it or copy onto it leaves ctime unchanged (only setting the
// system clock can, which takes root), so either check alone catches a
// change after the hashing. Otherwise the binary is hashed, and recorded.
// Launches never use the record: Verify hashes before every launch
// (hashAndRecord), and so does `plugin verify`.
func (s *Store) listedDigest(path string) (string, error) { return s.digest(path, true) }

// hashAndRecord hashes the binary at path, and records the digest for
// listedDigest.
func (s *Store) hashAndRecord(path string) (string, error) { return s.digest(path, false) }

func (s *Store) digest(path string, useRecord bool) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, ok := stampOf(f)
	if useRecord && ok {
		if rec, found := s.readDigest(path); found && rec.File == st && st.CtimeNano < rec.HashedAt-int64(racyWindow) {
			return rec.SHA256, nil
		}
	}
	return s.hashOpen(f, path, st, ok)
}

// hashOpen hashes f and, when its status was the same before and after and
// is older than the racy window, records the digest. The record is an
// optimisation: failing to write it is not an error.
func (s *Store) hashOpen(f *os.File, path string, before fileStamp, stamped bool) (string, error) {
	start := time.Now().UnixNano()
	sum, err := hashReader(f)
	if err != nil {
		return "", err
	}
	if after, ok := stampOf(f); stamped && ok && after == before && before.CtimeNano < start-int64(racyWindow) {
		if data, err := json.Marshal(digestRecord{Path: path, File: before, SHA256: sum, HashedAt: start}); err == nil {
			if os.MkdirAll(s.digestDir(), 0o755) == nil {
				_ = atomicfile.WriteFile(s.digestPath(path), data, 0o644)
			}
		}
	}
	return sum, nil
}

// readDigest reads the record for path; a missing, unreadable or foreign
// one is not found.
func (s *Store) readDigest(path string) (digestRecord, bool) {
	data, err := os.ReadFile(s.digestPath(path))
	if err != nil || len(data) > 4096 {
		return digestRecord{}, false
	}
	var rec digestRecord
	if json.Unmarshal(data, &rec) != nil || rec.Path != path || !isHexSHA256(rec.SHA256) {
		return digestRecord{}, false
	}
	return rec, true
}
