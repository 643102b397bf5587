// Package container makes Docker containers converge to a declared spec over
// the Docker Engine API: the way marina's built-in plugins run their services
// on the lab's bridge (registry mirrors, the local DNS pair), and the way a
// third-party plugin can run its own.
//
// Ensure is idempotent and detects drift: every container it creates carries a
// label with a keyed hash of its whole spec (image, command, environment,
// network and IP, ports, mounts, restart policy and the content of the files
// placed in it). A container whose hash matches is left alone (started if it
// was stopped); one whose hash differs is removed and created again; a
// container of that name that Ensure did not create is never touched.
//
// Files are copied into the container before its first start (Docker's
// archive API), so they live in the container's own layer: they survive VM
// reboots and daemon restarts, need no path on the Docker host, and their
// content never appears in `docker inspect`, in environment variables or in
// logs — the place for configuration that holds credentials.
package container

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/bcollard/marina/sdk"
)

// Labels Ensure puts on every container it creates.
const (
	// LabelSpec holds the keyed hash of the container's spec.
	LabelSpec = "marina.dev/spec"
	// LabelManagedBy marks containers marina created ("marina").
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "marina"
)

// Spec is the wanted state of one container.
type Spec struct {
	// Name is the container's name (required).
	Name string
	// Image is the image reference (required). A missing image is pulled.
	Image string
	// Entrypoint overrides the image's entrypoint when set.
	Entrypoint []string
	// Cmd are the arguments (the image's CMD when empty).
	Cmd []string
	// Env holds KEY=VALUE pairs. They are visible in `docker inspect`: put
	// secrets in Files instead.
	Env []string
	// Labels are extra labels; LabelSpec and LabelManagedBy are added.
	Labels map[string]string
	// Network is the Docker network to attach to ("" = the default bridge).
	Network string
	// IP is a static IPv4 address on Network ("" = one Docker picks).
	IP string
	// Aliases are extra DNS names of the container on Network.
	Aliases []string
	// Ports publish container ports on the Docker host.
	Ports []Port
	// Mounts are bind mounts and named volumes.
	Mounts []Mount
	// Files are placed in the container before it first starts.
	Files []File
	// Restart is the restart policy: "always" (default), "unless-stopped",
	// "on-failure" or "no".
	Restart string
	// User runs the container's process as this user ("uid[:gid]").
	User string
}

// Port publishes ContainerPort on HostIP:HostPort of the Docker host.
type Port struct {
	// HostIP is the address to bind on ("" = all addresses).
	HostIP        string
	HostPort      int
	ContainerPort int
	// Protocol is "tcp" (default) or "udp".
	Protocol string
}

// Mount is a bind mount (Type "bind", Source a path on the Docker host) or a
// named volume (Type "volume", Source the volume name; created when missing).
type Mount struct {
	Type     string
	Source   string
	Target   string
	ReadOnly bool
}

// File is a regular file placed in the container.
type File struct {
	// Path is absolute; missing parent directories are created (0755).
	Path    string
	Content []byte
	// Mode is the permission bits (0 means 0644). Use 0600 for credentials.
	Mode int64
	// UID and GID own the file.
	UID, GID int
}

// Action says what Ensure did.
type Action string

// The actions.
const (
	Created   Action = "created"
	Recreated Action = "recreated"
	Started   Action = "started"
	Unchanged Action = "unchanged"
)

// Outcome is the result of Ensure.
type Outcome struct {
	ID     string
	Action Action
	// Reason says why a container was recreated or started.
	Reason string
	// Spec is the keyed hash of the spec (the container's LabelSpec).
	Spec string
}

// Steady is the container as a PostUp's sdk.Steady names it: marina skips
// the next PostUp while it exists with this ID, runs and has this spec.
func (o Outcome) Steady() sdk.SteadyContainer {
	return sdk.SteadyContainer{ID: o.ID, Spec: o.Spec}
}

// State is what Get and List report about a container.
type State struct {
	ID      string
	Name    string
	Image   string
	Running bool
	// Status is Docker's state: created, running, restarting, exited, ...
	Status string
	Labels map[string]string
	// IPs are the container's IPv4 addresses by network name.
	IPs map[string]string
}

