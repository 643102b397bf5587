package dockertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const helperEnv = "MARINA_DOCKERTEST_HELPER"

// TestRequireHelperProcess is not a test on its own: TestRequireWithoutEngine runs
// it in a child process whose docker points at a socket that does not exist.
func TestRequireHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	Require(t)
	t.Log("Require returned")
}

// TestRequireWithoutEngine checks that a missing engine fails the test with the
// fix (CI must never skip tier 2), and skips only when MARINA_SKIP_DOCKER=1 is set
// outside CI.
func TestRequireWithoutEngine(t *testing.T) {
	tests := []struct {
		name     string
		env      []string
		wantLine string
		wantText string
	}{
		{"fails", nil, "--- FAIL", "make test-setup as root"},
		{"skips on request", []string{SkipEnv + "=1"}, "--- SKIP", "skipping because " + SkipEnv + "=1"},
		{"skip ignored in CI", []string{SkipEnv + "=1", "CI=true"}, "--- FAIL", "ignored when CI is set"},
		{"only 1 skips", []string{SkipEnv + "=yes"}, "--- FAIL", "make test-setup as root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestRequireHelperProcess$", "-test.v", "-test.count=1")
			env := []string{helperEnv + "=1", "DOCKER_HOST=unix:///nonexistent/marina-test.sock"}
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != SkipEnv && k != "CI" && k != "DOCKER_HOST" && k != "DOCKER_CONTEXT" {
					env = append(env, kv)
				}
			}
			cmd.Env = append(env, tt.env...)
			out, _ := cmd.CombinedOutput()
			s := string(out)
			if !strings.Contains(s, tt.wantLine+": TestRequireHelperProcess") || !strings.Contains(s, tt.wantText) {
				t.Fatalf("child output lacks %q and %q:\n%s", tt.wantLine, tt.wantText, s)
			}
			if strings.Contains(s, "Require returned") {
				t.Fatalf("Require returned without an engine:\n%s", s)
			}
		})
	}
}
