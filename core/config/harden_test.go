package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/core/userfile"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// findProblem returns the problem at path, failing the test when there is none.
func findProblem(t *testing.T, ps []Problem, path string) Problem {
	t.Helper()
	for _, p := range ps {
		if p.Path == path {
			return p
		}
	}
	t.Fatalf("no problem at %s in %v", path, ps)
	return Problem{}
}

// TestLargePluginConfigIsAProblem: a plugin's config section past the node
// limit, large or an alias bomb, used to be dropped with the file "valid".
func TestLargePluginConfigIsAProblem(t *testing.T) {
	var b strings.Builder
	b.WriteString("vm:\n  cpus: 2\nplugins:\n  acme:\n    enabled: false\n    config:\n      items: [")
	b.WriteString(strings.Repeat("a,", maxVisits+10)) // 200 KB, far below the size limit
	b.WriteString("a]\n")
	bomb := "vm:\n  cpus: 2\nplugins:\n  acme:\n    config:\n      a: &a [x,x,x,x,x,x,x,x,x,x]\n" +
		"      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
		"      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n" +
		"      f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	for name, body := range map[string]string{"large": b.String(), "alias bomb": bomb} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, body)
			_, err := load(t, path)
			if err == nil {
				t.Fatal("a plugin config over the node limit was accepted")
			}
			ps := problems(t, err)
			if len(ps) != 1 || !strings.Contains(ps[0].Message, "more than 100000 YAML nodes") ||
				!strings.HasPrefix(ps[0].Where, path+":") || !strings.HasPrefix(ps[0].Path, "plugins.acme.config.") {
				t.Fatalf("problems = %v", ps)
			}
		})
	}
}

// TestSecondDocumentIsRefused: "---" and a second document used to be
// dropped silently.
func TestSecondDocumentIsRefused(t *testing.T) {
	path := writeFile(t, "vm:\n  cpus: 4\n---\nvm:\n  cpus: 0\n")
	_, err := load(t, path)
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Where != path+":3:1" || !strings.Contains(ps[0].Message, "second YAML document starts at line 3") {
		t.Fatalf("problems = %v", ps)
	}
	// A trailing "---" or a leading one is still one document.
	for _, body := range []string{"vm:\n  cpus: 4\n---\n", "---\nvm:\n  cpus: 4\n", "vm:\n  cpus: 4\n---\n# nothing\n"} {
		if _, err := load(t, writeFile(t, body)); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
	// plugin enable must not write back the first document only.
	if err := SetPluginEnabled(path, "acme", true); err == nil || !strings.Contains(err.Error(), "second YAML document") {
		t.Fatalf("SetPluginEnabled on two documents: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "vm:\n  cpus: 4\n---\nvm:\n  cpus: 0\n" {
		t.Fatalf("file changed:\n%s", data)
	}
}

// TestConfigFileReadIsBounded: a device, a named pipe or a file over the
// limit is refused at once (exit 2), never read until memory runs out.
func TestConfigFileReadIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(userfile.MaxSize + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]string{
		"/dev/zero": "is a character device, not a regular file",
		fifo:        "is a named pipe (FIFO), not a regular file",
		dir:         "is a directory, not a regular file",
		big:         "is larger than 1 MiB",
	} {
		done := make(chan error, 1)
		go func() { _, err := load(t, path); done <- err }()
		select {
		case err := <-done:
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Where != path || !strings.Contains(ps[0].Message, want) {
				t.Errorf("%s: problems = %v", path, ps)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%s: error does not name the file: %v", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Load still running after 10s", path)
		}
	}
	if err := SetPluginEnabled(fifo, "acme", true); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("SetPluginEnabled on a FIFO: %v", err)
	}
}

