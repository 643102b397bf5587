// Package lock owns marina's per-user process lock: state-changing commands
// (up, down, cluster create/delete, plugin install, ...) take it so that two
// marina processes never modify the VM, the clusters or marina's files at the
// same time.
//
// The lock is flock(2) on a file (by convention ~/.marina/marina.lock). The
// kernel is the source of truth: it releases the lock when the holder exits,
// however it exits, so a crash never leaves a stale lock. The holder writes
// who it is (PID, command, start time) into the lock file so that a process
// that finds the lock taken can tell the user what it is waiting for; that
// content is informational only and is overwritten by the next holder.
//
// flock locks belong to an open file description, not to a process: a
// second Acquire in the same process opens the file again and conflicts with
// the first, exactly like another process would (it gets *HeldError, or
// waits). Callers take the lock once, near the top of a command, and pass
// the *Lock down rather than acquiring it again.
package lock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPollInterval is how often a waiting Acquire retries when
// Options.PollInterval is not set.
const DefaultPollInterval = 100 * time.Millisecond

// maxHolderBytes bounds how much of the lock file is read for holder info.
const maxHolderBytes = 4096

// Holder describes the process holding the lock, as recorded in the lock file.
// A zero PID means the holder is unknown (the file was empty or unreadable).
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// Options controls Acquire.
type Options struct {
	// Wait makes Acquire block until the lock is free (still honouring ctx)
	// instead of failing with *HeldError.
	Wait bool
	// Command is recorded in the lock file for other processes to show,
	// e.g. "marina cluster create dev". Empty means os.Args joined by spaces.
	Command string
	// OnWait, if set, is called once when Acquire starts waiting, with the
	// current holder, so the CLI can print "waiting for PID 123 (marina up)".
	OnWait func(Holder)
	// PollInterval is the retry interval while waiting; zero or negative
	// means DefaultPollInterval.
	PollInterval time.Duration
}

// Lock is a held process lock. Release it when the state change is done;
// the kernel releases it anyway when the process exits.
type Lock struct {
	path string
	mu   sync.Mutex
	f    *os.File // nil once released
}

// HeldError is returned by Acquire without Options.Wait when another open of
// the lock file (another process, or this one) holds the lock.
type HeldError struct {
	// Path is the lock file.
	Path string
	// Holder is what the holder recorded; PID 0 means unknown.
	Holder Holder
}

// Error says who holds the lock and what the user can do about it.
func (e *HeldError) Error() string {
	if e.Holder.PID != 0 && e.Holder.PID == os.Getpid() {
		return fmt.Sprintf("this process already holds the lock %s (%s); release it before acquiring it again",
			e.Path, describe(e.Holder))
	}
	return fmt.Sprintf("another marina process holds the lock %s: %s; wait for it to finish, or run without --no-wait to queue behind it",
		e.Path, describe(e.Holder))
}

// Acquire takes the exclusive lock on the file at path, creating the file
// (mode 0600) and, if missing, its parent directory (mode 0700).
//
// If the lock is held elsewhere, Acquire returns *HeldError, or with
// opts.Wait polls every opts.PollInterval until it is free or ctx is done;
// in the latter case the error wraps ctx.Err() and names the holder. On
// success the caller's PID, command and the current time are written into
// the lock file. The file descriptor is close-on-exec, so child processes
// (plugins) never inherit the lock.
func Acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
	if path == "" {
		return nil, errors.New("acquire lock: the lock file path is empty; pass a path such as ~/.marina/marina.lock")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire lock %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("acquire lock %s: create directory %s: %w", path, dir, err)
	}
	// os.OpenFile always sets O_CLOEXEC on Unix; it is spelled out because
	// a lock inherited by a long-running plugin would outlive marina.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("acquire lock %s: open: %w", path, err)
	}

	interval := opts.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	var timer *time.Timer
	for waiting := false; ; waiting = true {
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("acquire lock %s: flock: %w (is the file on a filesystem without flock support, such as some NFS mounts?)", path, err)
		}
		holder := readHolder(f)
		if !opts.Wait {
			_ = f.Close()
			return nil, &HeldError{Path: path, Holder: holder}
		}
		if !waiting && opts.OnWait != nil {
			opts.OnWait(holder)
		}
		if timer == nil {
			timer = time.NewTimer(interval)
			defer timer.Stop()
		} else {
			timer.Reset(interval)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("stopped waiting for the lock %s, held by %s: %w", path, describe(holder), ctx.Err())
		case <-timer.C:
		}
	}

	command := opts.Command
	if command == "" {
		command = strings.Join(os.Args, " ")
	}
	if err := writeHolder(f, Holder{PID: os.Getpid(), Command: command, Since: time.Now().Round(0)}); err != nil {
		_ = flock(f, unix.LOCK_UN)
		_ = f.Close()
		return nil, fmt.Errorf("acquire lock %s: record holder: %w", path, err)
	}
	return &Lock{path: path, f: f}, nil
}

// Path returns the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release unlocks and closes the lock file. The file itself is kept:
// deleting a flock file races with a process that has just opened it and
// would let two processes "hold" locks on different inodes. Release is safe
// to call more than once (and on a nil *Lock); later calls return nil.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	errUnlock := flock(f, unix.LOCK_UN)
	if errUnlock != nil {
		errUnlock = fmt.Errorf("release lock %s: unlock: %w", l.path, errUnlock)
	}
	errClose := f.Close() // closing releases the flock even if LOCK_UN failed
	if errClose != nil {
		errClose = fmt.Errorf("release lock %s: close: %w", l.path, errClose)
	}
	return errors.Join(errUnlock, errClose)
}

// flock calls flock(2) on f, retrying on EINTR.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for range 100 { // EINTR is rare; bounded all the same
			if ferr = unix.Flock(int(fd), how); ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// writeHolder records h as one JSON line. The line is written over the start
// of the file before the file is truncated to it, so a concurrent reader
// sees the old line or the new one, never an empty file.
func writeHolder(f *os.File, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(b)))
}

// readHolder returns the holder recorded in f's first line, or the zero
// Holder if there is none (a holder that has not written yet) or it does
// not parse.
func readHolder(f *os.File) Holder {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxHolderBytes))
	if err != nil {
		return Holder{}
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	var h Holder
	if err := json.Unmarshal(line, &h); err != nil || h.PID <= 0 {
		return Holder{}
	}
	return h
}

// describe renders a holder for messages: "PID 1234 (marina up) since 08:40:01".
func describe(h Holder) string {
	if h.PID <= 0 {
		return "holder unknown (the lock file records none yet)"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "PID %d", h.PID)
	if h.Command != "" {
		fmt.Fprintf(&s, " (%s)", h.Command)
	}
	if !h.Since.IsZero() {
		since := h.Since.Local()
		layout := "15:04:05"
		if since.Format(time.DateOnly) != time.Now().Format(time.DateOnly) {
			layout = time.DateTime
		}
		fmt.Fprintf(&s, " since %s", since.Format(layout))
	}
	return s.String()
}
