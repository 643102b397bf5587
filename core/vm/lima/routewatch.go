package lima

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/vm/limavm"
)

// noteRoute returns the Route the note asks for, with priv, or nil.
func noteRoute(instDir string, priv *hostnet.Privileged, logf func(string, ...any)) func() *hostnet.Route {
	var last string
	return func() *hostnet.Route {
		n, err := limavm.ReadRouteNote(instDir)
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
func StartRouteWatch(ctx context.Context, instance string, api API) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	logf := func(format string, args ...any) { logrus.Infof("marina: "+format, args...) }
	f, err := newRouteFollower(os.Getenv("LIMA_HOME"), instance, api, logf)
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
func newRouteFollower(limaHome, instance string, api API, logf func(string, ...any)) (*hostnet.Follower, error) {
	if limaHome == "" || filepath.Base(limaHome) != "lima" || filepath.Base(filepath.Dir(limaHome)) != ".marina" {
		return nil, fmt.Errorf("LIMA_HOME %q is not marina's (<home>/.marina/lima)", limaHome)
	}
	cfg := config.Default()
	cfg.VM.Name = instance
	d := New(cfg, filepath.Dir(filepath.Dir(limaHome)), api)
	d.ExecTimeout = 30 * time.Second // one look; a hung SSH must not stall following for long
	priv := &hostnet.Privileged{Runner: hostnet.ExecRunner{}, IsRoot: os.Geteuid() == 0}
	return &hostnet.Follower{
		Route: noteRoute(filepath.Join(limaHome, instance), priv, logf),
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
