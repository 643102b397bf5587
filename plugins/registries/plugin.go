// Package registries is marina's built-in registry-mirrors plugin: one
// pull-through cache (distribution's registry) per upstream registry, each a
// container on the lab's kind network, and the containerd host files that
// make every cluster node pull through them.
//
//   - PostUp converges the mirror containers to the configured list
//     (sdk.Env.Mirrors): missing ones are created, ones whose config changed
//     (port, upstream, credentials, image, cache, published address) are
//     recreated, unchanged ones are left alone, and mirrors marina created
//     earlier but no longer configured are removed (their cache is kept).
//   - PreCluster declares, for the cluster's mirrors, one
//     /etc/containerd/certs.d/<host>/hosts.toml per mirrored registry and
//     the containerd patch pointing the CRI image service at that directory.
//   - PreDestroy removes the mirror containers; caches are kept.
//
// Credentials live only in the registry config file copied into each
// container (mode 0600); they are never logged, never put in labels,
// environment variables or host files. See README.md.
package registries

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
)

// Version is the plugin's version.
const Version = "0.1.0"

// DefaultImage is the registry image when the config's images.registry is
// not set: distribution's registry, pinned by tag.
const DefaultImage = "docker.io/library/registry:3.0.0"

// Labels on every mirror container: the contract `marina registry list` and
// `marina registry clean-cache` read.
const (
	// LabelComponent is ComponentMirror on every mirror.
	LabelComponent = "marina.dev/component"
	// ComponentMirror is the value of LabelComponent.
	ComponentMirror = "registry-mirror"
	// LabelMirror is the mirror's name (also the container's name).
	LabelMirror = "marina.dev/mirror"
	// LabelUpstream is the upstream registry URL.
	LabelUpstream = "marina.dev/upstream"
	// LabelPort is the port the mirror listens on.
	LabelPort = "marina.dev/port"
	// LabelCache is the cache: a directory on the Docker host (cache storage
	// "host") or a Docker volume name (cache storage "guest").
	LabelCache = "marina.dev/cache"
	// LabelNetwork is the Docker network the mirror serves; PostUp and
	// PreDestroy only touch mirrors of their own network.
	LabelNetwork = "marina.dev/network"
)

// VolumePrefix prefixes the name of a mirror's cache volume (cache storage
// "guest"): VolumePrefix + mirror name.
const VolumePrefix = "marina-registry-cache-"

// Plugin is the registries plugin.
type Plugin struct{}

// New returns the registries plugin.
func New() sdk.Plugin { return &Plugin{} }

// Info describes the plugin.
func (*Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         "registries",
		Version:      Version,
		Description:  "Pull-through registry mirrors on the kind network; cluster nodes pull through them and fall back to the upstream. Gives nodes and workloads the company CAs.",
		Maintainer:   "marina",
		Capabilities: []string{sdk.CapDocker, sdk.CapRegistryCredentials, sdk.CapKubeconfig},
		Timeouts: map[sdk.Hook]time.Duration{
			// The first run may pull the registry image into the VM.
			sdk.PostUp:      10 * time.Minute,
			sdk.PreCluster:  30 * time.Second,
			sdk.PostCluster: time.Minute,
			sdk.PreDestroy:  2 * time.Minute,
		},
		Config: defaultConfig(),
	}
}

