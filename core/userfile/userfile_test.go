package userfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/core/exitcode"
)

func TestReadFileRegular(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	want := bytes.Repeat([]byte("a"), 1000)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, 1000) // exactly the limit is fine
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadFile = %d bytes, %v", len(got), err)
	}
	link := filepath.Join(dir, "link.yaml") // a symlink to a regular file is that file
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(link, 1000); err != nil || len(got) != 1000 {
		t.Fatalf("via symlink: %d bytes, %v", len(got), err)
	}
}

func TestReadFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, bytes.Repeat([]byte("a"), 1001), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path, 1000)
	var ue *Error
	if !errors.As(err, &ue) || ue.Path != path || !strings.Contains(err.Error(), "larger than 1000 bytes") {
		t.Fatalf("err = %v", err)
	}
	if exitcode.Of(err) != exitcode.Usage {
		t.Fatalf("exit status %d, want 2", exitcode.Of(err))
	}
}

// TestReadFileSpecial: devices, directories and named pipes are refused at
// once, naming what they are; /dev/zero is not read until memory runs out and
// a FIFO without a writer does not hang.
func TestReadFileSpecial(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, what string }{
		{"/dev/zero", "a character device"},
		{"/dev/null", "a character device"},
		{dir, "a directory"},
		{fifo, "a named pipe (FIFO)"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(tc.path, MaxSize)
			done <- err
		}()
		select {
		case err := <-done:
			var ue *Error
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.path+": is "+tc.what+", not a regular file") {
				t.Errorf("%s: err = %v", tc.path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadFile still blocked after 5s", tc.path)
		}
	}
}

func TestReadFileMissingKeepsOSError(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.yaml"), MaxSize)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestRead(t *testing.T) {
	if got, err := Read(strings.NewReader("abc"), "<stdin>", 3); err != nil || string(got) != "abc" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	_, err := Read(strings.NewReader("abcd"), "<stdin>", 3)
	if err == nil || !strings.HasPrefix(err.Error(), "<stdin>: is larger than 3 bytes") {
		t.Fatalf("err = %v", err)
	}
	// An endless reader stops at the limit.
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Read(f, "<stdin>", 1<<20); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Fatalf("endless reader: %v", err)
	}
}