// TestLongValuesAreNotEchoed: a problem quotes the start of a long value,
// never all of it.
func TestLongValuesAreNotEchoed(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	path := writeFile(t, "vm:\n  name: "+long+"\n  cpus: "+long+"\n  memory: "+long+"\n? "+long+"\n: 1\ndns:\n  zone: "+long+"\n")
	_, err := load(t, path, "vm.driver="+long)
	msg := err.Error()
	if len(msg) > 4000 {
		t.Fatalf("error is %d bytes long: %.300s...", len(msg), msg)
	}
	ps := problems(t, err)
	if len(ps) < 5 {
		t.Fatalf("want at least 5 problems, got %v", ps)
	}
	for _, p := range ps {
		if !strings.Contains(p.Path+p.Message+p.Where, fmt.Sprintf("(%d bytes)", len(long))) && !strings.Contains(p.Where, "... (") {
			t.Errorf("problem does not say the value was cut: %v", p)
		}
	}
}

// TestHugeSizeIsTooLarge: 99999999999PiB overflowed into "is too small".
func TestHugeSizeIsTooLarge(t *testing.T) {
	for _, val := range []string{"99999999999PiB", "8192PiB", "1e30", "9223372036854775808b"} {
		path := writeFile(t, "vm:\n  memory: "+val+"\n")
		_, err := load(t, path)
		p := findProblem(t, problems(t, err), "vm.memory")
		if !strings.Contains(p.Message, "too large") || p.Where != path+":2:3" {
			t.Errorf("%s: %v", val, p)
		}
	}
	for _, val := range []string{"8191PiB", "10GiB", "10 GiB", "1.5t", "10g"} {
		if n, err := parseSize(val); err != nil || n <= 0 {
			t.Errorf("parseSize(%q) = %d, %v", val, n, err)
		}
	}
}

// TestSetBlamesTheFlag: a --set problem names the flag, not the file; a
// --set of config for a plugin nothing else names is a problem, not dropped.
func TestSetBlamesTheFlag(t *testing.T) {
	path := writeFile(t, "vm:\n  cpus: 2\n")
	_, err := load(t, path, "plugins.nosuch.config.x=1", "vm.memory=1GiB")
	ps := problems(t, err)
	p := findProblem(t, ps, "plugins.nosuch.config.x")
	if p.Where != "--set plugins.nosuch.config.x=1" || !strings.Contains(p.Message, "plugin nosuch is not in the configuration") {
		t.Fatalf("problem = %v", p)
	}
	if p := findProblem(t, ps, "vm.memory"); p.Where != "--set vm.memory=1GiB" {
		t.Fatalf("problem = %v", p)
	}
	if strings.Contains(strings.SplitN(err.Error(), "\n", 2)[0], path) {
		t.Fatalf("header blames the file although no problem is in it: %v", err)
	}
}

// TestLocate: a plugin's verdict on a config field is located where that
// field, or its nearest parent, was written.
func TestLocate(t *testing.T) {
	path := writeFile(t, "plugins:\n  acme:\n    enabled: false\n    config:\n      pools:\n        - name: a\n          size: 3\n      other: {x: 1}\n")
	l, err := load(t, path, "plugins.acme.config.other.x=2", "vm.cpus=3")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"plugins.acme.config.pools[0].name":    path + ":6:11",
		"plugins.acme.config.pools[0].missing": path + ":6:11", // nearest written parent: pools[0]
		"plugins.acme.config.pools":            path + ":5:7",
		"plugins.acme.config":                  path + ":4:5",
		"plugins.acme.config.other.x":          "--set plugins.acme.config.other.x=2",
		"plugins.acme.config.other.x.deeper":   "--set plugins.acme.config.other.x=2",
		"plugins.acme.config.other":            path + ":8:7",
		"plugins.acme.enabled":                 path + ":3:5",
		"vm.cpus":                              "--set vm.cpus=3",
		"vm.memory":                            "",
	} {
		if got := l.Locate(in); got != want {
			t.Errorf("Locate(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestProblemsSortedBySource: the file's problems in line order, then the
// environment's, then the flags'.
func TestProblemsSortedBySource(t *testing.T) {
	path := writeFile(t, "vm:\n  memory: 1GiB\n  cpus: 0\nbogus: 1\n")
	_, err := load(t, path, "vm.disk=1GiB")
	ps := problems(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Where)
	}
	want := []string{path + ":2:3", path + ":3:3", path + ":4:1", "--set vm.disk=1GiB"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("order:\n got  %v\n want %v", got, want)
	}
}