// PostUp makes the mirror containers match the configured mirrors.
func (*Plugin) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	ms, err := checkMirrors(req.Env.Mirrors)
	if err != nil {
		return nil, err
	}
	if req.Env.NetworkName == "" {
		return nil, errors.New("Env.NetworkName is empty: the mirrors need the lab's Docker network (run marina up)")
	}
	// Every spec is built before Docker is touched: a bad setting changes nothing.
	image := mirrorImage(req.Env)
	specs := make([]container.Spec, len(ms))
	wanted := map[string]bool{}
	for i, m := range ms {
		if specs[i], err = mirrorSpec(req.Env, cfg, image, m); err != nil {
			return nil, err
		}
		wanted[m.Name] = true
	}
	key, err := hashKey(req.Env.StateDir)
	if err != nil {
		return nil, err
	}
	c, err := container.Connect(ctx, req.Env.DockerHost, container.WithHashKey(key))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	log := req.Logger()

	// While every mirror runs unchanged, the next up need not start this
	// plugin (stale mirrors only appear when the configured list changes,
	// and then the hook runs).
	res := &sdk.Result{Steady: &sdk.Steady{}}
	unsteady := false // a mirror that does not stay up: the next up runs this hook again
	for i, m := range ms {
		prepareCache(req.Env, m, log.Debug)
		out, err := c.Ensure(ctx, specs[i])
		if err != nil {
			return nil, fmt.Errorf("mirror %s: %w%s", m.Name, err, cacheHint(req.Env, m, err))
		}
		res.Steady.Containers = append(res.Steady.Containers, out.Steady())
		// A mirror just (re)started gets a moment to fail; one left as it
		// was gets one look (Docker counts a crash loop as running).
		settle := time.Duration(0)
		if out.Action == container.Created || out.Action == container.Recreated || out.Action == container.Started {
			settle = time.Second
		}
		warn, err := checkStaysUp(ctx, c, m.Name, settle)
		if err != nil {
			return nil, err
		}
		if warn != "" {
			req.Progress("%s", warn)
			log.Warn("mirror not running after start", "mirror", m.Name)
			res.Warnings = append(res.Warnings, sdk.Diagnostic{Severity: sdk.SeverityWarning, Summary: warn})
			unsteady = true
		}
		line := fmt.Sprintf("mirror %s -> %s: %s", m.Name, m.upstream, out.Action)
		if out.Reason != "" {
			line += " (" + out.Reason + ")"
		}
		req.Progress("%s", line)
		log.Log(ctx, logLevel(out.Action), "mirror converged", "mirror", m.Name, "upstream", m.upstream.String(), "port", m.Port,
			"action", string(out.Action), "reason", out.Reason, "container", shortID(out.ID), "cache", cacheName(req.Env, m))
	}

	stale, err := c.List(ctx, map[string]string{LabelComponent: ComponentMirror, LabelNetwork: req.Env.NetworkName})
	if err != nil {
		return nil, err
	}
	for _, st := range stale {
		if wanted[st.Name] {
			continue
		}
		if _, err := c.Remove(ctx, st.Name); err != nil {
			return nil, fmt.Errorf("remove mirror %s, which is no longer configured: %w", st.Name, err)
		}
		msg := fmt.Sprintf("removed mirror %s (no longer in registries.mirrors); its cache %s is kept (marina registry clean-cache removes it)", st.Name, st.Labels[LabelCache])
		req.Progress("%s", msg)
		log.Info("stale mirror removed", "mirror", st.Name, "cache", st.Labels[LabelCache])
		res.Warnings = append(res.Warnings, sdk.Diagnostic{Severity: sdk.SeverityWarning, Summary: msg})
		unsteady = true // said once: a replayed result would say it on every up
	}
	// Clusters whose nodes do not trust what trust.extraCAs lists now
	// (it changed since they were created): said on every up until fixed.
	cas, err := checkNodeCAs(ctx, c, req.Env.NetworkName, req.Env.ExtraCAs)
	if err != nil {
		return nil, err
	}
	for _, w := range cas.warnings() {
		req.Progress("%s", w.Summary)
		res.Warnings = append(res.Warnings, w)
		unsteady = true
	}
	if unsteady {
		res.Steady = nil // never skip the hook while a mirror does not stay up or a cluster lacks the CAs
	}
	return res, nil
}

// PreCluster declares the containerd host files for the cluster's mirrors.
func (*Plugin) PreCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	ms, err := checkMirrors(req.Env.Mirrors)
	if err != nil {
		return nil, err
	}
	var names []string
	if req.Cluster != nil {
		names = req.Cluster.Mirrors
	}
	sel, err := selectMirrors(ms, names)
	if err != nil {
		return nil, err
	}
	kc, err := kindContribution(sel)
	if err != nil {
		return nil, err
	}
	if req.Env.ExtraCAs != "" {
		// containerd pulls through a TLS-intercepting proxy too: the
		// company's CAs beside the node image's roots, in every node
		// before containerd starts.
		if kc == nil {
			kc = &sdk.KindContribution{}
		}
		kc.NodeFiles = append(kc.NodeFiles, nodeExtraCAs(req.Env.ExtraCAs)...)
	}
	var hosts []string
	for _, m := range sel {
		hosts = append(hosts, m.host+" via "+m.Name)
	}
	if len(hosts) > 0 {
		req.Progress("nodes pull %s", strings.Join(hosts, ", "))
	}
	return &sdk.Result{Kind: kc}, nil
}

