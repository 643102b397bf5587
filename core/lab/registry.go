package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/core/vm"
)

// Labels the registries plugin puts on every mirror container (see
// plugins/registries/README.md): the contract the registry commands read.
const (
	LabelMirrorUpstream = "marina.dev/upstream"
	LabelMirrorPort     = "marina.dev/port"
	LabelMirrorCache    = "marina.dev/cache"
)

// Mirror is one registry mirror as `marina registry list` shows it.
type Mirror struct {
	Name     string `json:"name"`
	Port     int    `json:"port"`
	Upstream string `json:"upstream"`
	State    string `json:"state"`
	Running  bool   `json:"running"`
	IP       string `json:"ip,omitempty"`
	// Cache is the cache's host directory or Docker volume.
	Cache string `json:"cache"`
	// CacheBytes is the cache's size (-1 when it could not be measured).
	CacheBytes int64 `json:"cacheBytes"`
}

// Mirrors lists the registry mirrors on the lab's network.
func (l *Lab) Mirrors(ctx context.Context) ([]Mirror, error) {
	c, err := l.dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	services, err := c.Services(ctx)
	if err != nil {
		return nil, err
	}
	volumes := map[string]int64{}
	if du, err := c.API().DiskUsage(ctx, client.DiskUsageOptions{Volumes: true, Verbose: true}); err == nil {
		for _, v := range du.Volumes.Items {
			if v.UsageData != nil {
				volumes[v.Name] = v.UsageData.Size
			}
		}
	}
	out := []Mirror{}
	for _, s := range services {
		if s.Labels[LabelComponent] != ComponentMirror || !slices.Contains(s.Networks, l.Config.Network.Name) {
			continue
		}
		port, _ := strconv.Atoi(s.Labels[LabelMirrorPort])
		m := Mirror{Name: s.Name, Port: port, Upstream: s.Labels[LabelMirrorUpstream], State: s.State, Running: s.Running,
			IP: s.IPs[l.Config.Network.Name], Cache: s.Labels[LabelMirrorCache], CacheBytes: -1}
		if size, ok := volumes[m.Cache]; ok {
			m.CacheBytes = size
		} else if filepath.IsAbs(m.Cache) {
			if size, err := dirSize(m.Cache); err == nil {
				m.CacheBytes = size
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// CleanCache removes mirror name's container and its cache (all mirrors
// when name is ""), and returns the mirrors it cleaned. `marina up`
// recreates them empty.
func (l *Lab) CleanCache(ctx context.Context, name string) ([]string, error) {
	mirrors, err := l.Mirrors(ctx)
	if err != nil {
		return nil, err
	}
	c, err := l.dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var cleaned []string
	var known []string
	for _, m := range mirrors {
		known = append(known, m.Name)
		if name != "" && m.Name != name {
			continue
		}
		if _, err := c.API().ContainerRemove(ctx, m.Name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return cleaned, fmt.Errorf("remove mirror %s: %w", m.Name, err)
		}
		switch {
		case filepath.IsAbs(m.Cache):
			if err := os.RemoveAll(m.Cache); err != nil {
				return cleaned, fmt.Errorf("remove the cache of %s (%s): %w", m.Name, m.Cache, err)
			}
		case m.Cache != "":
			if _, err := c.API().VolumeRemove(ctx, m.Cache, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				return cleaned, fmt.Errorf("remove the cache volume of %s (%s): %w", m.Name, m.Cache, err)
			}
		}
		cleaned = append(cleaned, m.Name)
	}
	if name != "" && len(cleaned) == 0 {
		return nil, fmt.Errorf("no registry mirror named %q on network %s (mirrors: %v); see marina registry list", name, l.Config.Network.Name, known)
	}
	return cleaned, nil
}

// dockerClient connects to the running machine's Docker engine.
func (l *Lab) dockerClient(ctx context.Context) (*docker.Client, error) {
	st, err := l.Machine(ctx)
	if err != nil {
		return nil, err
	}
	if st.State != vm.Running {
		return nil, errors.New("the lab is not running: run marina up")
	}
	return docker.Open(ctx, st.DockerHost)
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total, err
}
