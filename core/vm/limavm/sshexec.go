package limavm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// maxSessions bounds the commands that run at once on the one connection;
// OpenSSH refuses more than MaxSessions (default 10) channels per connection.
const maxSessions = 8

// killGrace is how long the remote `timeout` waits after its TERM before it
// sends KILL, and how long a cancelled command may take to report back.
const killGrace = 5 * time.Second

// sshExecutor runs commands in the VM over ONE SSH connection that every
// command shares (one session each) and that is dialled again only when it
// breaks (e.g. after the VM restarted).
type sshExecutor struct {
	// target returns the address to dial (a loopback host:port) and the
	// private key file; it is asked again before every new connection.
	target func(ctx context.Context) (addr, keyFile string, err error)
	// user is the guest user.
	user string
	// dialTimeout bounds dial + handshake when ctx allows more.
	dialTimeout time.Duration

	mu     sync.Mutex
	client *ssh.Client
	slots  chan struct{}
}

func newSSHExecutor(user string, target func(ctx context.Context) (string, string, error)) *sshExecutor {
	return &sshExecutor{target: target, user: user, dialTimeout: 15 * time.Second, slots: make(chan struct{}, maxSessions)}
}

// remoteCommand is the command line the guest's shell runs for argv: argv
// quoted word by word, under `timeout` so that the guest itself ends the
// command when its deadline passes (even if the connection is gone), and
// under `sudo -n` when it must run as root. The shell execs it, so that a
// signal sent over SSH reaches sudo (which passes it on to timeout, which
// passes it on to the command) rather than a shell that would not forward
// it.
func remoteCommand(argv []string, root bool, limit time.Duration) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("exec: empty command")
	}
	var words []string
	if root {
		words = append(words, "sudo", "-n", "--")
	}
	if limit > 0 {
		secs := int64(math.Ceil(limit.Seconds()))
		words = append(words, "timeout", "-k", fmt.Sprint(int64(killGrace.Seconds())), fmt.Sprint(secs))
	}
	line, err := QuoteArgs(append(words, argv...))
	if err != nil {
		return "", err
	}
	return "exec " + line, nil
}

// conn returns the shared client, dialling it when there is none.
func (e *sshExecutor) conn(ctx context.Context) (*ssh.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		return e.client, nil
	}
	addr, keyFile, err := e.target(ctx)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("ssh address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		// The host key is not verified (below), which is only sound for
		// the loopback forward that Lima's host agent opens for this user.
		return nil, fmt.Errorf("ssh address %q is not a loopback address; marina only talks to the VM through Lima's local forward", addr)
	}
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read Lima's SSH key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("parse Lima's SSH key %s: %w", keyFile, err)
	}
	cfg := &ssh.ClientConfig{
		User: e.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		// Lima gives the VM a new cloud-init instance id, hence new host
		// keys, at every boot, and publishes no host key to pin; like Lima
		// itself (StrictHostKeyChecking=no) marina accepts the key, and
		// limits that to the loopback address checked above.
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // loopback only, see above
		Timeout:         e.dialTimeout,
	}
	dctx, cancel := context.WithTimeout(ctx, e.dialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to the VM over SSH at %s: %w", addr, err)
	}
	// Bound the handshake by the same deadline, then lift it.
	deadline, _ := dctx.Deadline()
	_ = raw.SetDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	c, chans, reqs, err := ssh.NewClientConn(raw, addr, cfg)
	stop()
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("SSH handshake with the VM at %s: %w", addr, err)
	}
	_ = raw.SetDeadline(time.Time{})
	e.client = ssh.NewClient(c, chans, reqs)
	return e.client, nil
}

// drop forgets client if it is still the shared one, and closes it.
func (e *sshExecutor) drop(client *ssh.Client) {
	e.mu.Lock()
	if e.client == client {
		e.client = nil
	}
	e.mu.Unlock()
	_ = client.Close()
}

// Close closes the shared connection (a later command dials again).
func (e *sshExecutor) Close() error {
	e.mu.Lock()
	c := e.client
	e.client = nil
	e.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}

// session opens a session on the shared connection, re-dialling once when
// the connection turns out to be broken.
func (e *sshExecutor) session(ctx context.Context) (*ssh.Session, error) {
	for attempt := 0; ; attempt++ {
		client, err := e.conn(ctx)
		if err != nil {
			return nil, err
		}
		s, err := client.NewSession()
		if err == nil {
			return s, nil
		}
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) || attempt > 0 {
			// The server answered, or a fresh connection failed too.
			return nil, fmt.Errorf("open an SSH session in the VM: %w", err)
		}
		e.drop(client)
	}
}

// Run runs the command line cmd in the VM with stdin (may be nil) and
// returns its stdout and stderr. Cancelling ctx signals the command (TERM,
// which sudo and timeout pass on), closes its session and returns at once.
func (e *sshExecutor) Run(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, err error) {
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	s, err := e.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	// Copy stdin ourselves: Session.Wait would otherwise wait for stdin to
	// reach EOF, which a cancelled command never needs.
	w, err := s.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := s.Start(cmd); err != nil {
		return nil, nil, fmt.Errorf("start the command in the VM: %w", err)
	}
	go func() {
		if stdin != nil {
			_, _ = io.Copy(w, stdin)
		}
		_ = w.Close()
	}()
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGTERM)
		_ = s.Close()
		select {
		case <-done:
		case <-time.After(killGrace):
		}
		return out.Bytes(), errb.Bytes(), ctx.Err()
	}
	return out.Bytes(), errb.Bytes(), err
}

// execError describes a failed command: what ran, how it ended, and the
// stderr that explains it.
func execError(argv []string, err error, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	var exit *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case errors.As(err, &exit):
		err = fmt.Errorf("exit status %d", exit.ExitStatus())
	case errors.As(err, &missing):
		err = errors.New("the connection to the VM ended before the command reported its exit status")
	}
	if msg == "" {
		return fmt.Errorf("in the VM: %s: %w", strings.Join(argv, " "), err)
	}
	return fmt.Errorf("in the VM: %s: %w: %s", strings.Join(argv, " "), err, msg)
}
