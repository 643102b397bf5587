package lima

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/hostnet"
)

// routeNoteFile, in the instance directory, is the route the VM's host
// agent keeps on the VM's address: written by `marina up` once the route
// is in place (KeepRoute), removed by `marina down --remove-route` and
// `marina destroy` (ForgetRoute). The host agent reads it before every
// look, so it needs no config of its own (it is started with the instance
// name only) and follows what the last `marina up` set.
const routeNoteFile = "marina-route.json"

// routeNote is the route to keep.
type routeNote struct {
	// CIDR is the bridge network (network.bridgeCIDR).
	CIDR string `json:"cidr"`
	// OS is hostnet.Darwin or hostnet.Linux (which route commands).
	OS string `json:"os"`
}

func (d *Driver) instDir() string { return filepath.Join(LimaHome(d.home), d.vmName()) }

// KeepRoute tells the VM's host agent to keep the route for cidr on the
// VM's address (hostOS: hostnet.Darwin or hostnet.Linux). `marina up`
// calls it once the route is in place.
func (d *Driver) KeepRoute(cidr, hostOS string) error {
	if hostOS != hostnet.Darwin && hostOS != hostnet.Linux {
		return fmt.Errorf("keep route: host OS %q is not %q or %q", hostOS, hostnet.Darwin, hostnet.Linux)
	}
	b, err := json.Marshal(routeNote{CIDR: cidr, OS: hostOS})
	if err != nil {
		return err
	}
	path := filepath.Join(d.instDir(), routeNoteFile)
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("tell the host agent to keep the route (%s): %w", path, err)
	}
	return nil
}

// KeepingRoute reports whether the host agent is told to keep the route
// for cidr.
func (d *Driver) KeepingRoute(cidr string) bool {
	n, err := readRouteNote(d.instDir())
	return err == nil && n != nil && n.CIDR == cidr
}

// ForgetRoute tells the host agent to stop keeping the route (before it
// is removed, so the agent does not put it back).
func (d *Driver) ForgetRoute() error {
	err := os.Remove(filepath.Join(d.instDir(), routeNoteFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readRouteNote returns the note, or (nil, nil) when there is none.
func readRouteNote(instDir string) (*routeNote, error) {
	b, err := os.ReadFile(filepath.Join(instDir, routeNoteFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n routeNote
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", routeNoteFile, err)
	}
	return &n, nil
}

// noteRoute returns the Route the note asks for, with priv, or nil.
func noteRoute(instDir string, priv *hostnet.Privileged, logf func(string, ...any)) func() *hostnet.Route {
	var last string
	return func() *hostnet.Route {
		n, err := readRouteNote(instDir)
		if err != nil {
			if msg := err.Error(); msg != last {
				last = msg
				logf("route following: %v", err)
			}
			return nil
		}
		last = ""
		if n == nil {
			return nil
		}
		return &hostnet.Route{OS: n.OS, CIDR: n.CIDR, Priv: priv}
	}
}

// StartRouteWatch starts, for the host agent of instance, the goroutine
// that keeps the host's route to the bridge on the VM's lima0 address
// (hostnet.Follower: `sudo -n` only, never a prompt), and returns the
// function that stops it and waits for it. The host agent calls it when it
// runs and stops it when it returns:
//
//	defer StartRouteWatch(ctx, a.Instance)()
//
// It follows only a route `marina up` asked it to keep (the note in the
// instance directory) and logs through the agent's logrus logger (the
// instance's ha.stderr.log).
func StartRouteWatch(ctx context.Context, instance string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	logf := func(format string, args ...any) { logrus.Infof("marina: "+format, args...) }
	f, err := newRouteFollower(os.Getenv("LIMA_HOME"), instance, logf)
	if err != nil {
		logrus.WithError(err).Warn("marina: the route to the bridge will not follow the VM's address")
		cancel()
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.Run(ctx)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// newRouteFollower builds the follower for the VM instance under
// limaHome (marina's LIMA_HOME, ~/.marina/lima): the route from the note,
// the address from `ip addr show lima0` in the VM over Lima's SSH, the
// route commands on this machine with sudo -n.
func newRouteFollower(limaHome, instance string, logf func(string, ...any)) (*hostnet.Follower, error) {
	if limaHome == "" || filepath.Base(limaHome) != "lima" || filepath.Base(filepath.Dir(limaHome)) != ".marina" {
		return nil, fmt.Errorf("LIMA_HOME %q is not marina's (<home>/.marina/lima)", limaHome)
	}
	cfg := config.Default()
	cfg.VM.Name = instance
	d := New(cfg, filepath.Dir(filepath.Dir(limaHome)))
	d.ExecTimeout = 30 * time.Second // one look; a hung SSH must not stall following for long
	priv := &hostnet.Privileged{Runner: hostnet.ExecRunner{}, IsRoot: os.Geteuid() == 0}
	return &hostnet.Follower{
		Route: noteRoute(d.instDir(), priv, logf),
		Addr: func(ctx context.Context) (netip.Addr, error) {
			s, err := d.guestIP(ctx)
			if err != nil {
				return netip.Addr{}, err
			}
			return netip.ParseAddr(s)
		},
		Logf: logf,
	}, nil
}
