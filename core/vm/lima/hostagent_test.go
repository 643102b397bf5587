package lima

import (
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
