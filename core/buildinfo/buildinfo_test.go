package buildinfo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSourceDir: a test binary records absolute source paths, so
// SourceDir finds this checkout (it has sdk/go.mod); a stamped Checkout
// wins, and one without the SDK module is not reported.
func TestSourceDir(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if got := SourceDir(); got != repo {
		t.Errorf("SourceDir() = %q, want %q", got, repo)
	}
	defer func(c string) { Checkout = c }(Checkout)
	other := t.TempDir()
	Checkout = other
	if got := SourceDir(); got != "" {
		t.Errorf("SourceDir() with a Checkout lacking sdk/go.mod = %q, want \"\"", got)
	}
	if err := os.MkdirAll(filepath.Join(other, "sdk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "sdk", "go.mod"), []byte("module github.com/bcollard/marina/sdk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := SourceDir(); got != other {
		t.Errorf("SourceDir() with a stamped Checkout = %q, want %q", got, other)
	}
}