// PreDestroy removes the mirror containers of the lab's network. Caches are
// kept: a host cache survives destroy by design; a guest cache volume goes
// with the VM.
func (*Plugin) PreDestroy(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	if req.Env.NetworkName == "" {
		return nil, errors.New("Env.NetworkName is empty: cannot tell which mirrors belong to this lab")
	}
	// No hash key: listing and removing does not hash specs.
	c, err := container.Connect(ctx, req.Env.DockerHost)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sts, err := c.List(ctx, map[string]string{LabelComponent: ComponentMirror, LabelNetwork: req.Env.NetworkName})
	if err != nil {
		return nil, err
	}
	for _, st := range sts {
		if _, err := c.Remove(ctx, st.Name); err != nil {
			return nil, fmt.Errorf("remove mirror %s: %w", st.Name, err)
		}
		req.Progress("removed mirror %s (cache %s kept)", st.Name, st.Labels[LabelCache])
		req.Logger().Info("mirror removed", "mirror", st.Name, "cache", st.Labels[LabelCache])
	}
	return &sdk.Result{}, nil
}

// selectMirrors returns the mirrors named by names, in configured order;
// no names means every mirror.
func selectMirrors(ms []mirror, names []string) ([]mirror, error) {
	if len(names) == 0 {
		return ms, nil
	}
	byName := map[string]bool{}
	for _, n := range names {
		byName[n] = true
	}
	var sel []mirror
	var all []string
	for _, m := range ms {
		all = append(all, m.Name)
		if byName[m.Name] {
			sel = append(sel, m)
			delete(byName, m.Name)
		}
	}
	if len(byName) > 0 {
		var unknown []string
		for _, n := range names {
			if byName[n] && !slices.Contains(unknown, n) {
				unknown = append(unknown, n)
			}
		}
		known := "none are configured"
		if len(all) > 0 {
			known = "configured: " + strings.Join(all, ", ")
		}
		return nil, fmt.Errorf("cluster mirrors %s: no such mirror in registries.mirrors (%s)", strings.Join(unknown, ", "), known)
	}
	return sel, nil
}

// mirrorImage is the registry image: the config's images.registry, else DefaultImage.
func mirrorImage(env sdk.Env) string {
	if img := env.Images["registry"]; img != "" {
		return img
	}
	return DefaultImage
}

// cacheName is where m's cache lives: a directory on the Docker host or a
// volume name.
func cacheName(env sdk.Env, m mirror) string {
	if env.RegistryCacheStorage == "host" {
		return filepath.Join(env.RegistryCacheDir, m.Name)
	}
	return VolumePrefix + m.Name
}

// cacheMount is m's cache mount at dataDir.
func cacheMount(env sdk.Env, m mirror) (container.Mount, error) {
	switch env.RegistryCacheStorage {
	case "host":
		if !filepath.IsAbs(env.RegistryCacheDir) {
			return container.Mount{}, fmt.Errorf("registries.cacheDir %q must be an absolute path shared with the VM at the same path (cache storage host)", env.RegistryCacheDir)
		}
		return container.Mount{Type: "bind", Source: cacheName(env, m), Target: dataDir}, nil
	case "guest", "":
		return container.Mount{Type: "volume", Source: cacheName(env, m), Target: dataDir}, nil
	}
	return container.Mount{}, fmt.Errorf("registries.cacheStorage %q is not host or guest", env.RegistryCacheStorage)
}

// extraCAsPath is where a mirror and a node keep the company's CAs
// (Env.ExtraCAs).
const extraCAsPath = "/etc/marina/ca/extra-cas.pem"

// containerdCADropIn makes a node's containerd read extraCAsPath's
// directory beside the image's roots (Go reads every SSL_CERT_DIR entry).
const containerdCADropIn = "/etc/systemd/system/containerd.service.d/marina-ca.conf"

// nodeExtraCAs are the node files that make a node's containerd trust the
// company's CAs pem.
func nodeExtraCAs(pem string) []sdk.NodeFile {
	return []sdk.NodeFile{
		{Path: extraCAsPath, Content: []byte(pem), Mode: 0o644},
		{Path: containerdCADropIn, Content: []byte("# managed by marina (trust.extraCAs)\n[Service]\nEnvironment=SSL_CERT_DIR=/etc/ssl/certs:" + path.Dir(extraCAsPath) + "\n"), Mode: 0o644},
	}
}

