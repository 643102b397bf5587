package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// listDir returns the sorted names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func writeOrig(t *testing.T, path string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // os.WriteFile honours the umask
		t.Fatal(err)
	}
}

func assertFile(t *testing.T, path, want string, wantMode os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s content = %q, want %q", path, got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != wantMode {
		t.Errorf("%s mode = %04o, want %04o", path, fi.Mode().Perm(), wantMode)
	}
}

func TestWriteFileNewFileGetsPermExactlyWhateverTheUmask(t *testing.T) {
	tests := []struct {
		perm  os.FileMode
		umask int
	}{
		{0o600, 0o022},
		{0o644, 0o077},
		{0o666, 0o022},
		{0o640, 0o027},
		{0o755, 0o077},
		{0o400, 0o000},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("perm=%04o,umask=%04o", tt.perm, tt.umask), func(t *testing.T) {
			old := syscall.Umask(tt.umask)
			t.Cleanup(func() { syscall.Umask(old) })
			path := filepath.Join(t.TempDir(), "config")
			if err := WriteFile(path, []byte("new"), tt.perm); err != nil {
				t.Fatal(err)
			}
			assertFile(t, path, "new", tt.perm)
		})
	}
}

func TestWriteFilePreservesExistingMode(t *testing.T) {
	tests := []struct {
		existing, perm os.FileMode
	}{
		{0o600, 0o644},
		{0o644, 0o600},
		{0o755, 0o600},
		{0o640, 0o666},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("existing=%04o,perm=%04o", tt.existing, tt.perm), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config")
			writeOrig(t, path, "a much longer original content", tt.existing)
			if err := WriteFile(path, []byte("short"), tt.perm); err != nil {
				t.Fatal(err)
			}
			assertFile(t, path, "short", tt.existing)
		})
	}
}

func TestWriteFileThroughSymlinkKeepsTheLink(t *testing.T) {
	tests := []struct {
		name string
		// setup creates the link structure under dir and returns the path to
		// write to, the file that must receive the content, and the links
		// (path -> readlink value) that must be unchanged afterwards.
		setup    func(t *testing.T, dir string) (path, target string, links map[string]string)
		wantMode os.FileMode
	}{
		{
			name: "absolute link",
			setup: func(t *testing.T, dir string) (string, string, map[string]string) {
				target := filepath.Join(dir, "dotfiles", "kubeconfig")
				mustMkdir(t, filepath.Dir(target))
				writeOrig(t, target, "old", 0o600)
				link := filepath.Join(dir, "config")
				mustSymlink(t, target, link)
				return link, target, map[string]string{link: target}
			},
			wantMode: 0o600,
		},
		{
			name: "relative link",
			setup: func(t *testing.T, dir string) (string, string, map[string]string) {
				target := filepath.Join(dir, "dotfiles", "kubeconfig")
				mustMkdir(t, filepath.Dir(target))
				writeOrig(t, target, "old", 0o640)
				link := filepath.Join(dir, "config")
				mustSymlink(t, "dotfiles/kubeconfig", link)
				return link, target, map[string]string{link: "dotfiles/kubeconfig"}
			},
			wantMode: 0o640,
		},
		{
			name: "chain of links",
			setup: func(t *testing.T, dir string) (string, string, map[string]string) {
				target := filepath.Join(dir, "real")
				writeOrig(t, target, "old", 0o600)
				mid := filepath.Join(dir, "mid")
				mustSymlink(t, "real", mid)
				link := filepath.Join(dir, "config")
				mustSymlink(t, mid, link)
				return link, target, map[string]string{link: mid, mid: "real"}
			},
			wantMode: 0o600,
		},
		{
			name: "dangling link creates the target",
			setup: func(t *testing.T, dir string) (string, string, map[string]string) {
				target := filepath.Join(dir, "real")
				link := filepath.Join(dir, "config")
				mustSymlink(t, "real", link)
				return link, target, map[string]string{link: "real"}
			},
			wantMode: 0o644, // perm, as the target is new
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, target, links := tt.setup(t, dir)
			if err := WriteFile(path, []byte("new content"), 0o644); err != nil {
				t.Fatal(err)
			}
			assertFile(t, target, "new content", tt.wantMode)
			for link, want := range links {
				fi, err := os.Lstat(link)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("%s was replaced by a %s; want the symlink kept", link, fi.Mode().Type())
				}
				got, err := os.Readlink(link)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s -> %q, want -> %q", link, got, want)
				}
			}
		})
	}
}

