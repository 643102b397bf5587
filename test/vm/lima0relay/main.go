//go:build linux

// Command lima0relay gives the VM test's qemu VM (test/vm) its lima0: it
// serves Lima's socket network on a unix socket and relays the frames to a
// tap device. run.sh runs it as root (opening a tap needs /dev/net/tun,
// which only root may open here) and the socket belongs to the test user.
//
//	lima0relay -tap mvm0 -socket /tmp/mvm.X/lima0.sock -owner 1001
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	tapName := flag.String("tap", "", "the tap device (it exists)")
	sock := flag.String("socket", "", "the unix socket to serve")
	owner := flag.Int("owner", -1, "the uid that owns the socket")
	flag.Parse()
	if *tapName == "" || *sock == "" {
		fmt.Fprintln(os.Stderr, "lima0relay: -tap and -socket are required")
		os.Exit(2)
	}
	l, err := serveLima0(*sock, *tapName)
	if err == nil && *owner >= 0 {
		err = os.Chown(*sock, *owner, -1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lima0relay:", err)
		os.Exit(1)
	}
	fmt.Printf("lima0relay: %s <-> %s\n", *sock, *tapName)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	_ = l.Close()
}

// lima0 is the VM's second network: Lima's `networks: [{socket: ...}]`,
// which Lima's qemu driver connects to a unix socket (qemu's stream socket
// netdev: every Ethernet frame prefixed by its length, 4 bytes big-endian)
// and the guest configures as lima0 with DHCP. The relay serves that socket
// and passes the frames to a tap device that run.sh created (with an address
// on this machine and dnsmasq answering DHCP on it), so that this machine
// reaches the VM's lima0 like a Mac reaches vzNAT's.
type lima0 struct {
	ln  net.Listener
	tap *os.File

	mu   sync.Mutex
	conn net.Conn
}

// serveLima0 listens on sock and relays to the tap device tapName.
func serveLima0(sock, tapName string) (*lima0, error) {
	tap, err := openTap(tapName)
	if err != nil {
		return nil, fmt.Errorf("open the tap device %s: %w", tapName, err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		tap.Close()
		return nil, err
	}
	l := &lima0{ln: ln, tap: tap}
	go l.accept()
	go l.fromTap()
	return l, nil
}

func (l *lima0) Close() error {
	err := l.ln.Close()
	l.mu.Lock()
	if l.conn != nil {
		l.conn.Close()
	}
	l.mu.Unlock()
	return errors.Join(err, l.tap.Close())
}

// accept takes qemu's connection (a new one at every VM start).
func (l *lima0) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.conn != nil {
			l.conn.Close()
		}
		l.conn = c
		l.mu.Unlock()
		go l.fromQemu(c)
	}
}

func (l *lima0) fromQemu(c net.Conn) {
	var hdr [4]byte
	buf := make([]byte, 65536)
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > uint32(len(buf)) {
			return
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		if _, err := l.tap.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (l *lima0) fromTap() {
	buf := make([]byte, 4+65536)
	for {
		n, err := l.tap.Read(buf[4:])
		if err != nil {
			return
		}
		binary.BigEndian.PutUint32(buf[:4], uint32(n))
		l.mu.Lock()
		c := l.conn
		l.mu.Unlock()
		if c != nil {
			_, _ = c.Write(buf[:4+n]) // a frame lost while qemu restarts is like one lost on a wire
		}
	}
}

// openTap attaches to the existing tap device name (no packet info header).
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}
