package scaffold

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func TestWriteRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Name: "Acme", Dir: filepath.Join(dir, "a"), SDKVersion: "v0.1.0"}, "lower-case"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "b")}, "development build"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "c"), SDKVersion: "0.1"}, "v1.2.3"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "d"), SDKPath: dir}, "not a marina checkout"},
		// Values that would break the generated go.mod or Go source are refused.
		{Options{Name: "acme", Dir: filepath.Join(dir, "e"), SDKVersion: "v0.1.0", Module: `example.com/a"b`}, "--module"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "f"), SDKVersion: "v0.1.0", Module: "example.com/a\nrequire evil v1.0.0"}, "not a valid Go module path"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "g"), SDKVersion: "v0.1.0", Module: "example.com/a b"}, "--module"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "h"), SDKVersion: "v0.1.0", Description: "two\nlines"}, "one line"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "i"), SDKVersion: "v0.1.0", Description: "bell \x1b[31m red"}, "control character"},
		{Options{Name: "acme", Dir: filepath.Join(dir, "j"), SDKVersion: "v0.1.0", Description: strings.Repeat("x", 201)}, "at most 200"},
		// --sdk-version is checked even with --sdk.
		{Options{Name: "acme", Dir: filepath.Join(dir, "k"), SDKPath: "../..", SDKVersion: "v1\nreplace x => y"}, "v1.2.3"},
	}
	for _, c := range cases {
		if _, err := Write(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.o, err, c.want)
		}
		if _, err := os.Stat(c.o.Dir); err == nil {
			t.Errorf("%s was created although the input was refused", c.o.Dir)
		}
	}
	nonEmpty := filepath.Join(dir, "full")
	if err := os.MkdirAll(nonEmpty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nonEmpty, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(Options{Name: "acme", Dir: nonEmpty, SDKVersion: "v0.1.0"}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty dir: %v", err)
	}
}

// TestScaffoldBuildsAndPassesItsTests generates a project against this
// checkout and runs its own tests and build with the real go toolchain.
func TestScaffoldBuildsAndPassesItsTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go module (run without -short)")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The checkout is reached through a path with a space and a quote, which
	// go.mod must quote in its replace directive; the description is hostile.
	tmp := t.TempDir()
	sdk := filepath.Join(tmp, `my "marina" checkout`)
	if err := os.Symlink(repo, sdk); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "marina-plugin-acme")
	files, err := Write(Options{Name: "acme", Dir: dir, SDKPath: sdk, Description: hostile})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("files = %v", files)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	out := run("test", "-count=1", "./...")
	if !strings.Contains(out, "ok") {
		t.Fatalf("scaffold tests did not pass:\n%s", out)
	}
	run("build", "-ldflags", "-X main.version=1.2.3", "-o", "bin/marina-plugin-acme", ".")
	// Run by hand, the binary explains itself and exits 1.
	cmd := exec.Command(filepath.Join(dir, "bin", "marina-plugin-acme"))
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "marina plugin acme 1.2.3") {
		t.Fatalf("running the plugin by hand: %v\n%s", err, msg)
	}
}

// hostile is a description with everything that breaks a Go string literal
// pasted between double quotes: quotes, a backslash escape, a backtick, a
// template action and a comment opener.
const hostile = `Says "hi" \" C:\temp\n ` + "`raw`" + ` {{.Name}} /* x */ // y`

// TestScaffoldQuotesUserInput: a hostile --description (and an unusual but
// valid --module) produce Go files that parse, whose Info carries the
// description unchanged, and a go.mod that parses with the module given. The
// old scaffold pasted the description between quotes (broken Go).
func TestScaffoldQuotesUserInput(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "p")
	module := "example.com/acme~tools/marina-plugin_acme.v2"
	if _, err := Write(Options{Name: "acme", Dir: dir, SDKPath: repo, Module: module, Description: hostile}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.go", "plugin.go", "plugin_test.go"} {
		if _, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, f), nil, parser.AllErrors); err != nil {
			t.Fatalf("generated %s does not parse: %v", f, err)
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "plugin.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	ast.Inspect(f, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Description" {
				if lit, ok := kv.Value.(*ast.BasicLit); ok {
					got, _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return true
	})
	if got != hostile {
		t.Fatalf("Info.Description = %q, want %q", got, hostile)
	}
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatalf("generated go.mod does not parse: %v\n%s", err, data)
	}
	if mf.Module.Mod.Path != module || len(mf.Replace) != 1 || mf.Replace[0].Old.Path != "github.com/bcollard/marina/sdk" || mf.Replace[0].New.Path != filepath.Join(repo, "sdk") {
		t.Fatalf("go.mod: module %q, replace %+v\n%s", mf.Module.Mod.Path, mf.Replace, data)
	}
}
