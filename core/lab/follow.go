package lab

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lifecycle"
)

// stale lists the marina kubeconfig files in dir whose server is not on
// addr, with the server they should have.
func staleKubeconfigs(dir, addr string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.kubeconfig"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range paths {
		cfg, err := kubeconfig.ReadCluster(p)
		if err != nil {
			continue // not ours to fix; cluster list reports it
		}
		for _, cl := range cfg.Clusters {
			u, err := url.Parse(cl.Server)
			if err != nil || u.Hostname() == addr {
				continue
			}
			u.Host = net.JoinHostPort(addr, u.Port())
			out[p] = u.String()
		}
	}
	return out, nil
}

// stepFollowAddress rewrites the clusters' kubeconfigs when the VM's
// address changed since they were written (a VM restart can change it):
// the per-cluster files, and marina's entries in the user's kubeconfig.
// The certificate stays valid because marina's kubeconfigs verify the API
// server as "kubernetes" (tls-server-name), not by address.
func (l *Lab) stepFollowAddress() lifecycle.Step {
	return lifecycle.NewStep("Kubeconfigs follow the VM's address",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			addr := l.guestIP()
			if addr == "" || l.KubeconfigDir == "" {
				return nil, nil
			}
			stale, err := staleKubeconfigs(l.KubeconfigDir, addr)
			if err != nil {
				return nil, err
			}
			var changes []lifecycle.Change
			for _, p := range sortedKeys(stale) {
				changes = append(changes, lifecycle.Change{Action: "update", Target: p, Detail: "server " + stale[p]})
			}
			return changes, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			stale, err := staleKubeconfigs(l.KubeconfigDir, l.guestIP())
			if err != nil {
				return err
			}
			paths := make([]string, 0, len(stale))
			for p := range stale {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			for _, p := range paths {
				cfg, err := kubeconfig.ReadCluster(p)
				if err != nil {
					return err
				}
				if err := kubeconfig.SetServer(cfg, stale[p]); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				if err := kubeconfig.WriteCluster(p, cfg); err != nil {
					return err
				}
				name := strings.TrimSuffix(filepath.Base(p), ".kubeconfig")
				if l.Target != nil {
					if _, err := kubeconfig.Merge(ctx, *l.Target, cfg, name, kubeconfig.MergeOptions{UpdateOnly: true}); err != nil {
						return fmt.Errorf("update %s in %s: %w", name, l.Target.DefaultFile(), err)
					}
				}
				r.Progress(name + " -> " + stale[p])
			}
			return nil
		})
}
