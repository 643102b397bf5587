package migrate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	units "github.com/docker/go-units"

	"github.com/bcollard/marina/core/atomicfile"
)

// rename is os.Rename; tests replace it to make a move cross filesystems.
var rename = os.Rename

// afterCopy, when set (tests), runs between copying a tree and verifying it.
var afterCopy func(copyDir string)

// tmpSuffix names the copy of a directory being moved across filesystems.
// A leftover of an interrupted run is only ever this incomplete copy (the
// original is removed after the copy is renamed into place), so it is
// removed before a new copy starts.
const tmpSuffix = ".marina-migrate-tmp"

// moveDir moves the directory src to dst, which must not exist or be an
// empty directory: a rename on one filesystem, otherwise a copy that is
// verified file by file before it is renamed into place and src removed.
// On any error src is untouched. It returns what it did.
func moveDir(ctx context.Context, src, dst string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	empty, err := emptyOrMissing(dst)
	if err != nil {
		return "", err
	}
	if !empty {
		return "", fmt.Errorf("%s exists and is not empty; nothing was moved", dst)
	}
	if exists(dst) {
		if err := os.Remove(dst); err != nil {
			return "", fmt.Errorf("remove the empty %s: %w", dst, err)
		}
	}
	err = rename(src, dst)
	if err == nil {
		return "renamed", nil
	}
	if !errors.Is(err, syscall.EXDEV) {
		return "", fmt.Errorf("rename %s to %s: %w", src, dst, err)
	}
	tmp := dst + tmpSuffix
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("remove the leftover copy %s: %w", tmp, err)
	}
	size, files, err := copyTree(ctx, src, tmp)
	if err == nil && afterCopy != nil {
		afterCopy(tmp)
	}
	if err == nil {
		err = verifyTree(ctx, src, tmp)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("copy %s to %s (another filesystem): %w; the original is kept", src, dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("rename the verified copy %s to %s: %w; the original is kept", tmp, dst, err)
	}
	if err := os.RemoveAll(src); err != nil {
		return "", fmt.Errorf("copied and verified %s to %s, but removing the original failed: %w; remove it by hand", src, dst, err)
	}
	return fmt.Sprintf("copied %s (%s) to another filesystem, verified them, removed the original", count(files, "file"), humanSize(size)), nil
}

// copyTree copies the directory src to dst (which must not exist): files
// with their modes and modification times, directories, symlinks.
func copyTree(ctx context.Context, src, dst string) (int64, int, error) {
	var size int64
	var files int
	type dirMode struct {
		path string
		mode fs.FileMode
		info fs.FileInfo
	}
	var dirs []dirMode
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			// Writable while copying; the real mode is set at the end.
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, info.Mode().Perm(), info})
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			if err := copyFile(path, target, info); err != nil {
				return err
			}
			size += info.Size()
			files++
		default:
			return fmt.Errorf("%s is a special file (%s) that cannot be copied", path, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		// Deepest first, so that setting a directory's time is not undone
		// by a change inside it.
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return 0, 0, err
		}
		if err := os.Chtimes(dirs[i].path, dirs[i].info.ModTime(), dirs[i].info.ModTime()); err != nil {
			return 0, 0, err
		}
	}
	return size, files, nil
}

func copyFile(src, dst string, info fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(dst, info.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(dst, info.ModTime(), info.ModTime())
}

// verifyTree checks that dst holds exactly what src holds: the same
// entries, the same kinds, symlinks to the same targets, files of the same
// size and SHA-256.
func verifyTree(ctx context.Context, src, dst string) error {
	seen := 0
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		seen++
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		a, err := os.Lstat(path)
		if err != nil {
			return err
		}
		b, err := os.Lstat(target)
		if err != nil {
			return fmt.Errorf("the copy lacks %s", rel)
		}
		if a.Mode().Type() != b.Mode().Type() {
			return fmt.Errorf("%s: the copy is a %s, the original a %s", rel, b.Mode().Type(), a.Mode().Type())
		}
		switch {
		case a.Mode()&fs.ModeSymlink != 0:
			la, _ := os.Readlink(path)
			lb, _ := os.Readlink(target)
			if la != lb {
				return fmt.Errorf("%s: the copied link points elsewhere", rel)
			}
		case a.Mode().IsRegular():
			if a.Size() != b.Size() {
				return fmt.Errorf("%s: the copy has %d bytes, the original %d", rel, b.Size(), a.Size())
			}
			ha, err := fileHash(path)
			if err != nil {
				return err
			}
			hb, err := fileHash(target)
			if err != nil {
				return err
			}
			if !bytes.Equal(ha, hb) {
				return fmt.Errorf("%s: the copy's content differs (SHA-256)", rel)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	count := 0
	if err := filepath.WalkDir(dst, func(_ string, _ fs.DirEntry, err error) error {
		count++
		return err
	}); err != nil {
		return err
	}
	if count != seen {
		return fmt.Errorf("the copy has %d entries, the original %d", count, seen)
	}
	return nil
}

func fileHash(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// treeSize sums the sizes of the regular files under dir.
func treeSize(dir string) (int64, int, error) {
	var size int64
	var files int
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			size += info.Size()
			files++
		}
		return nil
	})
	return size, files, err
}

func humanSize(n int64) string { return units.BytesSize(float64(n)) }

// copyKubeconfig copies a kubeconfig atomically to dst with mode 0600,
// creating its directory (0700), and checks the copy.
func copyKubeconfig(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	if err := atomicfile.WriteFile(dst, data, 0o600); err != nil {
		return err
	}
	if err := narrowMode(dst); err != nil {
		return err
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("the copy %s differs from %s after writing", dst, src)
	}
	return nil
}

// narrowMode makes path 0600 if others may read or write it (it holds
// credentials).
func narrowMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(path, 0o600)
	}
	return nil
}
