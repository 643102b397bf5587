package pluginstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listed runs ListInstalls and returns the error of the install at path.
func listed(t *testing.T, s *Store, path string) error {
	t.Helper()
	results, err := s.ListInstalls(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Installed.Path == path {
			return r.Err
		}
	}
	t.Fatalf("ListInstalls has no %s: %+v", path, results)
	return nil
}

func readRecord(t *testing.T, s *Store, path string) (digestRecord, bool) {
	t.Helper()
	rec, ok := s.readDigest(path)
	return rec, ok
}

func writeRecord(t *testing.T, s *Store, path string, rec digestRecord) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.digestPath(path), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestListedDigest: `plugin list` takes a binary's digest from the record
// of its last hashing while the file is unchanged, and hashes it again on
// any change a copy, an editor, a chmod or a rename can make, even one that
// keeps the size and restores the mtime. Launches and `plugin verify`
// always hash.
func TestListedDigest(t *testing.T) {
	old := racyWindow
	racyWindow = 50 * time.Millisecond
	t.Cleanup(func() { racyWindow = old })

	s := newStore(t)
	inst := mustInstall(t, s, bins.v120, InstallOptions{})
	other := mustInstall(t, s, bins.v130, InstallOptions{})

	// Hashed within the racy window of its last change: not remembered.
	if err := listed(t, s, inst.Path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(inst.Path); time.Since(st.ModTime()) < racyWindow/2 {
		if _, ok := readRecord(t, s, inst.Path); ok {
			t.Fatal("a binary changed within the racy window was remembered")
		}
	}
	time.Sleep(2 * racyWindow)
	if err := listed(t, s, inst.Path); err != nil {
		t.Fatal(err)
	}
	rec, ok := readRecord(t, s, inst.Path)
	if !ok || rec.SHA256 != inst.SHA256 {
		t.Fatalf("record after listing = %+v, %v; want the install's sha256", rec, ok)
	}

	// The record is what listing uses: a forged digest shows.
	forged := rec
	forged.SHA256 = strings.Repeat("0", 64)
	writeRecord(t, s, inst.Path, forged)
	wantErr(t, listed(t, s, inst.Path), ErrModified, "sha256 000000")
	// A launch hashes, and records what it found.
	if err := s.Verify(inst); err != nil {
		t.Fatalf("Verify with a forged record: %v", err)
	}
	if err := listed(t, s, inst.Path); err != nil {
		t.Fatalf("after Verify re-recorded: %v", err)
	}
	// So does `plugin verify`.
	writeRecord(t, s, inst.Path, forged)
	if results, err := s.VerifyAll(); err != nil || len(results) != 2 || results[0].Err != nil || results[1].Err != nil {
		t.Fatalf("VerifyAll with a forged record: %+v, %v", results, err)
	}

	// A record of another path, or unreadable, is not used.
	if rec, ok := readRecord(t, s, inst.Path); ok {
		rec.Path = other.Path
		writeRecord(t, s, inst.Path, forged)
		rec.SHA256 = strings.Repeat("0", 64)
		writeRecord(t, s, other.Path, rec)
		if err := listed(t, s, other.Path); err != nil {
			t.Fatalf("a record carrying another file's stamp was used: %v", err)
		}
	}
	if err := os.WriteFile(s.digestPath(inst.Path), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := listed(t, s, inst.Path); err != nil {
		t.Fatalf("corrupt record: %v", err)
	}

	remembered := func() {
		t.Helper()
		time.Sleep(2 * racyWindow)
		if err := listed(t, s, inst.Path); err != nil {
			t.Fatal(err)
		}
		if rec, ok := readRecord(t, s, inst.Path); !ok || rec.SHA256 != inst.SHA256 {
			t.Fatalf("not remembered: %+v", rec)
		}
	}
	info, err := os.Stat(inst.Path)
	if err != nil {
		t.Fatal(err)
	}
	mtime := info.ModTime()

	// One byte changed in place, same size, mtime put back.
	remembered()
	f, err := os.OpenFile(inst.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(inst.Path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	wantErr(t, listed(t, s, inst.Path), ErrModified, "modified after install")
	b[0] ^= 0xff
	if f, err = os.OpenFile(inst.Path, os.O_RDWR, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// Another binary renamed over it, its mtime set to the original's.
	remembered()
	data, err := os.ReadFile(other.Path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(inst.Path), ".new")
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(inst.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, inst.Path); err != nil {
		t.Fatal(err)
	}
	wantErr(t, listed(t, s, inst.Path), ErrModified, "modified after install")
	if err := os.WriteFile(inst.Path, orig, 0o755); err != nil {
		t.Fatal(err)
	}

	// A chmod is a change too: hashed again (same bytes: intact).
	remembered()
	before, _ := readRecord(t, s, inst.Path)
	if err := os.Chmod(inst.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * racyWindow)
	if err := listed(t, s, inst.Path); err != nil {
		t.Fatal(err)
	}
	if after, _ := readRecord(t, s, inst.Path); after.HashedAt == before.HashedAt || after.File.Mode == before.File.Mode {
		t.Errorf("a chmod did not make listing hash again: %+v then %+v", before, after)
	}

	// Removing a version removes its record; the other's stays.
	time.Sleep(2 * racyWindow)
	if err := listed(t, s, other.Path); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(inst.Name, inst.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.digestPath(inst.Path)); !os.IsNotExist(err) {
		t.Errorf("the removed version's record is still there: %v", err)
	}
	if _, ok := readRecord(t, s, other.Path); !ok {
		t.Error("removing one version removed another's record")
	}
}
