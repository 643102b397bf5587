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

// maxRunLog caps one run's log file. core/plugin already caps each
// plugin's stderr per hook (1 MiB and a tail); this bounds a run of many
// plugins and hooks, so that no run can fill the disk.
const maxRunLog = 64 << 20

// runLog is the per-run log file of plugin output
// (~/.marina/logs/<time>-<pid>.log), opened on first use.
type runLog struct {
	once  sync.Once
	f     *os.File
	w     *cappedWriter
	path  string
	limit int64 // bytes (0: maxRunLog)
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
		limit := r.limit
		if limit <= 0 {
			limit = maxRunLog
		}
		r.w = &cappedWriter{w: f, limit: limit}
	})
	if r.w == nil {
		return io.Discard
	}
	return r.w
}

// cappedWriter writes whole writes (lines) until limit bytes are used,
// then one line saying the log is full, and drops the rest.
type cappedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	limit int64
	used  int64
	full  bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.full {
		return len(p), nil
	}
	if c.used+int64(len(p)) > c.limit {
		c.full = true
		limit := fmt.Sprintf("%d bytes", c.limit)
		if c.limit%(1<<20) == 0 {
			limit = fmt.Sprintf("%d MiB", c.limit>>20)
		}
		_, err := fmt.Fprintf(c.w, "# marina: this run log reached its limit of %s; later plugin output is left out of it\n", limit)
		return len(p), err
	}
	c.used += int64(len(p))
	return c.w.Write(p)
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
