// Command cgocheck type-checks, on any machine, the Go code that only a cgo
// build for macOS compiles: files under `darwin && cgo` (marina's
// core/vm/lima/limaengine/vz_cgo_darwin.go and hostagent_run.go, Lima's vz
// driver and host agent, Code-Hex/vz) and every package that imports them
// (limaengine, cmd/marina-lima; not cmd/marina, which does not link them).
//
// `GOOS=darwin CGO_ENABLED=0 go vet` never sees those files, and a cgo build
// for darwin needs Apple's SDK. cgocheck does what gopls does without one:
//
//  1. `go list -deps -export` under GOOS=darwin CGO_ENABLED=1 lists the
//     packages and compiles the ones that do not need a C compiler, for
//     their export data;
//  2. the packages that use cgo, and every package that imports one of them
//     (the "cgo cone"), are type-checked from source with go/types,
//     `import "C"` faked (types.Config.FakeImportC: references to C.x are
//     not checked, everything else is), against the export data of the rest.
//
// What it cannot check (a Mac runner does: .github/workflows/release.yml):
// the C and Objective-C code, the cgo preambles, the C types' sizes and
// names, and linking.
//
//	go run ./packaging/darwin/cgocheck [-goarch arm64] [-v] [packages]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	goarch := flag.String("goarch", "arm64", "the darwin architecture to check for (arm64 or amd64)")
	verbose := flag.Bool("v", false, "list the packages checked from source")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cgocheck [-goarch arm64|amd64] [-v] [packages] (default ./...)")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	start := time.Now()
	res, err := Check(context.Background(), ".", *goarch, patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cgocheck:", err)
		os.Exit(1)
	}
	if *verbose {
		for _, p := range res.Checked {
			fmt.Println("  checked", p)
		}
	}
	for _, e := range res.Errors {
		fmt.Fprintln(os.Stderr, e)
	}
	fmt.Printf("cgocheck darwin/%s: %d packages type-checked from source (%d use cgo), %d errors (%d about faked C types ignored), %s\n",
		*goarch, len(res.Checked), len(res.Cgo), len(res.Errors), res.FollowOn, time.Since(start).Round(time.Millisecond))
	if len(res.Errors) > 0 {
		os.Exit(1)
	}
}

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	ImportMap  map[string]string
	Export     string
	Module     *struct {
		Path      string
		GoVersion string
	}
	Error *struct{ Err string }
}

// Result is what Check found.
type Result struct {
	// Checked are the packages type-checked from source (the cgo cone).
	Checked []string
	// Cgo are those among them that have cgo files.
	Cgo []string
	// Errors are the type errors, "file:line:col: message".
	Errors []string
	// FollowOn counts the errors about values of faked C types (see Check).
	FollowOn int
}

// Check type-checks the cgo cone of patterns (run in dir) for darwin/goarch.
func Check(ctx context.Context, dir, goarch string, patterns []string) (*Result, error) {
	pkgs, order, err := goList(ctx, dir, goarch, patterns)
	if err != nil {
		return nil, err
	}
	// The cone: cgo packages and their importers, transitively.
	cone := map[string]bool{}
	res := &Result{}
	for _, p := range order {
		l := pkgs[p]
		if len(l.CgoFiles) > 0 {
			cone[p] = true
			res.Cgo = append(res.Cgo, p)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range order {
			if cone[p] {
				continue
			}
			for _, imp := range pkgs[p].Imports {
				if cone[imp] {
					cone[p], changed = true, true
					break
				}
			}
		}
	}

	fset := token.NewFileSet()
	exports := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		l, ok := pkgs[path]
		if !ok {
			return nil, fmt.Errorf("%s is not among the listed packages", path)
		}
		if l.Export == "" {
			msg := "no export data"
			if l.Error != nil {
				msg = l.Error.Err
			}
			return nil, fmt.Errorf("%s: %s", path, msg)
		}
		return os.Open(l.Export)
	})
	checked := map[string]*types.Package{}
	// order is go list's: dependencies before their importers.
	for _, path := range order {
		if !cone[path] {
			continue
		}
		l := pkgs[path]
		var files []*ast.File
		for _, name := range append(append([]string{}, l.GoFiles...), l.CgoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(l.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				res.Errors = append(res.Errors, err.Error())
				continue
			}
			files = append(files, f)
		}
		conf := types.Config{
			FakeImportC: true,
			Importer: importerFunc(func(imp string) (*types.Package, error) {
				if canon, ok := l.ImportMap[imp]; ok {
					imp = canon
				}
				if imp == "unsafe" {
					return types.Unsafe, nil
				}
				if p, ok := checked[imp]; ok {
					return p, nil
				}
				if cone[imp] {
					return nil, fmt.Errorf("%s: not checked (it failed to load)", imp)
				}
				return exports.Import(imp)
			}),
			Error: func(err error) {
				// A value of a faked C type has an invalid type (or a
				// pointer to one, ...); what goes wrong with it later is
				// not an error of its own. Every other invalid type
				// comes from an error that is reported where it arises.
				if strings.Contains(err.Error(), "invalid type") {
					res.FollowOn++
					return
				}
				res.Errors = append(res.Errors, err.Error())
			},
		}
		if l.Module != nil && l.Module.GoVersion != "" {
			conf.GoVersion = "go" + l.Module.GoVersion
		}
		p, _ := conf.Check(path, fset, files, nil)
		checked[path] = p
		res.Checked = append(res.Checked, path)
	}
	sort.Strings(res.Checked)
	return res, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// goList lists patterns and their dependencies for darwin/goarch with cgo,
// compiling what compiles without a C compiler (export data). CC is a
// program that fails: no C compiler for darwin exists here, and the host's
// must not be used by mistake.
func goList(ctx context.Context, dir, goarch string, patterns []string) (map[string]*listed, []string, error) {
	args := append([]string{"list", "-e", "-deps", "-export",
		"-json=ImportPath,Dir,Standard,GoFiles,CgoFiles,Imports,ImportMap,Export,Module,Error"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+goarch, "CGO_ENABLED=1", "CC=false", "CXX=false", "GOFLAGS=-mod=readonly", "GOWORK=off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// go list exits non-zero when a package fails to compile (here: every
	// cgo package, for want of a C compiler); the JSON still lists them all.
	runErr := cmd.Run()
	pkgs := map[string]*listed{}
	var order []string
	dec := json.NewDecoder(&out)
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("go list: %w (%s)", err, strings.TrimSpace(errb.String()))
		}
		pkgs[l.ImportPath] = &l
		order = append(order, l.ImportPath)
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), runErr, strings.TrimSpace(errb.String()))
	}
	// A package that failed to list or compile is not an error here: the
	// cgo packages all fail (no C compiler), and any other failure shows as
	// a type error where a checked package imports it.
	return pkgs, order, nil
}
