package limaengine

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunHostAgentWithoutInstance runs the real host agent entry point
// against an empty LIMA_HOME: Lima's host agent fails on the missing
// instance, and the PID file is cleaned up.
func TestRunHostAgentWithoutInstance(t *testing.T) {
	dir := t.TempDir()
	pid := filepath.Join(dir, "ha.pid")
	args := []string{"hostagent", "--pidfile", pid, "--socket", filepath.Join(dir, "ha.sock"), "marina"}

	t.Setenv("LIMA_HOME", "")
	if err := RunHostAgent(context.Background(), args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "LIMA_HOME") {
		t.Fatalf("without LIMA_HOME: %v", err)
	}
	t.Setenv("LIMA_HOME", dir)
	err := RunHostAgent(context.Background(), args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "hostagent") {
		t.Fatalf("RunHostAgent on a missing instance = %v", err)
	}
	if _, err := os.Stat(pid); !os.IsNotExist(err) {
		t.Errorf("the PID file is left behind: %v", err)
	}
}