func TestWriteFileSymlinkLoopIsAnError(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mustSymlink(t, b, a)
	mustSymlink(t, a, b)
	err := WriteFile(a, []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "symlink loop") {
		t.Fatalf("WriteFile on a symlink loop: err = %v, want it to mention the loop", err)
	}
}

func TestFailureLeavesOriginalUntouched(t *testing.T) {
	errFn := errors.New("fn refused")
	tests := []struct {
		name string
		// run performs the failing operation; orig is an existing file in dir.
		run     func(t *testing.T, dir, orig string) error
		wantErr string // substring of the error
		wantIs  error
	}{
		{
			name: "parent is a regular file",
			run: func(t *testing.T, dir, orig string) error {
				return WriteFile(filepath.Join(orig, "child"), []byte("new"), 0o600)
			},
			wantErr: "is not a directory",
		},
		{
			name: "grandparent is a regular file",
			run: func(t *testing.T, dir, orig string) error {
				return WriteFile(filepath.Join(orig, "sub", "child"), []byte("new"), 0o600)
			},
			wantErr: "part of its path is a regular file",
		},
		{
			name: "parent does not exist",
			run: func(t *testing.T, dir, orig string) error {
				return WriteFile(filepath.Join(dir, "missing", "child"), []byte("new"), 0o600)
			},
			wantErr: "directory " + "MISSING" + " does not exist; create it first",
		},
		{
			name: "path is a directory",
			run: func(t *testing.T, dir, orig string) error {
				mustMkdir(t, filepath.Join(dir, "adir"))
				return WriteFile(filepath.Join(dir, "adir"), []byte("new"), 0o600)
			},
			wantErr: "not a regular file",
		},
		{
			name: "rename fails after the temp file was written",
			run: func(t *testing.T, dir, orig string) error {
				rename = func(string, string) error { return errors.New("injected rename failure") }
				t.Cleanup(func() { rename = os.Rename })
				return WriteFile(orig, []byte("new"), 0o644)
			},
			wantErr: "injected rename failure",
		},
		{
			name: "update fn returns an error",
			run: func(t *testing.T, dir, orig string) error {
				return Update(orig, 0o644, func(old []byte) ([]byte, error) {
					return []byte("new"), errFn
				})
			},
			wantErr: "fn refused",
			wantIs:  errFn,
		},
		{
			name: "update fails to write",
			run: func(t *testing.T, dir, orig string) error {
				rename = func(string, string) error { return errors.New("injected rename failure") }
				t.Cleanup(func() { rename = os.Rename })
				return Update(orig, 0o644, func(old []byte) ([]byte, error) {
					return append(old, " and more"...), nil
				})
			},
			wantErr: "injected rename failure",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			orig := filepath.Join(dir, "config")
			writeOrig(t, orig, "original", 0o600)
			before := listDir(t, dir)

			err := tt.run(t, dir, orig)

			wantErr := strings.ReplaceAll(tt.wantErr, "MISSING", filepath.Join(dir, "missing"))
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			assertFile(t, orig, "original", 0o600)
			after := slices.DeleteFunc(listDir(t, dir), func(n string) bool { return n == "adir" })
			if !slices.Equal(before, after) {
				t.Errorf("directory entries changed from %q to %q; a temp file was left behind", before, after)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	tests := []struct {
		name      string
		existing  *string // nil: file does not exist
		fn        func(old []byte) ([]byte, error)
		wantOld   []byte
		want      string
		wantMode  os.FileMode
		wantSame  bool // the file must not have been rewritten (same inode)
		wantExist bool
	}{
		{
			name:     "missing file: fn gets nil, perm applies",
			fn:       func(old []byte) ([]byte, error) { return []byte("created"), nil },
			wantOld:  nil,
			want:     "created",
			wantMode: 0o640,
		},
		{
			name:     "existing file: fn gets its content, mode preserved",
			existing: ptr("one\n"),
			fn:       func(old []byte) ([]byte, error) { return append(old, "two\n"...), nil },
			wantOld:  []byte("one\n"),
			want:     "one\ntwo\n",
			wantMode: 0o600,
		},
		{
			name:     "shrinking leaves no stale tail",
			existing: ptr("a long line of text\n"),
			fn:       func(old []byte) ([]byte, error) { return []byte("x"), nil },
			wantOld:  []byte("a long line of text\n"),
			want:     "x",
			wantMode: 0o600,
		},
		{
			name:     "unchanged content is not rewritten",
			existing: ptr("same"),
			fn:       func(old []byte) ([]byte, error) { return []byte("same"), nil },
			wantOld:  []byte("same"),
			want:     "same",
			wantMode: 0o600,
			wantSame: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state")
			var before os.FileInfo
			if tt.existing != nil {
				writeOrig(t, path, *tt.existing, 0o600)
				var err error
				if before, err = os.Stat(path); err != nil {
					t.Fatal(err)
				}
			}
			var gotOld []byte
			called := 0
			err := Update(path, 0o640, func(old []byte) ([]byte, error) {
				called++
				gotOld = slices.Clone(old)
				return tt.fn(old)
			})
			if err != nil {
				t.Fatal(err)
			}
			if called != 1 {
				t.Errorf("fn called %d times, want 1", called)
			}
			if (gotOld == nil) != (tt.wantOld == nil) || !bytes.Equal(gotOld, tt.wantOld) {
				t.Errorf("fn got old = %q (nil: %v), want %q (nil: %v)", gotOld, gotOld == nil, tt.wantOld, tt.wantOld == nil)
			}
			assertFile(t, path, tt.want, tt.wantMode)
			if before != nil {
				after, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if same := os.SameFile(before, after); same != tt.wantSame {
					t.Errorf("file kept its inode = %v, want %v", same, tt.wantSame)
				}
			}
		})
	}
}

// TestConcurrentWritersNeverMix runs bounded concurrent writers of distinct,
// large contents and a concurrent reader: every read and the final file must
// be exactly one of the contents, never empty and never a mix.
func TestConcurrentWritersNeverMix(t *testing.T) {
	const (
		writers = 16
		rounds  = 5
		size    = 256 << 10 // larger than a page and a pipe buffer, to expose torn writes
	)
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	contents := make([][]byte, writers)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('A' + i)}, size)
	}
	if err := WriteFile(path, contents[0], 0o600); err != nil {
		t.Fatal(err)
	}
	isOneOf := func(b []byte) bool {
		return slices.ContainsFunc(contents, func(c []byte) bool { return bytes.Equal(b, c) })
	}

	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for reads := 0; reads < 100000; reads++ { // bounded even if writers hang
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				readerErr <- err
				return
			}
			if !isOneOf(b) {
				readerErr <- fmt.Errorf("read %d bytes that are not one complete content", len(b))
				return
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for i := range writers {
		wg.Go(func() {
			for range rounds {
				if err := WriteFile(path, contents[i], 0o600); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(done)
	close(errs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	if err := <-readerErr; err != nil {
		t.Errorf("reader: %v", err)
	}

	final, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !isOneOf(final) {
		t.Errorf("final file (%d bytes) is not exactly one writer's content", len(final))
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"config"}) {
		t.Errorf("directory holds %q, want only config (temp files left behind)", got)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
