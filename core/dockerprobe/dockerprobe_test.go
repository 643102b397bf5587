package dockerprobe

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAbsent against real sockets and ports of this test: a missing socket
// and a refused port are absent engines; a listening socket and endpoints
// the probe does not judge are not.
func TestAbsent(t *testing.T) {
	t.Setenv("DOCKER_TLS_VERIFY", "")
	t.Setenv("DOCKER_CERT_PATH", "")
	dir := t.TempDir()
	missing := "unix://" + filepath.Join(dir, "missing.sock")
	err := Absent(missing)
	var ne *UnreachableError
	if !errors.As(err, &ne) || ne.Host != missing || !strings.Contains(err.Error(), "the Docker engine at "+missing+" does not answer: ") ||
		!strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("Absent(%s) = %v", missing, err)
	}

	sock := filepath.Join(dir, "live.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := Absent("unix://" + sock); err != nil {
		t.Errorf("Absent of a listening socket = %v", err)
	}
	l.Close() // Go removes the socket file on Close: missing again
	stale := filepath.Join(dir, "stale.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Absent("unix://" + stale); err != nil {
		// a plain file refuses with ECONNREFUSED on Linux; either way the
		// answer is an absent engine, never a panic or a hang
		if !errors.As(err, &ne) {
			t.Errorf("Absent of a plain file = %v", err)
		}
	}

	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := tl.Addr().String()
	if err := Absent("tcp://" + addr); err != nil {
		t.Errorf("Absent of a listening port = %v", err)
	}
	tl.Close()
	if err := Absent("tcp://" + addr); !errors.As(err, &ne) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Absent of a closed port = %v", err)
	}
	for _, h := range []string{"ssh://me@example.invalid", "npipe:////./pipe/docker_engine", "/var/run/docker.sock", "fd://"} {
		if err := Absent(h); err != nil {
			t.Errorf("Absent(%q) = %v, want nil (not judged)", h, err)
		}
	}
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	if err := Absent(missing); err != nil {
		t.Errorf("Absent with DOCKER_TLS_VERIFY = %v, want nil (the client's TLS settings apply)", err)
	}
}

func TestDefaultHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
	if h := DefaultHost(); h != "tcp://127.0.0.1:2375" {
		t.Errorf("DefaultHost with DOCKER_HOST = %q", h)
	}
	t.Setenv("DOCKER_HOST", "")
	if h := DefaultHost(); h != "unix:///var/run/docker.sock" {
		t.Errorf("DefaultHost = %q", h)
	}
}
