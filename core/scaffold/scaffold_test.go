package scaffold

import (
	"context"
	"crypto/sha256"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/sdk"
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
	// Relative or absolute depending on where the temporary directory is
	// (TestScaffoldReplaceIsRelative covers which).
	wantReplace, _ := replacePath(dir, filepath.Join(repo, "sdk"))
	if mf.Module.Mod.Path != module || len(mf.Replace) != 1 || mf.Replace[0].Old.Path != "github.com/bcollard/marina/sdk" || mf.Replace[0].New.Path != wantReplace {
		t.Fatalf("go.mod: module %q, replace %+v\n%s", mf.Module.Mod.Path, mf.Replace, data)
	}
}

// TestScaffoldReplaceIsRelative: against a local checkout, go.mod's
// replace gives the SDK relative to the plugin's directory when the two
// share a directory below the root (absolute otherwise), and go.mod and
// the README say what it is for and to remove it before publishing. A
// scaffold of a released SDK has no replace and no such section.
func TestScaffoldReplaceIsRelative(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cases are Unix paths")
	}
	for _, c := range []struct {
		dir, sdk, want string
		relative       bool
	}{
		{"/home/u/plugins/acme", "/home/u/src/marina/sdk", "../../src/marina/sdk", true},
		{"/home/u/acme", "/home/u/acme/third_party/marina/sdk", "./third_party/marina/sdk", true},
		{"/home/u/marina/acme", "/home/u/marina", "..", true},
		{"/tmp/acme", "/Users/u/marina/sdk", "/Users/u/marina/sdk", false},
		{"/acme", "/marina/sdk", "/marina/sdk", false},
	} {
		if got, rel := replacePath(c.dir, c.sdk); got != c.want || rel != c.relative {
			t.Errorf("replacePath(%s, %s) = %q, %v; want %q, %v", c.dir, c.sdk, got, rel, c.want, c.relative)
		}
	}

	// A checkout and a plugin side by side, the plugin written through a
	// relative --dir.
	parent := t.TempDir()
	checkout := filepath.Join(parent, "src", "marina")
	if err := os.MkdirAll(filepath.Join(checkout, "sdk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "sdk", "go.mod"), []byte("module github.com/bcollard/marina/sdk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(parent)
	if _, err := Write(Options{Name: "acme", Dir: filepath.Join("plugins", "acme"), SDKPath: checkout}); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(parent, "plugins", "acme", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatalf("go.mod does not parse: %v\n%s", err, gomod)
	}
	if len(mf.Replace) != 1 || mf.Replace[0].New.Path != "../../src/marina/sdk" {
		t.Fatalf("go.mod's replace is not ../../src/marina/sdk:\n%s", gomod)
	}
	readme, err := os.ReadFile(filepath.Join(parent, "plugins", "acme", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for file, wants := range map[string][]string{
		string(gomod):  {"// Development only: build against the SDK of a local marina checkout", "relative to this directory", "Remove it before publishing", "go mod edit -dropreplace=github.com/bcollard/marina/sdk"},
		string(readme): {"## Before publishing", "points at `../../src/marina/sdk`, relative to this directory", "Remove it before you publish", "go mod edit -dropreplace=github.com/bcollard/marina/sdk\ngo get github.com/bcollard/marina/sdk@vX.Y.Z"},
	} {
		for _, want := range wants {
			if !strings.Contains(file, want) {
				t.Errorf("missing %q in\n%s", want, file)
			}
		}
	}

	// A released SDK: nothing to remove, nothing said.
	dir := filepath.Join(parent, "released")
	if _, err := Write(Options{Name: "acme", Dir: dir, SDKVersion: "v0.3.0"}); err != nil {
		t.Fatal(err)
	}
	gomod, _ = os.ReadFile(filepath.Join(dir, "go.mod"))
	readme, _ = os.ReadFile(filepath.Join(dir, "README.md"))
	if strings.Contains(string(gomod), "replace") || strings.Contains(string(readme), "Before publishing") {
		t.Errorf("a scaffold of a released SDK speaks of a replace:\n%s\n%s", gomod, readme)
	}
}

// goIn runs the go command in dir, as a plugin author would.
func goIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestScaffoldBuildsWhereverTheCheckoutGoes: a plugin scaffolded beside a
// marina checkout builds after both move elsewhere together (the replace
// is relative; an absolute one named the old place).
func TestScaffoldBuildsWhereverTheCheckoutGoes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go module (run without -short)")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	here := filepath.Join(tmp, "here")
	if err := os.Mkdir(here, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(here, "marina")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(Options{Name: "acme", Dir: filepath.Join(here, "plugins", "acme"), SDKPath: filepath.Join(here, "marina")}); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(tmp, "elsewhere")
	if err := os.Rename(here, elsewhere); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(elsewhere, "plugins", "acme")
	goIn(t, dir, "mod", "tidy")
	goIn(t, dir, "build", "-o", filepath.Join(t.TempDir(), "marina-plugin-acme"), ".")
}

// TestScaffoldMakeBuildIsTheReleaseBuild: the scaffold's `make build`
// builds the very binary `marina plugin package` puts in this machine's
// archive (the same flags: CGO_ENABLED=0, -trimpath, -s -w, the version).
func TestScaffoldMakeBuildIsTheReleaseBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go module (run without -short)")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make in PATH")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "marina-plugin-acme")
	if _, err := Write(Options{Name: "acme", Dir: dir, SDKPath: repo}); err != nil {
		t.Fatal(err)
	}
	goIn(t, dir, "mod", "tidy")
	mk := exec.Command("make", "build", "VERSION=1.2.3")
	mk.Dir = dir
	mk.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	made, err := os.ReadFile(filepath.Join(dir, "bin", "marina-plugin-acme"))
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOTOOLCHAIN", "local")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := pluginstore.Package(ctx, pluginstore.PackageOptions{
		Dir: dir, Out: filepath.Join(tmp, "dist"), Platforms: []pluginstore.Platform{pluginstore.HostPlatform()}, Version: "1.2.3",
		// The binary is the point here, not its description.
		Describe: func(context.Context, string) (*sdk.Description, error) {
			return &sdk.Description{Name: "acme", Version: "1.2.3", Protocol: fmt.Sprintf("%d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor)}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%x", sha256.Sum256(made)), res.Artifacts[0].BinarySHA256; got != want {
		t.Fatalf("make build made a binary (%d bytes, sha256 %s) other than the release's (sha256 %s): the Makefile's build flags differ from marina plugin package's", len(made), got, want)
	}
}
