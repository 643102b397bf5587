package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLogCapped: the run's log file takes whole lines up to its limit,
// then one line saying it is full, and nothing after; before, it grew with
// whatever the plugins wrote.
func TestRunLogCapped(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	r := &runLog{limit: 1000}
	defer r.close()
	var stderr bytes.Buffer
	w := r.writer(&stderr)
	line := strings.Repeat("x", 49) + "\n"
	for i := 0; i < 100; i++ {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	r.close()
	b, err := os.ReadFile(r.path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(r.path) != filepath.Join(home, ".marina", "logs") {
		t.Errorf("run log at %s", r.path)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "# marina ") {
		t.Errorf("first line %q, want the command", lines[0])
	}
	body := lines[1:]
	if len(body) != 21 {
		t.Fatalf("the log has %d lines after the command line, want 20 and the notice: %q", len(body), b)
	}
	for _, l := range body[:20] {
		if l+"\n" != line {
			t.Fatalf("line %q, want whole lines", l)
		}
	}
	if got, want := body[20], "# marina: this run log reached its limit of 1000 bytes; later plugin output is left out of it"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	if stderr.Len() != 0 {
		t.Errorf("warnings: %s", stderr.String())
	}
}
