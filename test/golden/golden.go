// Package golden compares test output with files under testdata/ and
// rewrites them with -update.
//
// A package's tests call Check with the path of a golden file relative to
// the package directory (go test runs a package's tests there):
//
//	golden.Check(t, "testdata/default.yaml", got)
//
// and accept new output with
//
//	go test ./core/kind -run TestRenderGolden -update
//
// Importing this package registers the test binary's -update flag: a package
// that imports it must not define a flag named "update" itself (the flag
// package panics with "flag redefined: update"); it asks Update instead when
// -update should also rewrite other generated files.
//
// Only _test.go files may import it: the marina binary's import graph
// (cmd/marina/importgraph_test.go) forbids github.com/bcollard/marina/test/....
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files with the current output")

// Update reports whether -update was given (for tests that rewrite other
// generated files).
func Update() bool { return *update }

// Check compares got with the file at path (relative to the test's package
// directory, e.g. testdata/x.yaml; slash-separated), or rewrites it
// (creating its directory) when -update was given. A mismatch is an Errorf
// with a line diff and the command that rewrites the file; a missing or
// unreadable file is a Fatalf.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	file := filepath.FromSlash(path)
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("golden file %s does not exist; create it with: %s", path, updateCommand(t))
	}
	if err != nil {
		t.Fatalf("golden file %s: %v", path, err)
	}
	if bytes.Equal(got, want) {
		return
	}
	t.Errorf("output differs from golden file %s (--- %s, +++ output):\n%s"+
		"if the change is intended, rewrite it with: %s",
		path, path, Diff(want, got), updateCommand(t))
}

// updateCommand is the go test command that rewrites t's golden files:
// the package directory relative to its module's root and t's top-level
// test.
func updateCommand(t testing.TB) string {
	pkg := "."
	if wd, err := os.Getwd(); err == nil {
		if root := moduleRoot(wd); root != "" {
			if rel, err := filepath.Rel(root, wd); err == nil && rel != "." {
				pkg = "./" + filepath.ToSlash(rel)
			}
		}
	}
	test, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("go test %s -run '^%s$' -update", pkg, test)
}

// moduleRoot is the nearest directory at or above dir holding a go.mod, or
// "" if there is none.
func moduleRoot(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
