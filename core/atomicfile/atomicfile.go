// Package atomicfile replaces files so that readers, concurrent writers and
// crashes only ever observe the complete old content or the complete new
// content, never a truncated or half-written file.
//
// marina uses it for every file it rewrites in place (~/.kube/config, its
// own config and state). The technique is the classic one: write a temporary
// file in the same directory, fsync it, set its mode, rename it over the
// destination (rename(2) is atomic within one filesystem) and fsync the
// directory so the rename itself survives a crash.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxSymlinkHops bounds symlink resolution, matching the kernel's ELOOP limit.
const maxSymlinkHops = 40

// rename is os.Rename; tests replace it to exercise the failure path after
// the temporary file has been written.
var rename = os.Rename

// WriteFile writes data to path atomically: a temp file in the same
// directory (so rename is atomic), fsync of the file, chmod, rename over
// path, fsync of the directory.
//
// If path exists its permission bits are preserved; otherwise perm is used,
// exactly: the mode is set with an explicit chmod, so the umask does not
// apply. If path is a symlink (for example a ~/.kube/config managed by a
// dotfiles tool) the file it points to is replaced and the link is kept; a
// dangling link gets its target created, as os.WriteFile would.
//
// The parent directory must exist: WriteFile does not create it, because
// callers know which mode the directory should have. On any error the
// temporary file is removed and the original file is untouched, except for
// an error syncing the directory after the rename, which the error says.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	return write(target, data, perm)
}

// Update reads path (old is nil if it does not exist), calls fn, and writes
// the bytes fn returns to path atomically with WriteFile's rules (mode,
// symlinks, parent directory). If fn returns an error the file is left
// untouched and that error is returned, wrapped with the path. If the file
// exists and fn returns exactly its current content, nothing is written.
//
// Update alone does not serialise writers: two concurrent Updates can read
// the same old content and the later rename silently drops the other's
// change. Callers that may race with another marina process or goroutine
// must hold the process lock (package core/lock) around Update.
func Update(path string, perm os.FileMode, fn func(old []byte) ([]byte, error)) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(target)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("update %s: read current content: %w", path, err)
	}
	data, err := fn(old)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	if exists && bytes.Equal(old, data) {
		return nil
	}
	return write(target, data, perm)
}

// write replaces target, which must not be a symlink, with data.
func write(target string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(target)
	if err := checkDir(target, dir); err != nil {
		return err
	}

	mode := perm.Perm()
	switch fi, err := os.Stat(target); {
	case err == nil:
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("write %s: it is not a regular file (mode %s); remove it or choose another path", target, fi.Mode())
		}
		mode = fi.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist):
		// New file: perm applies.
	default:
		return fmt.Errorf("write %s: %w", target, err)
	}

	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create temporary file in %s: %w", target, dir, err)
	}
	tmpName := tmp.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close() // may already be closed; the error is irrelevant then
			_ = os.Remove(tmpName)
		}
	}()

	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: write temporary file %s: %w", target, tmpName, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: chmod temporary file %s to %04o: %w", target, tmpName, mode, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: sync temporary file %s: %w", target, tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: close temporary file %s: %w", target, tmpName, err)
	}
	if err := rename(tmpName, target); err != nil {
		return fmt.Errorf("write %s: rename temporary file over it: %w", target, err)
	}
	renamed = true

	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: the new content is in place but may not survive a crash: sync directory %s: %w", target, dir, err)
	}
	return nil
}

// resolve is Resolve, its error naming the write.
func resolve(path string) (string, error) {
	p, err := Resolve(path)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return p, nil
}

// checkDir returns an error naming dir if it is not an existing directory.
func checkDir(target, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write %s: directory %s does not exist; create it first", target, dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("write %s: directory %s does not exist: part of its path is a regular file", target, dir)
	case err != nil:
		return fmt.Errorf("write %s: directory %s: %w", target, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("write %s: %s is not a directory; choose a path inside a directory", target, dir)
	}
	return nil
}

// syncDir fsyncs a directory so a rename inside it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}
