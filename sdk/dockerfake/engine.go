package dockerfake

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// DefaultAPIVersion is the Engine API version the fake reports unless
// WithAPIVersion says otherwise: that of Debian 12's docker.io (20.10),
// the engine in marina's VM.
const DefaultAPIVersion = "1.41"

// minAPIVersion is the oldest API version the fake accepts in a path, as
// Docker 20.10 does.
const minAPIVersion = "1.12"

// The lab network Start creates, as `marina up` does and as
// plugintest.DefaultEnv describes it (NetworkName, BridgeCIDR).
const (
	LabNetwork = "kind"
	LabSubnet  = "172.30.0.0/16"
)

// maxSocketPath bounds the unix socket's path: macOS allows 104 bytes
// (Linux 108), the terminating NUL included.
const maxSocketPath = 100

// Engine is an in-memory fake Docker engine serving the Engine API on a unix
// socket. Its methods are safe to call while a hook under test talks to it.
type Engine struct {
	t    testing.TB
	host string
	api  string

	mu         sync.Mutex
	closed     bool
	containers map[string]*ctr   // by id
	networks   map[string]*netw  // by id
	images     map[string]*image // by id
	volumes    map[string]*volume
	failPull   map[string]string // canonical ref -> message
	requests   []Request
	seq        int // source of pids, host ports and names
}

// Option configures Start.
type Option func(*Engine)

// WithAPIVersion makes the fake report (and accept up to) Engine API version
// v, e.g. "1.47" for a Docker 27 engine. The default is DefaultAPIVersion.
func WithAPIVersion(v string) Option {
	return func(e *Engine) { e.api = v }
}

// WithImages makes images present from the start, as AddImage does.
func WithImages(refs ...string) Option {
	return func(e *Engine) {
		for _, r := range refs {
			e.addImage(r)
		}
	}
}

