package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bcollard/marina/core/buildinfo"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/hostvm"
	"github.com/bcollard/marina/core/vm/limavm"
)

// KindHelperEnv names a program that speaks marina's kind-helper protocol
// (core/kind.ServeHelperWith) to run instead of marina's own kind: the
// seam where marina's end-to-end tests put their stand-in for kind
// (test/standin). Unset, marina runs kind's library in a child process of
// itself.
const KindHelperEnv = "MARINA_KIND_HELPER"

// marinaDir returns ~/.marina (the lab's state, logs, plugins and caches).
func marinaDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("home directory: %w", err)
	}
	return filepath.Join(home, ".marina"), nil
}

// newDriver returns the machine driver the config selects.
func newDriver(cfg *config.Config, home string) (vm.Driver, error) {
	name, err := vm.Resolve(cfg.VM.Driver)
	if err != nil {
		return nil, exitcode.NewUsage(err)
	}
	switch name {
	case "host":
		return &hostvm.Host{VMName: cfg.VM.Name}, nil
	default:
		return limavm.New(cfg, home), nil
	}
}

// The plugins a lab is opened with.
const (
	readOnly    = false // none: nothing changes, no plugin starts
	withPlugins = true  // every enabled plugin checked (config included), then dispatched
)

// openLab is the one place that wires the lab: the config, the machine
// driver, the host facts and, withPlugins, the plugin set — resolved once,
// each enabled plugin checked (installed, unmodified, its dependencies and
// its config, which it validates itself) before anything changes, and the
// dispatcher that runs their hooks. The machine's status is read by the
// lab itself (lab.Machine), so every hook gets its DockerHost and driver;
// cluster operations come from lb.OpenClusters. The caller calls the
// returned close (it stops the plugins).
func (a *app) openLab(ctx context.Context, plugins bool) (lb *lab.Lab, l *config.Loaded, closeLab func(), err error) {
	l, err = a.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("home directory: %w", err)
	}
	dir := filepath.Join(home, ".marina")
	drv, err := newDriver(l.Config, home)
	if err != nil {
		return nil, nil, nil, err
	}
	target := kubeconfig.DefaultTarget(home)
	lb = &lab.Lab{
		Config: l.Config,
		Driver: drv,
		Runtime: lab.Runtime{
			HostVersion:      buildinfo.Get().Version,
			RegistryCacheDir: filepath.Join(dir, "registry-cache"),
		},
		RunID:         strconv.FormatInt(time.Now().UnixNano(), 36),
		StateDir:      filepath.Join(dir, "state"),
		Home:          home,
		KindHelper:    os.Getenv(KindHelperEnv),
		KubeconfigDir: filepath.Join(home, ".kube", "marina"),
		Target:        &target,
		HostOS:        hostOS(),
	}
	lb.Route = newRoute(a, l.Config, drv)
	lb.Host = newHostApplier(a, drv)
	lb.CADir = filepath.Join(dir, "ca")
	lb.Trust = newHostTrust(a, l.Config)
	closeLab = func() {}
	if !plugins {
		return lb, l, closeLab, nil
	}
	set, err := a.checkPluginSet(l, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	opts := a.pluginOptions()
	opts.StateRoot = filepath.Join(lb.StateDir, "plugins")
	d := plugin.NewDispatcher(set.runnable, opts)
	set.validate(ctx, l, d)
	for _, w := range set.warnings {
		fmt.Fprintf(a.err, "Warning: %s\n", w)
	}
	if err := set.err(l); err != nil {
		_ = d.Close()
		return nil, nil, nil, err
	}
	lb.Plugins = d
	return lb, l, func() {
		if err := d.Close(); err != nil {
			a.log.Warn("stopping plugins", "err", err)
		}
	}, nil
}

// labClusters is the lab (read-only: no plugin is started) and what cluster
// operations need, for the commands that read or label clusters.
func (a *app) labClusters(ctx context.Context) (*lab.Lab, *lab.Clusters, error) {
	lb, _, _, err := a.openLab(ctx, readOnly)
	if err != nil {
		return nil, nil, err
	}
	c, err := lb.OpenClusters(ctx)
	if err != nil {
		return nil, nil, err
	}
	return lb, c, nil
}
