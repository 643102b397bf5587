package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module writes a throwaway module: example.com/m with the given files.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.26\n"
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A cgo package (only under darwin && cgo), its pure-Go helper package, and
// an importer of the cgo package: the shape of Lima's vz driver and
// marina's core/vm/lima/limaengine.
const (
	vzFile = `//go:build darwin && cgo

package vz

/*
#include <stdlib.h>
static int twice(int x) { return 2 * x; }
*/
import "C"

import (
	"unsafe"

	"example.com/m/helper"
)

// Twice goes through C.
func Twice(x int) int {
	p := C.CString(helper.Name)
	defer C.free(unsafe.Pointer(p))
	return int(C.twice(C.int(x)))
}
`
	vzOther = `//go:build !darwin || !cgo

package vz
`
	helperFile = `package helper

// Name is a pure-Go dependency of the cgo package.
const Name = "vz"

// Join joins.
func Join(a, b string) string { return a + b }
`
	userFile = `//go:build darwin && cgo

package user

import "example.com/m/vz"

// Use uses the cgo package.
func Use() int { return vz.Twice(2) }
`
)

func TestCheckFindsErrorsInCgoCode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(files map[string]string)
		wants []string // "" = no errors
	}{
		{name: "clean", edit: func(map[string]string) {}},
		{name: "an error in a cgo file, outside C", edit: func(f map[string]string) {
			f["vz/vz.go"] = strings.Replace(vzFile, "return int(C.twice(C.int(x)))", "_ = helper.Join(1, \"b\")\n\treturn int(C.twice(C.int(x)))", 1)
		}, wants: []string{"vz/vz.go:", "cannot use 1 (untyped int constant) as string value in argument to helper.Join"}},
		{name: "an importer calls the cgo package wrongly", edit: func(f map[string]string) {
			f["user/user.go"] = strings.Replace(userFile, "vz.Twice(2)", "vz.Twice(\"2\")", 1)
		}, wants: []string{"user/user.go:", "cannot use \"2\""}},
		{name: "an importer names what the cgo package lacks", edit: func(f map[string]string) {
			f["user/user.go"] = strings.Replace(userFile, "vz.Twice(2)", "vz.Thrice(2)", 1)
		}, wants: []string{"user/user.go:", "undefined: vz.Thrice"}},
		{name: "an importer imports what does not exist", edit: func(f map[string]string) {
			f["user/user.go"] = strings.Replace(userFile, `import "example.com/m/vz"`, "import (\n\t\"example.com/m/nope\"\n\t\"example.com/m/vz\"\n)\n\nvar _ = nope.X", 1)
		}, wants: []string{"user/user.go:", "could not import example.com/m/nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"vz/vz.go": vzFile, "vz/other.go": vzOther, "helper/helper.go": helperFile, "user/user.go": userFile}
			tc.edit(files)
			res, err := Check(context.Background(), module(t, files), "arm64", []string{"./..."})
			if err != nil {
				t.Fatal(err)
			}
			// The cone: the cgo package and its importer; the helper
			// came from export data.
			for _, p := range []string{"example.com/m/vz", "example.com/m/user"} {
				if !slices.Contains(res.Checked, p) {
					t.Errorf("%s not checked from source: %q", p, res.Checked)
				}
			}
			if slices.Contains(res.Checked, "example.com/m/helper") {
				t.Errorf("the pure-Go helper was checked from source: %q", res.Checked)
			}
			if !slices.Contains(res.Cgo, "example.com/m/vz") {
				t.Errorf("cgo packages %q", res.Cgo)
			}
			if len(tc.wants) == 0 {
				if len(res.Errors) != 0 {
					t.Errorf("errors in clean code: %q", res.Errors)
				}
				return
			}
			all := strings.Join(res.Errors, "\n")
			for _, w := range tc.wants {
				if !strings.Contains(all, w) {
					t.Errorf("errors lack %q:\n%s", w, all)
				}
			}
		})
	}
}

// TestCheckMarina is what make vet-darwin runs, on marina's Lima engine
// (cmd/marina-lima): its darwin && cgo build (Lima's vz driver and host
// agent included) type-checks.
func TestCheckMarina(t *testing.T) {
	res, err := Check(context.Background(), filepath.Join("..", "..", ".."), "arm64", []string{"./cmd/marina-lima"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"github.com/bcollard/marina/cmd/marina-lima",
		"github.com/bcollard/marina/core/vm/lima/limaengine",
		"github.com/lima-vm/lima/v2/pkg/driver/vz",
		"github.com/lima-vm/lima/v2/pkg/hostagent",
		"github.com/Code-Hex/vz/v3",
	} {
		if !slices.Contains(res.Checked, p) {
			t.Errorf("%s not checked: %q", p, res.Checked)
		}
	}
	if len(res.Errors) != 0 {
		t.Errorf("type errors:\n%s", strings.Join(res.Errors, "\n"))
	}
}
