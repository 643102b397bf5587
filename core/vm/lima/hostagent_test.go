package lima

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostAgentArgs(t *testing.T) {
	// The argv Lima v2.2.0's instance.StartWithPaths builds (pkg/instance/start.go).
	args := []string{"--debug", "hostagent", "--pidfile", "/h/.marina/lima/marina/ha.pid", "--socket", "/h/.marina/lima/marina/ha.sock",
		"--run-gui", "--guestagent", "/opt/share/lima/lima-guestagent.Linux-aarch64.gz", "--progress", "marina"}
	if !IsHostAgentInvocation(args) || !IsHostAgentInvocation(args[1:]) {
		t.Fatal("not recognised as a host agent invocation")
	}
	for _, other := range [][]string{nil, {"up"}, {"--debug"}, {"--debug", "up"}, {"shell", "hostagent"}} {
		if IsHostAgentInvocation(other) {
			t.Errorf("%q recognised as a host agent invocation", other)
		}
	}
	got, err := ParseHostAgentArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	want := HostAgentArgs{Debug: true, PIDFile: "/h/.marina/lima/marina/ha.pid", Socket: "/h/.marina/lima/marina/ha.sock", RunGUI: true,
		GuestAgent: "/opt/share/lima/lima-guestagent.Linux-aarch64.gz", Progress: true, Instance: "marina"}
	if got != want {
		t.Errorf("ParseHostAgentArgs = %+v\nwant %+v", got, want)
	}
	for _, bad := range [][]string{
		{"hostagent", "--socket", "/s"},
		{"hostagent", "--socket", "/s", "a", "b"},
		{"hostagent", "marina"},
		{"hostagent", "--unknown", "marina"},
	} {
		if _, err := ParseHostAgentArgs(bad); err == nil {
			t.Errorf("ParseHostAgentArgs(%q) accepted", bad)
		}
	}
}

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
