package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsQuoteTheExample: every Go block of docs/plugins.md is quoted
// verbatim from this package, so the guide's code compiles (go vet ./...)
// and its tests run here.
func TestDocsQuoteTheExample(t *testing.T) {
	doc, err := os.ReadFile("../../plugins.md")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 3 {
		t.Fatalf("docs/plugins.md has %d Go blocks; the test expects the guide's examples", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(src.String(), b[1]) {
			t.Errorf("docs/plugins.md has a Go block that is not in docs/examples/metrics-server (copy it from there):\n%s", b[1])
		}
	}
}
