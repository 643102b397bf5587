// Package dockerprobe tells, without Docker's client, when no Docker engine
// can be listening at an endpoint: its Unix socket does not exist or
// refuses connections, or nothing listens on its TCP port. The host driver
// reports such a machine as stopped with the probe's words, in marina-core
// and in the front (cmd/marina, which links no Docker client) alike; for
// anything else (an engine answers, TLS, ssh, a permission problem) the
// caller asks the real client.
package dockerprobe

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// DefaultHost is the engine Docker's client talks to without a context:
// $DOCKER_HOST, else the platform's default socket.
func DefaultHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	if runtime.GOOS == "windows" {
		return "npipe:////./pipe/docker_engine"
	}
	return "unix:///var/run/docker.sock"
}

// timeout bounds the probe's one connection attempt.
const timeout = 2 * time.Second

// UnreachableError says the Docker engine at Host did not answer: from
// Absent, no engine can be listening there; from core/docker's Open (which
// uses this type too), the client's ping failed.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the Docker engine at %s does not answer: %v", e.Host, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Absent returns an *UnreachableError when no engine can be listening at host
// (a unix:// socket that does not exist or refuses, a tcp:// port that
// refuses), and nil otherwise: something listens, or host is of a kind the
// probe does not judge (ssh://, npipe://, TLS settings), and only Docker's
// client can tell.
func Absent(host string) error {
	network, addr, ok := strings.Cut(host, "://")
	if !ok || os.Getenv("DOCKER_TLS_VERIFY") != "" {
		return nil
	}
	switch network {
	case "unix":
	case "tcp":
		if os.Getenv("DOCKER_CERT_PATH") != "" {
			return nil
		}
		addr, _, _ = strings.Cut(addr, "/") // tcp://host:port/path-prefix
	default:
		return nil
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		_ = c.Close()
		return nil
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return &UnreachableError{Host: host, Err: err}
	}
	return nil
}
