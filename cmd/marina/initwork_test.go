package main

// TestNoInitWork (issue 14): marina's own packages do no work at package
// initialisation. Every package linked into marina runs its initialisers on
// every command (and in every built-in plugin process, which is marina
// re-executed), whether or not the command uses them: a package-level
// regexp.MustCompile, template.Must or hash of an embedded file is paid by
// `marina version`. Such values are built on first use instead, with
// sync.OnceValue.
//
// The check reads the sources of every marina package in cmd/marina's
// import graph (Linux, and macOS with cgo) and fails on
//   - a package-level var whose initialiser calls a function (type
//     conversions, len/append/make/new and the cheap constructors in
//     initCallsAllowed excepted),
//   - a func init() outside initFuncsAllowed.
// Generated protobuf code (*.pb.go) is exempt: gRPC registers its
// descriptors at init by design.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// initFuncsAllowed are the packages that may have a func init(), and why.
var initFuncsAllowed = map[string]string{
	"github.com/bcollard/marina/core/homeenv": "fixes HOME/USER for the whole process; marina-lima, which links it too, needs that before Lima's own package init (which panics otherwise)",
}

// initCallsAllowed are the package-level calls that cost nothing worth
// deferring (they allocate one small value).
var initCallsAllowed = map[string]bool{
	"errors.New": true, "fmt.Errorf": true,
	"reflect.TypeOf": true, "reflect.TypeFor": true, "time.Duration": true,
	"sync.OnceValue": true, "sync.OnceValues": true, "sync.OnceFunc": true,
	"strconv.Itoa": true,
	// builtins and conversions to predeclared types
	"len": true, "cap": true, "append": true, "make": true, "new": true,
	"string": true, "int": true, "int64": true, "int32": true, "uint32": true, "uint64": true, "byte": true,
}

const marinaModule = "github.com/bcollard/marina"

func TestNoInitWork(t *testing.T) {
	seen := map[string]bool{}
	checked := 0
	for _, p := range importPlatforms {
		for _, pkg := range marinaSources(t, p.goos, p.goarch, p.cgo) {
			for _, f := range pkg.files {
				if seen[f] || strings.HasSuffix(f, ".pb.go") {
					continue
				}
				seen[f] = true
				checked++
				for _, problem := range initWork(t, pkg.path, f, pkg.types) {
					t.Errorf("%s", problem)
				}
			}
		}
	}
	// The listing was read: marina has far more than a handful of files.
	if checked < 50 {
		t.Fatalf("only %d source files checked: the go list output was not read right", checked)
	}
}

type marinaPackage struct {
	path  string
	files []string
	// types declared in the package: a call to one is a conversion.
	types map[string]bool
}

// marinaSources lists marina's own packages in cmd/marina's graph for a
// platform, with their source files (as the build selects them).
func marinaSources(t *testing.T, goos, goarch, cgo string) []marinaPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}|{{join .CgoFiles ","}}`, ".")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED="+cgo)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list (%s/%s): %v\n%s", goos, goarch, err, stderr)
	}
	var pkgs []marinaPackage
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 4 || (parts[0] != marinaModule && !strings.HasPrefix(parts[0], marinaModule+"/")) {
			continue
		}
		p := marinaPackage{path: parts[0], types: map[string]bool{}}
		for _, list := range parts[2:] {
			for name := range strings.SplitSeq(list, ",") {
				if name != "" {
					p.files = append(p.files, filepath.Join(parts[1], name))
				}
			}
		}
		for _, f := range p.files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
					for _, s := range gd.Specs {
						p.types[s.(*ast.TypeSpec).Name.Name] = true
					}
				}
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// initWork returns the init-time work in one file, one line per finding.
func initWork(t *testing.T, pkg, file string, types map[string]bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	rel := file
	if wd, err := filepath.Abs("../.."); err == nil {
		if r, err := filepath.Rel(wd, file); err == nil {
			rel = r
		}
	}
	var problems []string
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" {
				if _, ok := initFuncsAllowed[pkg]; !ok {
					problems = append(problems, fmt.Sprintf("%s:%d: func init() in %s runs in every marina command: "+
						"do the work on first use (sync.OnceValue), or add the package to initFuncsAllowed with the reason it cannot wait",
						rel, fset.Position(d.Pos()).Line, pkg))
				}
			}
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					name := "_"
					if i < len(vs.Names) {
						name = vs.Names[i].Name
					} else if len(vs.Names) > 0 {
						name = vs.Names[0].Name
					}
					if call := initCall(v, types); call != "" {
						problems = append(problems, fmt.Sprintf("%s:%d: package-level var %s calls %s at init, in every marina command: "+
							"build it on first use, e.g. var %s = sync.OnceValue(func() T { return ... }) and call %s()",
							rel, fset.Position(v.Pos()).Line, name, call, name, name))
					}
				}
			}
		}
	}
	return problems
}

// initCall returns the first call in e that does work at init, or "".
// Function literals are not entered (their body runs when called), but a
// function literal called on the spot is init work.
func initCall(e ast.Expr, types map[string]bool) string {
	found := ""
	ast.Inspect(e, func(n ast.Node) bool {
		if found != "" {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			switch fun := n.Fun.(type) {
			case *ast.FuncLit:
				found = "a function literal"
				return false
			case *ast.ParenExpr, *ast.ArrayType, *ast.MapType, *ast.ChanType, *ast.FuncType, *ast.InterfaceType, *ast.StructType:
				return true // a conversion
			case *ast.Ident:
				if initCallsAllowed[fun.Name] || types[fun.Name] {
					return true
				}
				found = fun.Name
				return false
			case *ast.SelectorExpr:
				if x, ok := fun.X.(*ast.Ident); ok {
					name := x.Name + "." + fun.Sel.Name
					if initCallsAllowed[name] {
						return true
					}
					found = name
					return false
				}
				found = "a method"
				return false
			case *ast.IndexExpr:
				// an instantiated generic function: reflect.TypeFor[T]()
				if sel, ok := fun.X.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && initCallsAllowed[x.Name+"."+sel.Sel.Name] {
						return true
					}
				}
				found = "a generic function"
				return false
			case *ast.IndexListExpr:
				found = "a generic function"
				return false
			}
		}
		return true
	})
	return found
}

// TestInitCall: the checker sees init work and lets conversions be.
func TestInitCall(t *testing.T) {
	types := map[string]bool{"myType": true}
	for src, want := range map[string]string{
		"regexp.MustCompile(`x`)":                           "regexp.MustCompile",
		"template.Must(template.New(`x`).Parse(`y`))":       "template.Must",
		"func() int { return 1 }()":                         "a function literal",
		"verify(data)":                                      "verify",
		"append([]string{`a`}, more...)":                    "",
		"(*myType)(nil)":                                    "",
		"myType(3)":                                         "",
		"errors.New(`x`)":                                   "",
		"sync.OnceValue(func() int { return expensive() })": "",
		"map[string]int{`a`: len(`x`)}":                     "",
		"[]string{`a`, strconv.Itoa(7000)}":                 "",
		"struct{ x int }{x: compute()}":                     "compute",
		"reflect.TypeFor[json.Marshaler]()":                 "",
		"slices.Sorted[[]string](x)":                        "a generic function",
		"reflect.TypeOf(time.Duration(0))":                  "",
	} {
		e, err := parser.ParseExpr(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := initCall(e, types); got != want {
			t.Errorf("initCall(%s) = %q, want %q", src, got, want)
		}
	}
}