// mirrorSpec is the container spec of mirror m.
func mirrorSpec(env sdk.Env, cfg Config, image string, m mirror) (container.Spec, error) {
	conf, err := renderRegistryConfig(m, cfg.LogLevel)
	if err != nil {
		return container.Spec{}, err
	}
	mnt, err := cacheMount(env, m)
	if err != nil {
		return container.Spec{}, err
	}
	spec := container.Spec{
		Name:  m.Name,
		Image: image,
		// "serve <config>" works with distribution's own image (entrypoint
		// registry) and with the Docker library image (an entrypoint
		// script that prefixes `registry`).
		Cmd: []string{"serve", configPath},
		Labels: map[string]string{
			LabelComponent: ComponentMirror,
			LabelMirror:    m.Name,
			LabelUpstream:  m.upstream.String(),
			LabelPort:      strconv.Itoa(m.Port),
			LabelCache:     cacheName(env, m),
			LabelNetwork:   env.NetworkName,
		},
		Network: env.NetworkName,
		Mounts:  []container.Mount{mnt},
		Files:   []container.File{{Path: configPath, Content: conf, Mode: 0o600}},
		Restart: "always",
		// The upstream is reached through the lab's proxy, if any (the
		// registry reads the standard variables); a changed proxy
		// changes the spec, so the next up recreates the mirror.
		Env: env.Proxy.Env(),
	}
	if env.ExtraCAs != "" {
		// The company's CAs beside the image's roots (Go reads every
		// directory of SSL_CERT_DIR): an upstream behind a
		// TLS-intercepting proxy verifies.
		spec.Files = append(spec.Files, container.File{Path: extraCAsPath, Content: []byte(env.ExtraCAs), Mode: 0o644})
		spec.Env = append(spec.Env, "SSL_CERT_DIR=/etc/ssl/certs:"+path.Dir(extraCAsPath))
	}
	if cfg.PublishAddress != "" {
		spec.Ports = []container.Port{{HostIP: cfg.PublishAddress, HostPort: m.Port, ContainerPort: m.Port}}
	}
	return spec, nil
}

// checkStaysUp looks for settle (at least once) and returns a warning when
// the registry exited or restarts: the restart policy would otherwise hide a
// crash loop. It is a warning, not an error, because the common cause is
// transient: distribution's registry contacts its upstream when it starts
// and exits when it cannot reach it; Docker restarts it until it can.
func checkStaysUp(ctx context.Context, c *container.Client, name string, settle time.Duration) (string, error) {
	const step = 250 * time.Millisecond
	deadline := time.Now().Add(settle)
	for {
		st, err := c.Get(ctx, name)
		if err != nil {
			return "", err
		}
		if st == nil || !st.Running || st.Status == "restarting" {
			status := "gone"
			if st != nil {
				status = st.Status
			}
			return fmt.Sprintf("mirror %s is %s right after it started: %s", name, status, whyDown(ctx, c, name)), nil
		}
		if time.Now().After(deadline) {
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(step):
		}
	}
}

// whyDown says why a mirror stopped, from its last log lines: a
// certificate its upstream presented that it does not trust is named with
// the fix (a TLS-intercepting proxy's CA belongs in trust.extraCAs).
func whyDown(ctx context.Context, c *container.Client, name string) string {
	generic := "its upstream may be unreachable (the registry checks it at startup; Docker restarts it until it answers) or its config was rejected; see `docker logs " + name + "` in the VM"
	lines, err := c.LastLogLines(ctx, name, 30)
	if err != nil {
		return generic
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if j := strings.Index(lines[i], "x509: "); j >= 0 {
			cause := lines[i][j:]
			if k := strings.IndexAny(cause, "\"\n"); k >= 0 {
				cause = cause[:k]
			}
			return "its upstream's TLS certificate is not trusted (" + cause + "); behind a TLS-intercepting proxy, add the proxy's CA to trust.extraCAs in the config, then marina up"
		}
	}
	return generic
}

func shortID(id string) string { return id[:min(12, len(id))] }

// logLevel logs what changed at Info and what was already in place at
// Debug, so a no-op `marina up` stays quiet.
func logLevel(a container.Action) slog.Level {
	if a == container.Unchanged {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
