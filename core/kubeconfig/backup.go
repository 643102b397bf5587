package kubeconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bcollard/marina/core/atomicfile"
)

// BackupSuffix starts the name of a kubeconfig file's backups:
// <file>.marina.bak.<time>, where <file> is the file's resolved path
// (symlinks followed) and <time> is when the backup was made, in UTC, e.g.
// config.marina.bak.20250102T150405.123456789Z. Names sort by age.
const BackupSuffix = ".marina.bak"

// backupTimeLayout is the <time> of a backup's name; fixed width, so that
// names sort like the times.
const backupTimeLayout = "20060102T150405.000000000Z"

// KeepBackups is how many backups of each kubeconfig file marina keeps: a
// new one deletes the oldest beyond that.
const KeepBackups = 5

// now is time.Now; tests move it.
var now = time.Now

// writeBackup saves data, the content of the kubeconfig file at real (a
// resolved path) before a change, as a new backup generation, deletes the
// generations beyond KeepBackups, and returns the new backup's path. The
// caller holds the file's lock.
func writeBackup(real string, data []byte) (string, []string, error) {
	t := now().UTC()
	var bak string
	for range 1000 {
		bak = real + BackupSuffix + "." + t.Format(backupTimeLayout)
		if _, err := os.Lstat(bak); errors.Is(err, fs.ErrNotExist) {
			break
		}
		t = t.Add(time.Nanosecond) // same instant as an earlier run: the next name
	}
	if err := atomicfile.WriteFile(bak, data, 0o600); err != nil {
		return "", nil, fmt.Errorf("back up %s before changing it: %w", real, err)
	}
	if err := narrowMode(bak); err != nil {
		return "", nil, err
	}
	return bak, pruneBackups(real), nil
}

// Backups lists the backups of the kubeconfig file at path (symlinks are
// followed: backups are named after the real file), oldest first.
func Backups(path string) ([]string, error) {
	real, err := resolvePath(path)
	if err != nil {
		return nil, err
	}
	return backupsOf(real)
}

// backupsOf lists real's backup generations, oldest first. Files whose
// name only looks like one (no valid time) are not listed.
func backupsOf(real string) ([]string, error) {
	prefix := filepath.Base(real) + BackupSuffix + "."
	entries, err := os.ReadDir(filepath.Dir(real))
	if err != nil {
		return nil, fmt.Errorf("list the backups of %s: %w", real, err)
	}
	var out []string
	for _, e := range entries {
		ts, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := time.Parse(backupTimeLayout, ts); err != nil {
			continue
		}
		out = append(out, filepath.Join(filepath.Dir(real), e.Name()))
	}
	slices.Sort(out)
	return out, nil
}

// pruneBackups deletes real's oldest backups beyond KeepBackups and
// returns warnings for those it could not delete or list.
func pruneBackups(real string) []string {
	baks, err := backupsOf(real)
	if err != nil {
		return []string{err.Error()}
	}
	var warnings []string
	for len(baks) > KeepBackups {
		if err := os.Remove(baks[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("could not delete the old backup %s: %v; delete it yourself", baks[0], err))
		}
		baks = baks[1:]
	}
	return warnings
}
