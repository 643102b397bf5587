// Package peercred is the transport security between marina and a plugin:
// gRPC over the Unix socket go-plugin sets up, with each side checking who
// is at the other end from the kernel's own record of the connection
// (SO_PEERCRED on Linux; LOCAL_PEERCRED and LOCAL_PEERPID on macOS) rather
// than from certificates.
//
// The plugin (sdk.Serve) accepts a connection only from its parent, the
// marina that started it, running as the same user; marina accepts a
// connection only to the process it started, running as the same user.
// The socket lives in a 0700 directory of marina's (or is writable only by
// its owner), so no other user can connect at all.
//
// Why not TLS (go-plugin's AutoMTLS, which marina used before): on one
// machine and one user, AutoMTLS guards against the same things, at the
// cost of a P-521 key and certificate generated on both sides and a TLS
// handshake at every launch (most of what a bare launch took).
// Its client certificate travels to the plugin in the environment, which
// any process of the user can read (/proc/PID/environ, ps eww), and its
// private keys live in the memory of processes that same user can trace;
// it does not keep out the same user, and other users are kept out by the
// socket's permissions. The peer check adds what certificates cannot: the
// process at the other end is the very one expected (by pid), not any
// holder of a key. docs/design.md, "Plugin transport", has the argument.
//
// Where the kernel cannot tell (other systems), Supported is false and
// marina keeps AutoMTLS.
package peercred

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// SecurityProtocol is what Info reports.
const SecurityProtocol = "marina-peercred"

// ErrUnsupported: this system cannot report a Unix socket peer's pid.
var ErrUnsupported = errors.New("peer credentials are not supported on this system")

// ErrRefused wraps every refusal of a peer.
var ErrRefused = errors.New("connection refused by peer credentials")

// Supported reports whether this system reports a Unix socket peer's pid
// and uid.
func Supported() bool { return supported }

// Peer is who is at the other end of a Unix socket connection.
type Peer struct {
	PID int
	UID int
}

// PeerOf reads the peer of a Unix socket connection from the kernel.
func PeerOf(c *net.UnixConn) (Peer, error) {
	if !supported {
		return Peer{}, ErrUnsupported
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var p Peer
	var perr error
	if err := rc.Control(func(fd uintptr) { p, perr = peerOf(int(fd)) }); err != nil {
		return Peer{}, err
	}
	return p, perr
}

// AuthInfo is the credentials.AuthInfo of a checked connection: the peer,
// and the security level of a Unix socket (PrivacyAndIntegrity, as gRPC's
// own local credentials give one: nothing leaves the kernel).
type AuthInfo struct {
	credentials.CommonAuthInfo
	Peer Peer
}

// AuthType implements credentials.AuthInfo.
func (AuthInfo) AuthType() string { return SecurityProtocol }

// New returns transport credentials that accept a connection only when it
// is a Unix socket whose peer runs as this process's user and, when
// wantPID returns a pid other than 0, is that process. wantPID is called
// at each handshake (marina knows its plugin's pid only once it started).
func New(wantPID func() int) credentials.TransportCredentials {
	return &creds{wantPID: wantPID, uid: os.Getuid()}
}

type creds struct {
	wantPID func() int
	uid     int
}

func (c *creds) check(conn net.Conn, role string) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("%w: the %s is not on a Unix socket (%s)", ErrRefused, role, conn.RemoteAddr().Network())
	}
	p, err := PeerOf(uc)
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("%w: cannot read the %s's credentials: %v", ErrRefused, role, err)
	}
	if p.UID != c.uid {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("%w: the %s (pid %d) runs as uid %d, not as this user (uid %d)", ErrRefused, role, p.PID, p.UID, c.uid)
	}
	if want := c.wantPID(); want != 0 && p.PID != want {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("%w: the %s is pid %d, not pid %d", ErrRefused, role, p.PID, want)
	}
	return conn, AuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, Peer: p}, nil
}

// ClientHandshake implements credentials.TransportCredentials: the server
// must be the expected process.
func (c *creds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.check(conn, "server")
}

// ServerHandshake implements credentials.TransportCredentials: the client
// must be the expected process.
func (c *creds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.check(conn, "client")
}

func (c *creds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: SecurityProtocol}
}

func (c *creds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName implements credentials.TransportCredentials (no
// names here: the peer is checked by pid).
func (c *creds) OverrideServerName(string) error { return nil }

// envClientCert is where go-plugin's AutoMTLS hands the plugin the host's
// certificate: when it is set, the host chose TLS and the plugin keeps it.
const envClientCert = "PLUGIN_CLIENT_CERT"

// DialOptions are the gRPC dial options of a host (marina) that started
// the plugin whose pid wantPID returns; pass them as go-plugin's
// ClientConfig.GRPCDialOptions with AutoMTLS set to !Supported(). Nil
// where Supported is false.
func DialOptions(wantPID func() int) []grpc.DialOption {
	if !supported {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(New(wantPID))}
}

// ServerOptions are the gRPC server options of a plugin: credentials that
// accept only its parent (the marina that started it, as its user). Nil
// where Supported is false, and when the host chose AutoMTLS instead (a
// marina from before peer credentials): go-plugin then serves TLS.
func ServerOptions() []grpc.ServerOption {
	if !supported || os.Getenv(envClientCert) != "" {
		return nil
	}
	parent := os.Getppid()
	return []grpc.ServerOption{grpc.Creds(New(func() int { return parent }))}
}
