// Package userfile reads the files a user names on the command line or in
// the environment (the config file, Fleet manifests): regular files only,
// and never more than a limit, so a typo such as `-c /dev/zero`, a named
// pipe or a runaway file is a clear error instead of a hang or an
// out-of-memory kill.
package userfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxSize is the limit for the YAML files marina reads (config files, Fleet
// manifests): far above any real one (a few KiB), low enough that parsing
// stays cheap. The YAML library builds a node of a few hundred bytes per
// item: a config file of 4 MiB of "a," made marina 600 MB resident, 1 MiB
// about 230 MB.
const MaxSize = 1 << 20

// Error says why a user-named file was refused: it is not a regular file,
// or it is larger than the limit. It is bad input (exit status 2).
type Error struct {
	// Path is the file as the user named it ("<stdin>" for standard input).
	Path string
	// Reason says what is wrong and how to fix it.
	Reason string
}

func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// ExitCode makes a refused file a usage error (exit status 2).
func (e *Error) ExitCode() int { return 2 }

// ReadFile reads the regular file at path, refusing it when it is larger
// than limit bytes or is not a regular file (a directory, a named pipe, a
// device, a socket), with an *Error naming the path and what it is. Other
// failures (not found, permission denied) are the os errors, so callers can
// still test them with errors.Is(err, fs.ErrNotExist).
func ReadFile(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe must not wait for a writer before
	// the check below refuses it. It changes nothing for regular files.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{Path: path, Reason: fmt.Sprintf("is %s, not a regular file; give the path of a file", kind(st.Mode()))}
	}
	if st.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	return read(f, path, limit)
}

// Read reads all of r (standard input, say), refusing more than limit bytes
// with an *Error naming name.
func Read(r io.Reader, name string, limit int64) ([]byte, error) {
	return read(r, name, limit)
}

func read(r io.Reader, name string, limit int64) ([]byte, error) {
	// One byte more than the limit tells "exactly the limit" from "more".
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(name, limit)
	}
	return data, nil
}

func tooLarge(name string, limit int64) error {
	return &Error{Path: name, Reason: fmt.Sprintf("is larger than %s, the most marina reads from a config file or manifest; is it the right file?", Size(limit))}
}

// Size renders a byte count for messages: 4 MiB, 512 KiB, 100 bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// kind names a file mode for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a special file (mode " + m.String() + ")"
	}
}
