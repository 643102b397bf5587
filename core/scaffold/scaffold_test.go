package scaffold

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	dir := filepath.Join(t.TempDir(), "marina-plugin-acme")
	files, err := Write(Options{Name: "acme", Dir: dir, SDKPath: repo, Description: `Says "hello".`})
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
