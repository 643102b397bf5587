package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolve: every name of one file resolves to the same path (the
// key of its lock, backups and state); a dangling link resolves to the file
// a write creates; a loop is an error that says so.
func TestResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	realDir := filepath.Join(dir, "dotfiles")
	if err := os.Mkdir(realDir, 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(realDir, "kubeconfig")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(real, filepath.Join(dir, "abs")))                  // absolute target
	must(os.Symlink("dotfiles/kubeconfig", filepath.Join(dir, "rel"))) // relative target
	must(os.Symlink("abs", filepath.Join(dir, "chain")))               // link to a link
	must(os.Symlink("dotfiles", filepath.Join(dir, "dirlink")))        // symlinked directory
	must(os.Symlink("nowhere/config", filepath.Join(dir, "dangling"))) // target missing
	must(os.Symlink("loop2", filepath.Join(dir, "loop1")))             // loop
	must(os.Symlink("loop1", filepath.Join(dir, "loop2")))
	t.Chdir(realDir)

	for _, name := range []string{
		real,
		filepath.Join(dir, "abs"),
		filepath.Join(dir, "rel"),
		filepath.Join(dir, "chain"),
		filepath.Join(dir, "dirlink", "kubeconfig"),
		filepath.Join(dir, "dirlink", "..", "dotfiles", "kubeconfig"),
		"kubeconfig", // relative to the working directory
	} {
		if got, err := Resolve(name); err != nil || got != real {
			t.Errorf("Resolve(%s) = %q, %v; want %s", name, got, err, real)
		}
	}
	if got, err := Resolve(filepath.Join(dir, "dangling")); err != nil || got != filepath.Join(dir, "nowhere", "config") {
		t.Errorf("dangling link: %q, %v", got, err)
	}
	if got, err := Resolve(filepath.Join(dir, "dirlink", "new", "config")); err != nil || got != filepath.Join(realDir, "new", "config") {
		t.Errorf("missing file under a symlinked directory: %q, %v", got, err)
	}
	if _, err := Resolve(filepath.Join(dir, "loop1")); err == nil || !strings.Contains(err.Error(), "symlink loop") {
		t.Errorf("loop: %v", err)
	}
}
