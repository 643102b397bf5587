//go:build unix

package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
)

// maxSocketPath bounds the path of a plugin's unix socket: sun_path holds
// 104 bytes on macOS (108 on Linux), terminating NUL included.
const maxSocketPath = 100

// socketNameReserve is what go-plugin appends to the directory it is given:
// its socket dir (os.MkdirTemp "plugin-dir*") and the socket inside it
// (os.CreateTemp "plugin*"), each with up to 10 random digits.
var socketNameReserve = len("/plugin-dir0123456789/plugin0123456789")

// DefaultRunDir is marina's run directory, ~/.marina/run, or "" when the
// home directory is unknown.
func DefaultRunDir() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".marina", "run")
}

// ownerRE matches the name of a marina process's socket base directory:
// its pid and, where the OS tells, its start time.
var ownerRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+)(?:-([0-9]+))?$`) })

var socketBases = struct {
	sync.Mutex
	users map[string]int // base dir -> plugins using it
}{users: map[string]int{}}

// acquireSocketBase returns the directory go-plugin makes this plugin's
// socket dir in: <runDir>/plugins/<pid>-<start> of this marina process
// (0700), so that the sockets of a marina that was killed are found and
// removed by the next one. The first use of a run dir sweeps the dirs of
// marina processes that no longer run. When runDir cannot be used, or its
// socket paths would be too long, $TMPDIR/marina-<uid>/run or
// /tmp/marina-<uid>/run is used; when all fail, "" (go-plugin's default,
// the system temp dir). release
// removes the base dir once no plugin of this process uses it. A run dir
// is used only if its plugins dir is this user's and private.
func acquireSocketBase(runDir string) (base string, release func(), err error) {
	var tried []error
	for _, root := range runDirCandidates(runDir) {
		b, err := useSocketBase(root)
		if err != nil {
			tried = append(tried, err)
			continue
		}
		var once sync.Once
		return b, func() { once.Do(func() { dropSocketBase(b) }) }, errors.Join(tried...)
	}
	return "", func() {}, errors.Join(tried...)
}

// runDirCandidates lists the run dirs to try: runDir (or the default),
// then $TMPDIR/marina-<uid>/run, then /tmp/marina-<uid>/run (macOS's
// $TMPDIR is too long for socket paths).
func runDirCandidates(runDir string) []string {
	if runDir == "" {
		runDir = DefaultRunDir()
	}
	own := "marina-" + strconv.Itoa(os.Getuid())
	var out []string
	for _, d := range []string{runDir, filepath.Join(os.TempDir(), own, "run"), filepath.Join("/tmp", own, "run")} {
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// ownerName names this process's base dir: pid and start time.
func ownerName() string {
	pid := os.Getpid()
	if start, ok := procStart(pid); ok {
		return fmt.Sprintf("%d-%d", pid, start)
	}
	return strconv.Itoa(pid)
}

func useSocketBase(root string) (string, error) {
	plugins := filepath.Join(root, "plugins")
	base := filepath.Join(plugins, ownerName())
	if len(base)+socketNameReserve > maxSocketPath {
		return "", fmt.Errorf("run directory %s: its socket paths would exceed %d bytes", root, maxSocketPath)
	}
	socketBases.Lock()
	defer socketBases.Unlock()
	if socketBases.users[base] > 0 {
		socketBases.users[base]++
		return base, nil
	}
	if err := os.MkdirAll(plugins, 0o700); err != nil {
		return "", fmt.Errorf("run directory %s: %w", root, err)
	}
	if err := checkPrivate(plugins); err != nil {
		return "", fmt.Errorf("run directory %s: %w", root, err)
	}
	sweepSocketBases(plugins)
	if err := os.Mkdir(base, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("run directory %s: %w", root, err)
	}
	socketBases.users[base]++
	return base, nil
}

// checkPrivate refuses a directory that is a symlink, is not owned by
// this user, or that others may write to (e.g. a /tmp/marina-<uid> made
// by someone else to catch marina's sockets).
func checkPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s belongs to uid %d, not to this user (%d): remove it", dir, st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %v): chmod 700 it", dir, fi.Mode().Perm())
	}
	return nil
}

func dropSocketBase(base string) {
	socketBases.Lock()
	defer socketBases.Unlock()
	socketBases.users[base]--
	if socketBases.users[base] <= 0 {
		delete(socketBases.users, base)
		_ = os.RemoveAll(base)
	}
}

// sweepSocketBases removes the base dirs in plugins whose marina process
// no longer runs (the socket dirs a killed marina left behind). A dir of
// a pid that now belongs to another process (its start time differs) is
// removed too; other names are left alone.
func sweepSocketBases(plugins string) {
	entries, err := os.ReadDir(plugins)
	if err != nil {
		return
	}
	for _, e := range entries {
		m := ownerRE().FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if ownerAlive(pid, m[2]) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(plugins, e.Name()))
	}
}

// ownerAlive reports whether process pid, started at start ("" when the
// name carries none), still runs.
func ownerAlive(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	if got, ok := procStart(pid); ok {
		return start == "" || strconv.FormatUint(got, 10) == start
	}
	if _, ok := procStart(os.Getpid()); ok {
		return false // start times are readable here: pid is gone
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
