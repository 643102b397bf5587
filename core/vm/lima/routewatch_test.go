package lima

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/limavm"
)

// routeWatchDriver is marina's side of the route note (limavm.Driver) for
// a VM "marina" under a new home, and the VM's instance directory.
func routeWatchDriver(t *testing.T) (d *limavm.Driver, home, instDir string) {
	t.Helper()
	home = t.TempDir()
	cfg := config.Default()
	cfg.VM.Name = "marina"
	d = limavm.New(cfg, home)
	instDir = filepath.Join(vm.LimaHome(home), "marina")
	if err := os.MkdirAll(instDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return d, home, instDir
}

// TestRouteNote: marina up's KeepRoute is what the host agent's follower
// reads; ForgetRoute stops it; a garbled note keeps nothing and is logged
// once.
func TestRouteNote(t *testing.T) {
	d, _, instDir := routeWatchDriver(t)
	var logs []string
	logf := func(format string, args ...any) { logs = append(logs, format) }
	priv := &hostnet.Privileged{Runner: hostnet.ExecRunner{}}
	route := noteRoute(instDir, priv, logf)
	if r := route(); r != nil || d.KeepingRoute("172.30.0.0/16") {
		t.Fatalf("no note: %+v", r)
	}
	if err := d.KeepRoute("172.30.0.0/16", hostnet.Darwin); err != nil {
		t.Fatal(err)
	}
	r := route()
	if r == nil || r.CIDR != "172.30.0.0/16" || r.OS != hostnet.Darwin || r.Priv != priv {
		t.Fatalf("route from the note: %+v", r)
	}
	if !d.KeepingRoute("172.30.0.0/16") || d.KeepingRoute("10.99.0.0/16") {
		t.Error("KeepingRoute does not compare the CIDR")
	}
	if err := d.KeepRoute("172.30.0.0/16", "windows"); err == nil {
		t.Error("KeepRoute accepted an OS hostnet does not route on")
	}
	if err := d.ForgetRoute(); err != nil {
		t.Fatal(err)
	}
	if r := route(); r != nil {
		t.Fatalf("after ForgetRoute: %+v", r)
	}
	if err := d.ForgetRoute(); err != nil {
		t.Errorf("forgetting twice: %v", err)
	}
	if err := os.WriteFile(filepath.Join(instDir, limavm.RouteNoteFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Read twice: a garbled note is logged once, not at every look.
	first, second := route(), route()
	if first != nil || second != nil || len(logs) != 1 {
		t.Errorf("garbled note: logs %q", logs)
	}
}

// TestRouteWatchLifecycle: the follower is built only under marina's
// LIMA_HOME; started, it runs until its stop function is called, which
// returns once the goroutine has ended.
func TestRouteWatchLifecycle(t *testing.T) {
	if _, err := newRouteFollower("/opt/lima", "marina", &Library{}, t.Logf); err == nil || !strings.Contains(err.Error(), "not marina's") {
		t.Errorf("foreign LIMA_HOME: %v", err)
	}
	d, home, _ := routeWatchDriver(t)
	f, err := newRouteFollower(vm.LimaHome(home), "marina", &Library{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.KeepRoute("172.30.0.0/16", hostnet.Darwin); err != nil {
		t.Fatal(err)
	}
	if r := f.Route(); r == nil || r.CIDR != "172.30.0.0/16" {
		t.Fatalf("the follower does not read the driver's note: %+v", r)
	}
	// No VM runs: the address cannot be read, and that is an error, not a
	// hang or a panic.
	if _, err := f.Addr(context.Background()); err == nil {
		t.Error("read an address of a VM that does not exist")
	}

	t.Setenv("LIMA_HOME", vm.LimaHome(home))
	stop := StartRouteWatch(context.Background(), "marina", &Library{})
	stop() // returns only after the goroutine ended

	t.Setenv("LIMA_HOME", "")
	StartRouteWatch(context.Background(), "marina", &Library{})() // not marina's: nothing started
}
