package peercred

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// unixPair returns both ends of a real Unix socket connection made in this
// process.
func unixPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err = net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}

func TestPeerOf(t *testing.T) {
	if !Supported() {
		t.Fatalf("peer credentials unsupported on a system marina runs on")
	}
	srv, cli := unixPair(t)
	for _, c := range []net.Conn{srv, cli} {
		p, err := PeerOf(c.(*net.UnixConn))
		if err != nil || p.PID != os.Getpid() || p.UID != os.Getuid() {
			t.Errorf("PeerOf = %+v, %v; want pid %d uid %d", p, err, os.Getpid(), os.Getuid())
		}
	}
}

func TestHandshakes(t *testing.T) {
	self := func() int { return os.Getpid() }
	srv, cli := unixPair(t)
	if _, info, err := New(self).ServerHandshake(srv); err != nil || info.(AuthInfo).Peer.PID != os.Getpid() {
		t.Errorf("server handshake with the expected client: %v, %v", info, err)
	}
	if _, _, err := New(func() int { return 0 }).ClientHandshake(context.Background(), "", cli); err != nil {
		t.Errorf("client handshake, any pid of this user: %v", err)
	}

	// Another pid than the one expected: refused, and the connection closed.
	srv, cli = unixPair(t)
	_, _, err := New(func() int { return 1 }).ServerHandshake(srv)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not pid 1") {
		t.Errorf("server handshake with an unexpected client: %v", err)
	}
	_ = cli.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, rerr := cli.Read(make([]byte, 1)); n != 0 || rerr != io.EOF {
		t.Errorf("the refused connection is still open: %d, %v", n, rerr)
	}

	// TCP, even on loopback: refused (no kernel record of the peer's pid).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, _, err := New(self).ClientHandshake(context.Background(), "", tc); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not on a Unix socket") {
		t.Errorf("TCP: %v", err)
	}
}

// TestGRPC: a real gRPC server and client over a Unix socket, both with
// these credentials: the call works and the server saw the client's pid.
func TestGRPC(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(New(func() int { return os.Getpid() })))
	grpc_health_v1.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(New(func() int { return os.Getpid() })))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health over peer credentials: %v, %v", resp, err)
	}

	// A client expecting another server process fails its call.
	bad, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(New(func() int { return 1 })))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := grpc_health_v1.NewHealthClient(bad).Check(ctx2, &grpc_health_v1.HealthCheckRequest{}); err == nil || !strings.Contains(err.Error(), "not pid 1") {
		t.Errorf("call to an unexpected server: %v", err)
	}
}

// TestOtherUserRefused: a process of another user that reaches the socket
// (here the socket is made world-writable on purpose) is refused, whatever
// pid is expected. Needs root to start that process.
func TestOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user (CI runs as root)")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir makes both 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "peercred.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperDial$")
	cmd.Env = append(os.Environ(), "PEERCRED_TEST_DIAL="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_ = l.(*net.UnixListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = New(func() int { return 0 }).ServerHandshake(c)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "runs as uid 65534") {
		t.Errorf("another user's connection: %v", err)
	}
}

// TestHelperDial is TestOtherUserRefused's other user: it connects and
// waits to be killed. It does nothing when run as a test.
func TestHelperDial(t *testing.T) {
	sock := os.Getenv("PEERCRED_TEST_DIAL")
	if sock == "" {
		return
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		os.Exit(3)
	}
	_, _ = io.Copy(io.Discard, c)
	os.Exit(0)
}