// HostFromEnv returns the Docker endpoint of this process's environment:
// $DOCKER_HOST, or the platform's default socket. For tests and tools;
// a hook uses req.Env.DockerHost.
func HostFromEnv() string {
	if h := os.Getenv(client.EnvOverrideHost); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// Client talks to one Docker engine.
type Client struct {
	api  *client.Client
	host string
	key  []byte
}

// Option configures Connect.
type Option func(*Client)

// WithHashKey keys the spec hash (HMAC-SHA256) with key, so the hash label of
// a container whose files hold credentials reveals nothing about them. Keep
// the key in the plugin's state directory; a new key recreates containers once.
func WithHashKey(key []byte) Option {
	return func(c *Client) { c.key = append([]byte(nil), key...) }
}

// Connect opens a client for the Docker engine at host (in a hook:
// req.Env.DockerHost; e.g. unix:///var/run/docker.sock) and checks that the
// engine answers. An empty host is refused, never read from DOCKER_HOST: in
// a hook it means the plugin does not declare sdk.CapDocker, and marina
// gives the lab's endpoint only to plugins that do. Outside a hook (a test,
// a tool) pass the endpoint, e.g. HostFromEnv().
func Connect(ctx context.Context, host string, opts ...Option) (*Client, error) {
	if host == "" {
		return nil, errors.New("no Docker endpoint: marina gives a plugin the lab's Docker engine (Env.DockerHost) only when it declares the capability " +
			"sdk.CapDocker in Info.Capabilities; add it (users are asked to grant it at install), or, outside a hook, pass an endpoint such as container.HostFromEnv()")
	}
	copts := []client.Opt{client.WithHost(host)}
	api, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %q: %w", host, err)
	}
	c := &Client{api: api, host: host}
	for _, o := range opts {
		o(c)
	}
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = api.Close()
		return nil, fmt.Errorf("the Docker engine at %s does not answer: %w (is `marina up` done and the VM running?)", host, err)
	}
	return c, nil
}

// API returns the underlying Docker Engine API client.
func (c *Client) API() *client.Client { return c.api }

// LastLogLines returns the last n lines container name wrote to stdout
// and stderr (in order of arrival within each stream), for saying why a
// service stopped.
func (c *Client) LastLogLines(ctx context.Context, name string, n int) ([]string, error) {
	rc, err := c.api.ContainerLogs(ctx, name, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n)})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, io.LimitReader(rc, 1<<20)); err != nil {
		return nil, err
	}
	var lines []string
	for _, b := range []*bytes.Buffer{&out, &errb} {
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	return lines, nil
}

// Close releases the client.
func (c *Client) Close() error { return c.api.Close() }

// Hash returns the keyed hash of spec that Ensure stores in LabelSpec.
func (c *Client) Hash(spec Spec) string { return hashSpec(spec, c.key) }

