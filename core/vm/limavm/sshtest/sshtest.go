// Package sshtest is a real SSH server on 127.0.0.1 for the tests of
// marina's guest commands (core/vm/limavm, core/vm/lima).
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Server is a real SSH server on 127.0.0.1 (golang.org/x/crypto/ssh)
// that runs each exec request locally with `sh -c`, as sshd runs it with
// the user's shell: a real protocol exchange for the guest-exec tests.
// (sh here is dash, which, unlike bash, does not exec the last command of
// -c: marina's `exec` prefix is what makes signals reach the command.)
type Server struct {
	Addr    string
	Port    int
	KeyFile string // the client's private key (PEM, 0600)
	Conns   atomic.Int32
	Ended   chan int // pid of every command that ended

	mu    sync.Mutex
	open  []net.Conn
	ln    net.Listener
	wg    sync.WaitGroup
	path  string // PATH of the commands (with a fake sudo first)
	procs map[int]bool
}

// Start starts a Server for the test t; the test's cleanup stops it.
func Start(t *testing.T) *Server {
	t.Helper()
	dir := t.TempDir()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	authorized, _ := ssh.NewPublicKey(clientPub)
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if md.User() == "lima" && string(key.Marshal()) == string(authorized.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)
	// sudo is not installed here; this one checks the exact options marina
	// passes, then runs the command (the tests already run as root).
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	sudo := "#!/bin/sh\n[ \"$1\" = -n ] && [ \"$2\" = -- ] || { echo \"fake sudo: unexpected options $*\" >&2; exit 1; }\nshift 2\nexec \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(sudo), 0o755); err != nil {
		t.Fatal(err)
	}
	// The VM's lima0 address, as iproute2 prints it.
	ip := "#!/bin/sh\n[ \"$*\" = \"-o -4 addr show lima0\" ] || exit 1\n" +
		"echo '3: lima0    inet 192.168.64.7/24 metric 100 brd 192.168.64.255 scope global dynamic lima0\\       valid_lft forever'\n"
	if err := os.WriteFile(filepath.Join(bin, "ip"), []byte(ip), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), Port: ln.Addr().(*net.TCPAddr).Port, KeyFile: keyFile,
		Ended: make(chan int, 100), ln: ln, path: bin + ":/usr/bin:/bin", procs: map[int]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.Conns.Add(1)
			s.mu.Lock()
			s.open = append(s.open, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, cfg)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.DropConnections()
		s.mu.Lock()
		for pid := range s.procs {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// dropConnections closes every client connection (like a VM restart).
// DropConnections closes every open connection (a VM that went away).
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.open {
		_ = c.Close()
	}
	s.open = nil
}

func (s *Server) serve(c net.Conn, cfg *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.session(ch, chReqs)
		}()
	}
}

var sshSignals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP}

func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	exited := make(chan struct{})
	for req := range reqs {
		switch req.Type {
		case "exec":
			if cmd != nil {
				_ = req.Reply(false, nil)
				continue
			}
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			cmd = exec.Command("sh", "-c", p.Command)
			cmd.Env = []string{"PATH=" + s.path, "HOME=/"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			pid := cmd.Process.Pid
			s.mu.Lock()
			s.procs[pid] = true
			s.mu.Unlock()
			_ = req.Reply(true, nil)
			go func() { _, _ = io.Copy(stdin, ch); _ = stdin.Close() }()
			go func() {
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); _, _ = io.Copy(ch, stdout) }()
				go func() { defer wg.Done(); _, _ = io.Copy(ch.Stderr(), stderr) }()
				wg.Wait()
				err := cmd.Wait()
				status := uint32(0)
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					status = uint32(exit.ExitCode())
					if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						status = 128 + uint32(ws.Signal())
					}
				}
				s.mu.Lock()
				delete(s.procs, pid)
				s.mu.Unlock()
				s.Ended <- pid
				_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
				_ = ch.CloseWrite()
				close(exited)
				_ = ch.Close()
			}()
		case "signal":
			var p struct{ Signal string }
			if cmd != nil && ssh.Unmarshal(req.Payload, &p) == nil {
				if sig, ok := sshSignals[p.Signal]; ok {
					// The signal reaches the command as sshd's does: the
					// shell execs the command, so its process gets it.
					_ = cmd.Process.Signal(sig)
				}
			}
			if req.WantReply {
				_ = req.Reply(true, nil)
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
	if cmd != nil {
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
	}
}