// Start serves a new fake engine on a unix socket in t.TempDir() (or, when
// that path is too long for a socket, as on macOS, in a short temporary
// directory of its own) and stops it when the test ends. It has the
// networks every engine has (bridge 172.17.0.0/16, host, none) and the
// lab's bridge LabNetwork (LabSubnet), and no image, container or volume.
func Start(t testing.TB, opts ...Option) *Engine {
	t.Helper()
	e := &Engine{
		t:          t,
		api:        DefaultAPIVersion,
		containers: map[string]*ctr{},
		networks:   map[string]*netw{},
		images:     map[string]*image{},
		volumes:    map[string]*volume{},
		failPull:   map[string]string{},
	}
	now := time.Now().UTC()
	for _, n := range []*netw{
		{name: "bridge", driver: "bridge", subnet: netip.MustParsePrefix("172.17.0.0/16"), gateway: netip.MustParseAddr("172.17.0.1"), predefined: true},
		{name: "host", driver: "host", predefined: true},
		{name: "none", driver: "null", predefined: true},
		{name: LabNetwork, driver: "bridge", subnet: netip.MustParsePrefix(LabSubnet), gateway: netip.MustParseAddr("172.30.0.1")},
	} {
		n.id, n.created = randomID(), now
		e.networks[n.id] = n
	}
	for _, o := range opts {
		o(e)
	}
	if _, err := parseVersion(e.api); err != nil {
		t.Fatalf("dockerfake: WithAPIVersion(%q): %v", e.api, err)
	}

	sock := filepath.Join(t.TempDir(), "docker.sock")
	// t.TempDir's path holds the test's name: often too long for a socket
	// on macOS, whose $TMPDIR is long already.
	for _, parent := range []string{"", "/tmp"} {
		if len(sock) <= maxSocketPath {
			break
		}
		d, err := os.MkdirTemp(parent, "df")
		if err != nil {
			t.Fatalf("dockerfake: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		sock = filepath.Join(d, "docker.sock")
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("dockerfake: listen on %s: %v", sock, err)
	}
	e.host = "unix://" + sock
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("dockerfake: serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		<-done
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
	})
	return e
}

// Host returns the engine's endpoint, "unix:///…/docker.sock": give it to
// the hook under test as sdk.Env.DockerHost, or to container.Connect.
func (e *Engine) Host() string { return e.host }

// APIVersion returns the Engine API version the fake reports.
func (e *Engine) APIVersion() string { return e.api }

// AddImage makes the image ref present, as if pulled or built before the
// test ("alpine" and "docker.io/library/alpine:latest" are one image).
func (e *Engine) AddImage(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addImage(ref)
}

// FailPull makes every pull of ref fail with message (the engine answers 500
// with it, as it does when the registry cannot be reached). A ref neither
// added nor failed is pulled successfully.
func (e *Engine) FailPull(ref, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failPull[canonicalRef(ref)] = message
}

// AddNetwork creates a bridge network name with the IPv4 subnet (e.g.
// "172.31.0.0/16"; its first address is the gateway), as `docker network
// create --subnet` does, and returns its id. It fails the test if the name is
// taken (LabNetwork exists from the start) or the subnet is invalid or
// overlaps another network's.
func (e *Engine) AddNetwork(name, subnet string) string {
	e.t.Helper()
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() || p.Masked() != p {
		e.t.Fatalf("dockerfake: AddNetwork(%q, %q): the subnet is not an IPv4 network like 172.31.0.0/16", name, subnet)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n, apiErr := e.createNetwork(name, "bridge", p, netip.Addr{}, netip.Prefix{}, nil, false)
	if apiErr != nil {
		e.t.Fatalf("dockerfake: AddNetwork(%q, %q): %s", name, subnet, apiErr.msg)
	}
	return n.id
}

// Container is a snapshot of a container of the fake engine.
type Container struct {
	ID    string
	Name  string
	Image string // as the client gave it
	// Entrypoint and Cmd as created (the image's are unknown to the fake).
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	Labels     map[string]string
	// Restart is the restart policy: "no", "always", "unless-stopped" or
	// "on-failure".
	Restart string
	Ports   []Port
	Mounts  []Mount
	// Networks are the container's endpoints by network name.
	Networks map[string]Endpoint
	// State is "created", "running" or "exited".
	State        string
	ExitCode     int
	RestartCount int
	// Files are the regular files copied into the container through the
	// archive API, by absolute path.
	Files map[string]File
}

// Running reports whether the container runs.
func (c Container) Running() bool { return c.State == "running" }

// Port is a published port. HostPort is the one allocated while the
// container runs (a requested 0 becomes a free port), else the requested one.
type Port struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Protocol      string
}

// Mount is a bind mount or a named volume, as requested.
type Mount struct {
	Type     string
	Source   string
	Target   string
	ReadOnly bool
}

// Endpoint is a container's attachment to a network.
type Endpoint struct {
	// IP is the container's address on the network while it runs ("" when
	// it does not run, as with the real engine).
	IP string
	// StaticIP is the address requested (IPAMConfig), if any.
	StaticIP string
	Aliases  []string
}

// File is a regular file in a container.
type File struct {
	Content  []byte
	Mode     int64 // permission bits
	UID, GID int
}

// Network is a snapshot of a network of the fake engine.
type Network struct {
	ID     string
	Name   string
	Driver string
	// Subnet and Gateway are empty for host and none.
	Subnet  string
	Gateway string
	Labels  map[string]string
	// Containers are the names of the containers attached, running or not.
	Containers []string
}

// Request is one API call the engine received.
type Request struct {
	Method string
	// Path is without the version prefix: "/containers/create".
	Path string
	// Query is the raw query string.
	Query string
	// Version is the API version of the path ("1.41"), "" if unversioned.
	Version string
}

// String returns "METHOD /path?query".
func (r Request) String() string {
	if r.Query == "" {
		return r.Method + " " + r.Path
	}
	return r.Method + " " + r.Path + "?" + r.Query
}

// Containers returns every container, sorted by name.
func (e *Engine) Containers() []Container {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Container, 0, len(e.containers))
	for _, c := range e.containers {
		out = append(out, e.snapshot(c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Container returns the container with this name (or id), and whether there
// is one.
func (e *Engine) Container(name string) (Container, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.findContainer(name)
	if c == nil {
		return Container{}, false
	}
	return e.snapshot(c), true
}

// Networks returns every network, sorted by name.
func (e *Engine) Networks() []Network {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Network, 0, len(e.networks))
	for _, n := range e.networks {
		s := Network{ID: n.id, Name: n.name, Driver: n.driver, Labels: copyMap(n.labels)}
		if n.subnet.IsValid() {
			s.Subnet, s.Gateway = n.subnet.String(), n.gateway.String()
		}
		for _, c := range e.containers {
			if c.endpoints[n.id] != nil {
				s.Containers = append(s.Containers, c.name)
			}
		}
		sort.Strings(s.Containers)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Images returns the present images' references, in Docker's short form
// ("alpine:latest", "quay.io/coreos/etcd:v3.5"), sorted.
func (e *Engine) Images() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, im := range e.images {
		for _, r := range im.refs {
			out = append(out, familiarRef(r))
		}
	}
	sort.Strings(out)
	return out
}

// Volumes returns the named volumes' names (created by containers that
// mount them), sorted.
func (e *Engine) Volumes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.volumes))
	for n := range e.volumes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Requests returns the API calls received so far, in order.
func (e *Engine) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Request(nil), e.requests...)
}