// hashSpec hashes every field of spec that shapes the container, in a
// canonical order.
func hashSpec(spec Spec, key []byte) string {
	s := normalize(spec)
	// Files are hashed by content, not stored in the label.
	type fileSum struct {
		Path     string
		Sum      string
		Mode     int64
		UID, GID int
	}
	files := make([]fileSum, 0, len(s.Files))
	for _, f := range s.Files {
		sum := sha256.Sum256(f.Content)
		files = append(files, fileSum{f.Path, hex.EncodeToString(sum[:]), f.Mode, f.UID, f.GID})
	}
	canon := struct {
		Spec
		Files []fileSum
	}{s, files}
	canon.Spec.Files = nil
	b, err := json.Marshal(canon)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	if len(key) == 0 {
		sum := sha256.Sum256(b)
		return "sha256-" + hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return "hmac-sha256-" + hex.EncodeToString(m.Sum(nil))
}

// normalize fills defaults and sorts what has no meaningful order, so equal
// specs hash equally.
func normalize(s Spec) Spec {
	if s.Restart == "" {
		s.Restart = string(container.RestartPolicyAlways)
	}
	ports := append([]Port(nil), s.Ports...)
	for i := range ports {
		if ports[i].Protocol == "" {
			ports[i].Protocol = "tcp"
		}
	}
	sort.Slice(ports, func(i, j int) bool {
		a, b := ports[i], ports[j]
		return fmt.Sprint(a.ContainerPort, a.Protocol, a.HostIP, a.HostPort) < fmt.Sprint(b.ContainerPort, b.Protocol, b.HostIP, b.HostPort)
	})
	s.Ports = ports
	files := append([]File(nil), s.Files...)
	for i := range files {
		if files[i].Mode == 0 {
			files[i].Mode = 0o644
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	s.Files = files
	aliases := append([]string(nil), s.Aliases...)
	sort.Strings(aliases)
	s.Aliases = aliases
	return s
}

// Validate reports the first problem with spec, naming the field.
func (s Spec) Validate() error {
	if s.Name == "" {
		return errors.New("container spec: Name is empty")
	}
	if s.Image == "" {
		return fmt.Errorf("container %s: Image is empty", s.Name)
	}
	if s.IP != "" {
		a, err := netip.ParseAddr(s.IP)
		if err != nil || !a.Is4() {
			return fmt.Errorf("container %s: IP %q is not an IPv4 address", s.Name, s.IP)
		}
		if s.Network == "" {
			return fmt.Errorf("container %s: IP %s needs a Network (static addresses only work on user-defined networks)", s.Name, s.IP)
		}
	}
	switch s.Restart {
	case "", "always", "unless-stopped", "on-failure", "no":
	default:
		return fmt.Errorf("container %s: Restart %q is not one of always, unless-stopped, on-failure, no", s.Name, s.Restart)
	}
	for i, p := range s.Ports {
		if p.ContainerPort < 1 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
			return fmt.Errorf("container %s: Ports[%d] %d:%d is out of range 1-65535", s.Name, i, p.HostPort, p.ContainerPort)
		}
		if p.Protocol != "" && p.Protocol != "tcp" && p.Protocol != "udp" {
			return fmt.Errorf("container %s: Ports[%d].Protocol %q is not tcp or udp", s.Name, i, p.Protocol)
		}
		if p.HostIP != "" {
			if _, err := netip.ParseAddr(p.HostIP); err != nil {
				return fmt.Errorf("container %s: Ports[%d].HostIP %q is not an IP address", s.Name, i, p.HostIP)
			}
		}
	}
	for i, m := range s.Mounts {
		if m.Type != "bind" && m.Type != "volume" {
			return fmt.Errorf("container %s: Mounts[%d].Type %q is not bind or volume", s.Name, i, m.Type)
		}
		if m.Source == "" || !path.IsAbs(m.Target) {
			return fmt.Errorf("container %s: Mounts[%d] needs a Source and an absolute Target", s.Name, i)
		}
	}
	for i, f := range s.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return fmt.Errorf("container %s: Files[%d].Path %q must be a clean absolute file path", s.Name, i, f.Path)
		}
	}
	return nil
}

// Ensure makes the container named spec.Name match spec: it creates it when
// missing, recreates it when its spec changed (or when it was not created by
// Ensure with the same hash), starts it when stopped, and otherwise leaves
// it alone. A container of that name without marina's labels is refused, not
// replaced.
func (c *Client) Ensure(ctx context.Context, spec Spec) (Outcome, error) {
	if err := spec.Validate(); err != nil {
		return Outcome{}, err
	}
	want := c.Hash(spec)
	cur, err := c.api.ContainerInspect(ctx, spec.Name, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		id, err := c.create(ctx, spec, want)
		return Outcome{ID: id, Action: Created, Spec: want}, err
	case err != nil:
		return Outcome{}, fmt.Errorf("inspect container %s: %w", spec.Name, err)
	}
	ct := cur.Container
	labels := map[string]string{}
	if ct.Config != nil {
		labels = ct.Config.Labels
	}
	if labels[LabelManagedBy] != ManagedBy || labels[LabelSpec] == "" {
		return Outcome{}, fmt.Errorf("a container named %s exists but was not created by marina; remove or rename it (docker rm -f %s) and run again", spec.Name, spec.Name)
	}
	if reason := drift(ct, spec, labels[LabelSpec], want); reason != "" {
		// Get the new image first: a failed pull leaves the old container
		// serving.
		if err := c.ensureImage(ctx, spec.Image); err != nil {
			return Outcome{}, err
		}
		if err := c.remove(ctx, ct.ID); err != nil {
			return Outcome{}, fmt.Errorf("recreate container %s (%s): %w", spec.Name, reason, err)
		}
		id, err := c.create(ctx, spec, want)
		return Outcome{ID: id, Action: Recreated, Reason: reason, Spec: want}, err
	}
	if ct.State != nil && (ct.State.Running || ct.State.Restarting) {
		return Outcome{ID: ct.ID, Action: Unchanged, Spec: want}, nil
	}
	status := "not running"
	if ct.State != nil {
		status = string(ct.State.Status)
	}
	if _, err := c.api.ContainerStart(ctx, ct.ID, client.ContainerStartOptions{}); err != nil {
		return Outcome{}, fmt.Errorf("start container %s: %w", spec.Name, err)
	}
	return Outcome{ID: ct.ID, Action: Started, Reason: "it was " + status, Spec: want}, nil
}

