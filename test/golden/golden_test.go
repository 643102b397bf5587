package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Errorf and Fatalf; Fatal* end the
// goroutine Check runs on, as they do in a real test.
type recorder struct {
	testing.TB
	name   string
	errors []string
	fatal  string
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// check runs Check with a recorder named name, from dir.
func check(t *testing.T, dir, name, path string, got []byte) *recorder {
	t.Helper()
	t.Chdir(dir)
	r := &recorder{TB: t, name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, path, got)
	}()
	<-done
	return r
}

// module makes a module root holding the package directory pkg and
// returns that directory.
func module(t *testing.T, pkg string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, filepath.FromSlash(pkg))
	if err := os.MkdirAll(filepath.Join(dir, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func setUpdate(t *testing.T, v bool) {
	old := *update
	*update = v
	t.Cleanup(func() { *update = old })
}

func TestCheckMatch(t *testing.T) {
	setUpdate(t, false)
	dir := module(t, "core/kind")
	if err := os.WriteFile(filepath.Join(dir, "testdata", "a.yaml"), []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := check(t, dir, "TestX/sub", "testdata/a.yaml", []byte("a: 1\n"))
	if r.fatal != "" || len(r.errors) != 0 {
		t.Fatalf("equal output: fatal %q, errors %q", r.fatal, r.errors)
	}
}

func TestCheckMismatch(t *testing.T) {
	setUpdate(t, false)
	dir := module(t, "plugins/metallb")
	want := "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n"
	if err := os.WriteFile(filepath.Join(dir, "testdata", "x.golden"), []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Replace(want, "eight\n", "EIGHT\n", 1)
	r := check(t, dir, "TestPoolGolden/two_pools", "testdata/x.golden", []byte(got))
	if r.fatal != "" || len(r.errors) != 1 {
		t.Fatalf("fatal %q, errors %q; want one error", r.fatal, r.errors)
	}
	wantMsg := `output differs from golden file testdata/x.golden (--- testdata/x.golden, +++ output):
@@ -5,6 +5,6 @@
 five
 six
 seven
-eight
+EIGHT
 nine
 ten
if the change is intended, rewrite it with: go test ./plugins/metallb -run '^TestPoolGolden$' -update`
	if r.errors[0] != wantMsg {
		t.Errorf("message:\n%s\nwant:\n%s", r.errors[0], wantMsg)
	}
	// The golden file is left alone.
	if b, _ := os.ReadFile(filepath.Join(dir, "testdata", "x.golden")); string(b) != want {
		t.Errorf("a failed check changed the golden file to %q", b)
	}
}

func TestCheckMissing(t *testing.T) {
	setUpdate(t, false)
	dir := module(t, "core/migrate")
	r := check(t, dir, "TestPlanGolden", "testdata/golden/none.txt", []byte("x"))
	want := "golden file testdata/golden/none.txt does not exist; create it with: go test ./core/migrate -run '^TestPlanGolden$' -update"
	if r.fatal != want {
		t.Errorf("fatal %q\nwant  %q", r.fatal, want)
	}
}

func TestCheckUpdate(t *testing.T) {
	setUpdate(t, true)
	if !Update() {
		t.Fatal("Update() = false with -update set")
	}
	dir := module(t, "core/kubeconfig")
	// An existing file is rewritten, a new one is created with its directory.
	if err := os.WriteFile(filepath.Join(dir, "testdata", "old.yaml"), []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"testdata/old.yaml", "testdata/golden/new/dev.kubeconfig"} {
		r := check(t, dir, "TestX", p, []byte("fresh\n"))
		if r.fatal != "" || len(r.errors) != 0 {
			t.Fatalf("%s: fatal %q, errors %q", p, r.fatal, r.errors)
		}
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))); err != nil || string(b) != "fresh\n" {
			t.Errorf("%s after -update: %q, %v", p, b, err)
		}
	}
	setUpdate(t, false)
	if Update() {
		t.Error("Update() = true without -update")
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name, want, got, diff string
	}{
		{
			name: "insertion and deletion",
			want: "a\nb\nc\n",
			got:  "a\nc\nd\n",
			diff: "@@ -1,3 +1,3 @@\n a\n-b\n c\n+d\n",
		},
		{
			name: "missing final newline",
			want: "a\nb\n",
			got:  "a\nb",
			diff: "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n",
		},
		{
			name: "invisible differences are quoted",
			want: "k: v\n",
			got:  "k: v \r\n",
			diff: "@@ -1,1 +1,1 @@\n-k: v\n+\"k: v \\r\"\n",
		},
		{
			name: "into an empty file",
			want: "",
			got:  "new\n",
			diff: "@@ -0,0 +1,1 @@\n+new\n",
		},
		{
			name: "far apart changes make two hunks",
			want: "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			got:  "X\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\nY\n",
			diff: "@@ -1,4 +1,4 @@\n-1\n+X\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+Y\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := Diff([]byte(tt.want), []byte(tt.got)); d != tt.diff {
				t.Errorf("Diff:\n%s\nwant:\n%s", d, tt.diff)
			}
		})
	}
}

func TestDiffIsCut(t *testing.T) {
	var want, got strings.Builder
	for i := range 500 {
		fmt.Fprintf(&want, "line %d\n", i)
		fmt.Fprintf(&got, "LINE %d\n", i)
	}
	d := Diff([]byte(want.String()), []byte(got.String()))
	lines := strings.Split(strings.TrimSuffix(d, "\n"), "\n")
	if len(lines) != maxDiffLines+1 || !strings.HasPrefix(lines[maxDiffLines], "... (diff cut at") {
		t.Errorf("a 1000-line diff is %d lines, ending %q", len(lines), lines[len(lines)-1])
	}
}