// Exit makes the running container name's process exit with code, as a
// crash does. The engine then applies the container's restart policy, as
// Docker does: with "always", "unless-stopped", or "on-failure" and a
// non-zero code, it runs again at once (RestartCount grows; the real
// engine shows "restarting" for a moment first); otherwise it is exited.
// Use Stop for a container stopped on purpose.
func (e *Engine) Exit(name string, code int) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.mustRunning("Exit", name)
	if c == nil {
		return
	}
	e.exit(c, code)
	if c.restartPolicyRestarts(code) {
		c.restarts++
		if err := e.start(c); err != nil {
			c.errMsg = err.msg
		}
	}
}

// Stop stops the running container name as `docker stop` (or `docker
// kill`) does: it is exited, with code 0 (a real process may exit with
// another), and its restart policy does not apply.
//
// Exit and Stop fail the test when the container does not run; call them
// from the test's goroutine.
func (e *Engine) Stop(name string) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.mustRunning("Stop", name)
	if c == nil {
		return
	}
	e.exit(c, 0)
}

func (e *Engine) mustRunning(op, name string) *ctr {
	e.t.Helper()
	c := e.findContainer(name)
	if c == nil {
		e.t.Fatalf("dockerfake: %s(%q): no such container", op, name)
		return nil
	}
	if c.state != stateRunning {
		e.t.Fatalf("dockerfake: %s(%q): the container is %s, not running", op, name, c.state)
		return nil
	}
	return c
}

// snapshot copies c for a test. e.mu is held.
func (e *Engine) snapshot(c *ctr) Container {
	s := Container{
		ID: c.id, Name: c.name, Image: c.cfg.Image,
		Entrypoint: append([]string(nil), c.cfg.Entrypoint...),
		Cmd:        append([]string(nil), c.cfg.Cmd...),
		Env:        append([]string(nil), c.cfg.Env...),
		User:       c.cfg.User,
		Labels:     copyMap(c.cfg.Labels),
		Restart:    c.restartPolicy(),
		State:      c.state, ExitCode: c.exitCode, RestartCount: c.restarts,
		Networks: map[string]Endpoint{},
		Files:    map[string]File{},
	}
	for _, b := range c.bindings() {
		s.Ports = append(s.Ports, Port{HostIP: b.hostIP, HostPort: b.hostPort, ContainerPort: b.port, Protocol: b.proto})
	}
	for _, m := range c.mounts() {
		s.Mounts = append(s.Mounts, Mount{Type: m.typ, Source: m.source, Target: m.target, ReadOnly: m.readOnly})
	}
	for id, ep := range c.endpoints {
		n := e.networks[id]
		if n == nil {
			continue
		}
		x := Endpoint{Aliases: append([]string(nil), ep.aliases...)}
		if ep.ip.IsValid() {
			x.IP = ep.ip.String()
		}
		if ep.static.IsValid() {
			x.StaticIP = ep.static.String()
		}
		s.Networks[n.name] = x
	}
	for p, f := range c.fs {
		if !f.dir {
			s.Files[p] = File{Content: append([]byte(nil), f.content...), Mode: f.mode, UID: f.uid, GID: f.gid}
		}
	}
	return s
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// logf logs to the test unless it has ended.
func (e *Engine) logf(format string, args ...any) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if !closed {
		e.t.Logf(format, args...)
	}
}