// drift says why the existing container ct does not match spec ("" if it does).
func drift(ct container.InspectResponse, spec Spec, have, want string) string {
	if ct.Config != nil && ct.Config.Image != spec.Image {
		return fmt.Sprintf("image %s -> %s", ct.Config.Image, spec.Image)
	}
	if have != want {
		return "its configuration changed"
	}
	if spec.Network != "" {
		var ep *network.EndpointSettings
		if ct.NetworkSettings != nil {
			ep = ct.NetworkSettings.Networks[spec.Network]
		}
		if ep == nil {
			return "it is not attached to network " + spec.Network
		}
		if spec.IP != "" && ct.State != nil && ct.State.Running && ep.IPAddress.String() != spec.IP {
			return fmt.Sprintf("its address on %s is %s, not %s", spec.Network, ep.IPAddress, spec.IP)
		}
	}
	return ""
}

// create pulls the image if needed, creates the container, copies its files
// and starts it. A container that fails to start is removed again.
func (c *Client) create(ctx context.Context, spec Spec, hash string) (string, error) {
	if err := c.ensureImage(ctx, spec.Image); err != nil {
		return "", err
	}
	s := normalize(spec)
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = ManagedBy
	labels[LabelSpec] = hash

	cfg := &container.Config{
		Image:      s.Image,
		Cmd:        s.Cmd,
		Entrypoint: s.Entrypoint,
		Env:        s.Env,
		Labels:     labels,
		User:       s.User,
	}
	hc := &container.HostConfig{
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyMode(s.Restart)},
	}
	if len(s.Ports) > 0 {
		cfg.ExposedPorts = network.PortSet{}
		hc.PortBindings = network.PortMap{}
		for _, p := range s.Ports {
			port, err := network.ParsePort(strconv.Itoa(p.ContainerPort) + "/" + p.Protocol)
			if err != nil {
				return "", fmt.Errorf("container %s: port %d/%s: %w", s.Name, p.ContainerPort, p.Protocol, err)
			}
			cfg.ExposedPorts[port] = struct{}{}
			b := network.PortBinding{HostPort: strconv.Itoa(p.HostPort)}
			if p.HostIP != "" {
				b.HostIP = netip.MustParseAddr(p.HostIP)
			}
			hc.PortBindings[port] = append(hc.PortBindings[port], b)
		}
	}
	for _, m := range s.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.Type(m.Type), Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	var nc *network.NetworkingConfig
	if s.Network != "" {
		hc.NetworkMode = container.NetworkMode(s.Network)
		ep := &network.EndpointSettings{Aliases: s.Aliases}
		if s.IP != "" {
			ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: netip.MustParseAddr(s.IP)}
		}
		nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{s.Network: ep}}
	}
	res, err := c.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: s.Name, Config: cfg, HostConfig: hc, NetworkingConfig: nc})
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", s.Name, err)
	}
	cleanup := func(cause error) (string, error) {
		// Nothing half-made is left behind; use a fresh context so Ctrl-C
		// does not stop the cleanup.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := c.remove(cctx, res.ID); rerr != nil {
			return "", errors.Join(cause, fmt.Errorf("remove half-created container %s: %w", s.Name, rerr))
		}
		return "", cause
	}
	if len(s.Files) > 0 {
		archive, err := tarFiles(s.Files)
		if err != nil {
			return cleanup(fmt.Errorf("container %s: %w", s.Name, err))
		}
		if _, err := c.api.CopyToContainer(ctx, res.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(archive), CopyUIDGID: true}); err != nil {
			return cleanup(fmt.Errorf("copy files into container %s: %w", s.Name, err))
		}
	}
	if _, err := c.api.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return cleanup(fmt.Errorf("start container %s: %w", s.Name, err))
	}
	return res.ID, nil
}

