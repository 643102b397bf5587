// Package localdns is marina's built-in local DNS plugin. It serves the lab's
// DNS zone (dns.zone, default demo.internal) on the shared Docker bridge from
// two containers: an etcd at dns.etcdIP (172.30.255.52) holding the records,
// which ExternalDNS in every cluster writes with its coredns provider, and a
// CoreDNS at dns.serverIP (172.30.255.53) answering for the zone from that
// etcd — and for nothing else.
//
// PostUp makes both containers converge (sdk/container: created when
// missing, recreated only when their spec changed, started when stopped),
// waits until they are ready, publishes the etcd endpoint, the DNS server
// and the zone for the externaldns and coredns plugins, and asks the host to
// send the zone's lookups to the server (on macOS /etc/resolver/<zone>).
// PreDestroy removes both containers and the etcd data volume and asks the
// host to undo the resolver change.
package localdns

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Plugin is the localdns plugin.
type Plugin struct{}

// New returns the localdns plugin.
func New() sdk.Plugin { return &Plugin{} }

// Info describes the plugin.
func (*Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         "localdns",
		Version:      Version,
		Description:  "Serves the local DNS zone (etcd + CoreDNS on the bridge) and resolves it from the host.",
		Maintainer:   "marina",
		Capabilities: []string{sdk.CapDocker, sdk.CapHostResolver},
		Outputs:      []string{OutputEtcdEndpoint, OutputDNSServer, OutputZone},
		Timeouts: map[sdk.Hook]time.Duration{
			sdk.PostUp:     5 * time.Minute, // may pull two images
			sdk.PreDestroy: 2 * time.Minute,
		},
		Config: defaultConfig(),
	}
}

// PostUp starts (or converges) etcd, then CoreDNS, and declares the outputs
// and the host resolver change. Re-running it with nothing changed touches
// no container.
func (*Plugin) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	l, err := newLab(req)
	if err != nil {
		return nil, err
	}
	server, err := l.serverSpec()
	if err != nil {
		return nil, err
	}
	c, err := container.Connect(ctx, req.Env.DockerHost)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	log := req.Logger()

	req.Progress("etcd %s at %s", l.cfg.EtcdContainer, l.etcdIP)
	out, err := c.Ensure(ctx, l.etcdSpec())
	steady := &sdk.Steady{Containers: []sdk.SteadyContainer{out.Steady()}}
	if err != nil {
		return nil, fmt.Errorf("local DNS etcd: %w", err)
	}
	log.Log(ctx, logLevel(out.Action), "etcd container", "name", l.cfg.EtcdContainer, "action", out.Action, "reason", out.Reason, "id", out.ID)
	// A container left unchanged was running already: the readiness waits
	// are for containers just (re)started, so a no-op re-run stays fast.
	if out.Action != container.Unchanged {
		req.Progress("waiting for etcd %s to be healthy", l.cfg.EtcdContainer)
		if err := waitEtcdHealthy(ctx, c.API(), l.cfg.EtcdContainer, l.cfg.ReadyTimeout); err != nil {
			return nil, err
		}
	}

	req.Progress("CoreDNS %s at %s for %s", l.cfg.ServerContainer, l.serverIP, l.zone)
	out, err = c.Ensure(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("local DNS server: %w", err)
	}
	steady.Containers = append(steady.Containers, out.Steady())
	log.Log(ctx, logLevel(out.Action), "CoreDNS container", "name", l.cfg.ServerContainer, "action", out.Action, "reason", out.Reason, "id", out.ID)
	if out.Action != container.Unchanged {
		if err := waitSettled(ctx, c.API(), l.cfg.ServerContainer, l.cfg.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("local DNS server: %w", err)
		}
	}

	return &sdk.Result{
		Outputs:     l.outputs(),
		HostChanges: []sdk.HostChange{l.resolverChange(false)},
		Warnings:    l.warnings(),
		// While both containers run unchanged, the next up need not start
		// this plugin: nothing here would change.
		Steady: steady,
	}, nil
}

// PreDestroy removes the containers and the etcd volume and asks the host to
// remove the resolver change. When the Docker engine cannot be reached (the
// VM is already gone or stopped) the host change is still declared, with a
// warning naming what may be left, so that destroy can go on.
func (*Plugin) PreDestroy(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	l, err := newLab(req)
	if err != nil {
		return nil, err
	}
	res := &sdk.Result{HostChanges: []sdk.HostChange{l.resolverChange(true)}}
	c, err := container.Connect(ctx, req.Env.DockerHost)
	if err != nil {
		res.Warnings = append(res.Warnings, sdk.Diagnostic{
			Severity: sdk.SeverityWarning,
			Summary:  "could not reach Docker to remove the local DNS containers; they go with the VM",
			Detail: fmt.Sprintf("%v. If the engine outlives the VM (driver host), remove them with: docker rm -f %s %s && docker volume rm %s",
				err, l.cfg.ServerContainer, l.cfg.EtcdContainer, l.cfg.etcdVolume()),
		})
		return res, nil
	}
	defer c.Close()
	for _, name := range []string{l.cfg.ServerContainer, l.cfg.EtcdContainer} {
		removed, err := c.Remove(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("local DNS: %w", err)
		}
		req.Logger().Info("container", "name", name, "removed", removed)
	}
	if err := c.RemoveVolume(ctx, l.cfg.etcdVolume()); err != nil {
		return nil, fmt.Errorf("local DNS etcd data: %w (is another container using it? docker ps -a --filter volume=%s)", err, l.cfg.etcdVolume())
	}
	return res, nil
}

// logLevel logs what changed at Info and what was already in place at
// Debug, so a no-op `marina up` stays quiet.
func logLevel(a container.Action) slog.Level {
	if a == container.Unchanged {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
