package plugin

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/bcollard/marina/sdk/peercred"
)

// TestPluginTransport (issue 14, goal 3): marina's connection to a plugin
// is authenticated by peer credentials, not TLS: marina's side saw the
// plugin's own pid and uid; and another process of the same user that
// finds the plugin's socket cannot call it.
func TestPluginTransport(t *testing.T) {
	if !peercred.Supported() {
		t.Fatal("peer credentials unsupported on a system marina runs on")
	}
	marker := newMarker(t)
	inst, err := Start(context.Background(), tp("transport", marker), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inst.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p peer.Peer
	resp, err := grpc_health_v1.NewHealthClient(inst.conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health check over marina's connection: %v, %v", resp, err)
	}
	info, ok := p.AuthInfo.(peercred.AuthInfo)
	if !ok {
		t.Fatalf("the connection's auth is %T (%v), not peer credentials", p.AuthInfo, p.AuthInfo)
	}
	if info.Peer.PID != inst.pluginPID() || info.Peer.UID != os.Getuid() {
		t.Errorf("peer = %+v, want the plugin's pid %d, uid %d", info.Peer, inst.pluginPID(), os.Getuid())
	}

	// An intruder: another process of this user, dialling the socket.
	rc := inst.client.ReattachConfig()
	if rc == nil || rc.Addr == nil || rc.Addr.Network() != "unix" {
		t.Fatalf("plugin address: %+v", rc)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "MARINA_PLUGIN_TEST_DIAL="+rc.Addr.String())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "refused:") {
		t.Errorf("an intruder's call: %v\n%s", err, out)
	}
	// The plugin still serves marina after refusing it.
	if _, err := grpc_health_v1.NewHealthClient(inst.conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Errorf("health check after the intrusion: %v", err)
	}
}

// intruderMain dials a plugin's socket without being its parent and
// prints whether a call got through.
func intruderMain(sock string) {
	// The socket itself is reachable (same user): what refuses is the
	// plugin's peer check.
	raw, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("error: cannot reach the socket:", err)
		os.Exit(1)
	}
	_ = raw.Close()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil {
		fmt.Println("refused:", err)
		os.Exit(0)
	}
	fmt.Println("served")
	os.Exit(0)
}