// tarFiles builds a tar archive of files (paths relative to /), with their
// parent directories.
func tarFiles(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.Path); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: mode, Size: int64(len(f.Content)), Uid: f.UID, Gid: f.GID}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ensureImage pulls ref when the engine does not have it.
func (c *Client) ensureImage(ctx context.Context, ref string) error {
	if _, err := c.api.ImageInspect(ctx, ref); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", ref, err)
	}
	resp, err := c.api.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(ctx)
		_ = resp.Close()
	}
	if err != nil {
		return fmt.Errorf("pull image %s: %w (the VM needs to reach its registry, or override the image in the config's images section)", ref, err)
	}
	return nil
}

// remove force-removes the container with id (anonymous volumes too; named
// volumes are kept).
func (c *Client) remove(ctx context.Context, id string) error {
	_, err := c.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// Remove force-removes the marina-managed container name. It reports whether
// there was one; a container of that name that marina did not create is
// refused.
func (c *Client) Remove(ctx context.Context, name string) (bool, error) {
	st, err := c.Get(ctx, name)
	if err != nil || st == nil {
		return false, err
	}
	if st.Labels[LabelManagedBy] != ManagedBy {
		return false, fmt.Errorf("container %s was not created by marina; not removing it", name)
	}
	if err := c.remove(ctx, st.ID); err != nil {
		return false, fmt.Errorf("remove container %s: %w", name, err)
	}
	return true, nil
}

// Get returns the state of the container name, or nil when there is none.
func (c *Client) Get(ctx context.Context, name string) (*State, error) {
	res, err := c.api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	ct := res.Container
	st := &State{ID: ct.ID, Name: strings.TrimPrefix(ct.Name, "/"), IPs: map[string]string{}}
	if ct.Config != nil {
		st.Image, st.Labels = ct.Config.Image, ct.Config.Labels
	}
	if ct.State != nil {
		st.Running, st.Status = ct.State.Running, string(ct.State.Status)
	}
	if ct.NetworkSettings != nil {
		for n, ep := range ct.NetworkSettings.Networks {
			if ep != nil && ep.IPAddress.IsValid() {
				st.IPs[n] = ep.IPAddress.String()
			}
		}
	}
	return st, nil
}

// ReadFile reads the regular file at path in container ref (a name or an
// id; running or not, bind mounts included) through the Docker API's
// archive endpoint: its content, permission bits and owner. found is false
// when the container has no such path. A path that is not a regular file,
// or a file larger than max bytes, is an error.
func (c *Client) ReadFile(ctx context.Context, ref, path string, max int64) (f File, found bool, err error) {
	res, err := c.api.CopyFromContainer(ctx, ref, client.CopyFromContainerOptions{SourcePath: path})
	if cerrdefs.IsNotFound(err) {
		return File{}, false, nil
	}
	if err != nil {
		return File{}, false, fmt.Errorf("read %s in container %.12s: %w", path, ref, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err != nil {
		return File{}, false, fmt.Errorf("read %s in container %.12s: %w", path, ref, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return File{}, false, fmt.Errorf("%s in container %.12s is not a regular file", path, ref)
	}
	if hdr.Size > max {
		return File{}, false, fmt.Errorf("%s in container %.12s has %d bytes, more than the %d read", path, ref, hdr.Size, max)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return File{}, false, fmt.Errorf("read %s in container %.12s: %w", path, ref, err)
	}
	return File{Path: path, Content: b, Mode: hdr.Mode & 0o777, UID: hdr.Uid, GID: hdr.Gid}, true, nil
}

// List returns the containers (running or not) that carry every label in
// labels, sorted by name.
func (c *Client) List(ctx context.Context, labels map[string]string) ([]State, error) {
	f := client.Filters{}
	for k, v := range labels {
		f = f.Add("label", k+"="+v)
	}
	res, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []State
	for _, s := range res.Items {
		name := ""
		if len(s.Names) > 0 {
			name = strings.TrimPrefix(s.Names[0], "/")
		}
		st := State{ID: s.ID, Name: name, Image: s.Image, Running: s.State == container.StateRunning, Status: string(s.State), Labels: s.Labels, IPs: map[string]string{}}
		if s.NetworkSettings != nil {
			for n, ep := range s.NetworkSettings.Networks {
				if ep != nil && ep.IPAddress.IsValid() {
					st.IPs[n] = ep.IPAddress.String()
				}
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveVolume removes the named volume; a missing volume is not an error.
func (c *Client) RemoveVolume(ctx context.Context, name string) error {
	_, err := c.api.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}
