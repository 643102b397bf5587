package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Resolve returns the file that path names: an absolute path with every
// symlink in it followed, the last component too, even when it is a
// dangling link (whose target a write creates, as kubectl's would) or does
// not exist yet. Two names of one file, say ~/.kube/config as a symlink and
// the dotfiles file it points to, resolve to the same string (what
// kubeconfig's lock, backups and state are keyed on), and a write through
// either replaces that file and keeps the link.
func Resolve(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("make the path absolute: %w", err)
	}
	for range maxSymlinkHops {
		dir, err := resolveDir(filepath.Dir(p))
		if err != nil {
			return "", err
		}
		p = filepath.Join(dir, filepath.Base(p))
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return p, nil // reading or writing it reports a bad parent better
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		link, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("read symlink %s: %w", p, err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(p), link)
		}
		p = link
	}
	return "", fmt.Errorf("more than %d levels of symlinks; check for a symlink loop", maxSymlinkHops)
}

// resolveDir follows the symlinks of an absolute directory path. Of a
// directory that does not exist yet, the deepest existing ancestor is
// resolved and the rest appended unchanged.
func resolveDir(dir string) (string, error) {
	var rest []string
	for d := dir; ; d = filepath.Dir(d) {
		r, err := filepath.EvalSymlinks(d)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", fmt.Errorf("resolve directory %s: %w", d, err)
		}
		if parent := filepath.Dir(d); parent == d {
			return dir, nil
		}
		rest = append([]string{filepath.Base(d)}, rest...)
	}
}
