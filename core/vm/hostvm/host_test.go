package hostvm

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/sdk/dockertest"
)

func TestHostRunning(t *testing.T) {
	dockertest.Require(t)
	h := &Host{VMName: "marina", DockerHost: os.Getenv("DOCKER_HOST")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := h.Start(ctx, nil)
	if err != nil || st.State != vm.Running || st.Driver != "host" || st.DockerHost == "" {
		t.Fatalf("Start = %+v, %v", st, err)
	}
}

func TestHostDockerDown(t *testing.T) {
	h := &Host{VMName: "marina", DockerHost: "unix:///nonexistent/docker.sock"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := h.Status(ctx)
	if err != nil || st.State != vm.Stopped || !strings.Contains(st.Detail, "/nonexistent/docker.sock") {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if _, err := h.Start(ctx, nil); err == nil || !strings.Contains(err.Error(), "systemctl start docker") {
		t.Fatalf("Start with docker down: %v, want the fix", err)
	}
}

func TestHostExec(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the tests as root")
		}
		t.Skip("Exec runs as root through sudo -n; this test needs root (CI runs as root)")
	}
	h := &Host{}
	ctx := context.Background()
	out, err := h.Exec(ctx, []string{"cat"}, bytes.NewReader([]byte("in")))
	if err != nil || string(out) != "in" {
		t.Fatalf("Exec cat = %q, %v", out, err)
	}
	_, err = h.Exec(ctx, []string{"sh", "-c", "echo oops >&2; exit 3"}, nil)
	if err == nil || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("failing Exec: %v, want its stderr", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := h.Exec(tctx, []string{"sleep", "10"}, nil); err == nil || time.Since(start) > 8*time.Second {
		t.Fatalf("Exec past its deadline: %v after %s", err, time.Since(start))
	}
}
