package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// keepRunLogs is how many per-run plugin log files ~/.marina/logs keeps.
const keepRunLogs = 20

// runLog is the per-run log file of plugin output
// (~/.marina/logs/<time>-<pid>.log), opened on first use.
type runLog struct {
	once sync.Once
	f    *os.File
	path string
}

// writer returns the run's log file, or io.Discard if it cannot be created
// (a warning says why; plugin logs still reach the terminal at the chosen level).
func (r *runLog) writer(stderr io.Writer) io.Writer {
	r.once.Do(func() {
		home, err := os.UserHomeDir()
		if err != nil {
			return
		}
		dir := filepath.Join(home, ".marina", "logs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fmt.Fprintf(stderr, "Warning: no plugin log file: %v\n", err)
			return
		}
		pruneRunLogs(dir, keepRunLogs-1)
		r.path = filepath.Join(dir, fmt.Sprintf("%s-%d.log", time.Now().UTC().Format("20060102T150405Z"), os.Getpid()))
		f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "Warning: no plugin log file: %v\n", err)
			return
		}
		fmt.Fprintf(f, "# marina %s\n", strings.Join(os.Args[1:], " "))
		r.f = f
	})
	if r.f == nil {
		return io.Discard
	}
	return r.f
}

// close closes the log file if it was opened.
func (r *runLog) close() {
	if r.f != nil {
		_ = r.f.Close()
	}
}

// pruneRunLogs keeps the newest keep files of dir (names sort by time).
func pruneRunLogs(dir string, keep int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var logs []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, e.Name())
		}
	}
	sort.Strings(logs)
	for len(logs) > keep {
		_ = os.Remove(filepath.Join(dir, logs[0]))
		logs = logs[1:]
	}
}
