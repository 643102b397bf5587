package dockerfake

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
)

const (
	stateCreated = "created"
	stateRunning = "running"
	stateExited  = "exited"
)

type ctr struct {
	id, name string
	created  time.Time
	cfg      container.Config
	host     container.HostConfig
	imageID  string

	endpoints map[string]*endpoint // by network id

	state     string
	pid       int
	exitCode  int
	errMsg    string
	started   time.Time
	finished  time.Time
	restarts  int
	hostPorts map[string]int // allocated while running, by binding key

	fs map[string]*fsEntry // by clean absolute path; "/" is implicit
}

type endpoint struct {
	static     netip.Addr
	aliases    []string
	ip         netip.Addr // while running
	endpointID string
}

func newEndpoint(s *network.EndpointSettings) *endpoint {
	ep := &endpoint{}
	if s != nil {
		ep.aliases = append([]string(nil), s.Aliases...)
		if s.IPAMConfig != nil {
			ep.static = s.IPAMConfig.IPv4Address
		}
	}
	return ep
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var validName = regexp.MustCompile(`^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// findContainer finds a container by full id, name ("/name" too), or
// unique id prefix. e.mu is held.
func (e *Engine) findContainer(ref string) *ctr {
	if c := e.containers[ref]; c != nil {
		return c
	}
	name := strings.TrimPrefix(ref, "/")
	for _, c := range e.containers {
		if c.name == name {
			return c
		}
	}
	if ref == "" {
		return nil
	}
	var found *ctr
	for id, c := range e.containers {
		if strings.HasPrefix(id, ref) {
			if found != nil {
				return nil
			}
			found = c
		}
	}
	return found
}

func (c *ctr) networkMode() string {
	switch m := string(c.host.NetworkMode); m {
	case "", "default":
		return "bridge"
	default:
		return m
	}
}

func (c *ctr) restartPolicy() string {
	if c.host.RestartPolicy.Name == "" {
		return "no"
	}
	return string(c.host.RestartPolicy.Name)
}

// restartPolicyRestarts reports whether Docker restarts c after its process
// exited with code on its own.
func (c *ctr) restartPolicyRestarts(code int) bool {
	switch c.restartPolicy() {
	case "always", "unless-stopped":
		return true
	case "on-failure":
		max := c.host.RestartPolicy.MaximumRetryCount
		return code != 0 && (max == 0 || c.restarts < max)
	}
	return false
}

type binding struct {
	port     int
	proto    string
	hostIP   string
	hostPort int // requested (0: any), or allocated while running
	key      string
}

// bindings lists c's published ports in a stable order.
func (c *ctr) bindings() []binding {
	var out []binding
	for p, bs := range c.host.PortBindings {
		for i, b := range bs {
			hp, _ := strconv.Atoi(b.HostPort)
			x := binding{port: int(p.Num()), proto: string(p.Proto()), hostPort: hp, key: p.String() + "#" + strconv.Itoa(i)}
			if b.HostIP.IsValid() {
				x.hostIP = b.HostIP.String()
			}
			if a, ok := c.hostPorts[x.key]; ok {
				x.hostPort = a
			}
			out = append(out, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

type mountSpec struct {
	typ, source, target string
	readOnly            bool
}

// mounts lists c's mounts: HostConfig.Mounts, then Binds.
func (c *ctr) mounts() []mountSpec {
	var out []mountSpec
	for _, m := range c.host.Mounts {
		out = append(out, mountSpec{typ: string(m.Type), source: m.Source, target: m.Target, readOnly: m.ReadOnly})
	}
	for _, b := range c.host.Binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 {
			continue
		}
		m := mountSpec{typ: "bind", source: parts[0], target: parts[1]}
		if !strings.HasPrefix(m.source, "/") {
			m.typ = "volume"
		}
		if len(parts) > 2 {
			for _, o := range strings.Split(parts[2], ",") {
				if o == "ro" {
					m.readOnly = true
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// containerCreate answers POST /containers/create?name=….
func (e *Engine) containerCreate(w http.ResponseWriter, r *http.Request) *apiError {
	var req container.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Config == nil {
		req.Config = &container.Config{}
	}
	if req.HostConfig == nil {
		req.HostConfig = &container.HostConfig{}
	}
	name := r.URL.Query().Get("name")
	if name != "" && !validName.MatchString(name) {
		return badRequest("Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed", name)
	}
	name = strings.TrimPrefix(name, "/")
	if req.Image == "" {
		return badRequest("no image specified")
	}
	switch rp := req.HostConfig.RestartPolicy.Name; rp {
	case "", "no", "always", "unless-stopped", "on-failure":
	default:
		return badRequest("invalid restart policy '%s'", rp)
	}
	for _, m := range req.HostConfig.Mounts {
		switch m.Type {
		case mount.TypeBind, mount.TypeVolume:
		default:
			return errf(http.StatusNotImplemented, "dockerfake: mounts of type %q are not implemented by the fake Docker engine (bind and volume are)", m.Type)
		}
		if m.Target == "" || !strings.HasPrefix(m.Target, "/") {
			return badRequest("invalid mount config for type %q: invalid mount path: '%s' mount path must be absolute", m.Type, m.Target)
		}
		if m.Type == mount.TypeBind && !strings.HasPrefix(m.Source, "/") {
			return badRequest("invalid mount config for type \"bind\": invalid mount path: '%s' mount path must be absolute", m.Source)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	// The engine looks the image up first, then reserves the name.
	im := e.findImage(req.Image)
	if im == nil {
		return notFound("No such image: %s", req.Image)
	}
	if name != "" {
		if other := e.findContainerByName(name); other != nil {
			return conflict("Conflict. The container name \"/%s\" is already in use by container \"%s\". You have to remove (or rename) that container to be able to reuse that name.", name, other.id)
		}
	} else {
		e.seq++
		name = fmt.Sprintf("dockerfake_%d", e.seq)
	}
	c := &ctr{id: randomID(), name: name, created: time.Now().UTC(), cfg: *req.Config, host: *req.HostConfig, imageID: im.id,
		endpoints: map[string]*endpoint{}, state: stateCreated, fs: map[string]*fsEntry{}}
	c.cfg.Labels = copyMap(req.Config.Labels)
	if c.cfg.Labels == nil {
		c.cfg.Labels = map[string]string{}
	}

	mode := c.networkMode()
	if strings.HasPrefix(mode, "container:") {
		return errf(http.StatusNotImplemented, "dockerfake: network mode %q is not implemented by the fake Docker engine", mode)
	}
	if c.host.NetworkMode == "" {
		c.host.NetworkMode = "default"
	}
	n := e.findNetwork(mode)
	if n == nil {
		return notFound("network %s not found", mode)
	}
	var settings map[string]*network.EndpointSettings
	if req.NetworkingConfig != nil {
		settings = req.NetworkingConfig.EndpointsConfig
	}
	c.endpoints[n.id] = newEndpoint(lookupSettings(settings, n))
	for ref, s := range settings {
		other := e.findNetwork(ref)
		if other == nil {
			return notFound("network %s not found", ref)
		}
		if c.endpoints[other.id] == nil {
			c.endpoints[other.id] = newEndpoint(s)
		}
	}

	for _, m := range c.mounts() {
		if m.typ == "volume" && e.volumes[m.source] == nil {
			e.volumes[m.source] = &volume{name: m.source, created: time.Now().UTC()}
		}
	}
	e.containers[c.id] = c
	writeJSON(w, http.StatusCreated, container.CreateResponse{ID: c.id, Warnings: []string{}})
	return nil
}

// lookupSettings finds n's endpoint settings by name or id.
func lookupSettings(s map[string]*network.EndpointSettings, n *netw) *network.EndpointSettings {
	if v, ok := s[n.name]; ok {
		return v
	}
	return s[n.id]
}

func (e *Engine) findContainerByName(name string) *ctr {
	for _, c := range e.containers {
		if c.name == name {
			return c
		}
	}
	return nil
}

// containerStart answers POST /containers/{id}/start.
func (e *Engine) containerStart(w http.ResponseWriter, ref string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.findContainer(ref)
	if c == nil {
		return notFound("No such container: %s", ref)
	}
	if c.state == stateRunning {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if err := e.start(c); err != nil {
		c.errMsg = err.msg
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// start allocates c's addresses and host ports and runs it; on failure
// nothing is held. e.mu is held.
func (e *Engine) start(c *ctr) *apiError {
	ids := make([]string, 0, len(c.endpoints))
	for id := range c.endpoints {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	release := func() {
		for _, ep := range c.endpoints {
			ep.ip, ep.endpointID = netip.Addr{}, ""
		}
		c.hostPorts = nil
	}
	for _, id := range ids {
		n := e.networks[id]
		if n == nil {
			release()
			return notFound("network %s not found", id)
		}
		if err := e.allocate(c, n, c.endpoints[id]); err != nil {
			release()
			return err
		}
	}
	if c.networkMode() != "host" {
		if err := e.bindPorts(c); err != nil {
			release()
			return err
		}
	}
	e.run(c)
	return nil
}

// bindPorts allocates c's published ports, failing as Docker does on a host
// port another running container holds. e.mu is held.
func (e *Engine) bindPorts(c *ctr) *apiError {
	type hp struct {
		ip    string
		port  int
		proto string
	}
	held := map[hp]bool{}
	for _, o := range e.containers {
		if o == c || o.state != stateRunning {
			continue
		}
		for _, b := range o.bindings() {
			held[hp{b.hostIP, b.hostPort, b.proto}] = true
		}
	}
	conflicts := func(ip string, port int, proto string) bool {
		if held[hp{ip, port, proto}] {
			return true
		}
		for h := range held {
			if h.port == port && h.proto == proto && (unspecified(h.ip) || unspecified(ip)) {
				return true
			}
		}
		return false
	}
	c.hostPorts = map[string]int{}
	for _, b := range c.bindings() {
		port := b.hostPort
		if port == 0 {
			for port = 32768; conflicts(b.hostIP, port, b.proto); port++ {
			}
		} else if conflicts(b.hostIP, port, b.proto) {
			ip := b.hostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			var epID string
			for _, ep := range c.endpoints {
				if ep.endpointID != "" {
					epID = ep.endpointID
					break
				}
			}
			return errf(http.StatusInternalServerError, "driver failed programming external connectivity on endpoint %s (%s): Bind for %s:%d failed: port is already allocated", c.name, epID, ip, port)
		}
		c.hostPorts[b.key] = port
		held[hp{b.hostIP, port, b.proto}] = true
	}
	return nil
}

func unspecified(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

// run marks c running. e.mu is held.
func (e *Engine) run(c *ctr) {
	e.seq++
	c.state, c.pid, c.exitCode, c.errMsg = stateRunning, 1000+e.seq, 0, ""
	c.started = time.Now().UTC()
}

// exit marks c exited with code and releases what it held. e.mu is held.
func (e *Engine) exit(c *ctr, code int) {
	c.state, c.pid, c.exitCode = stateExited, 0, code
	c.finished = time.Now().UTC()
	for _, ep := range c.endpoints {
		ep.ip, ep.endpointID = netip.Addr{}, ""
	}
	c.hostPorts = nil
}

// containerRemove answers DELETE /containers/{id}?force=…&v=….
func (e *Engine) containerRemove(w http.ResponseWriter, r *http.Request, ref string) *apiError {
	force := boolQuery(r.URL.Query(), "force")
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.findContainer(ref)
	if c == nil {
		return notFound("No such container: %s", ref)
	}
	if c.state == stateRunning && !force {
		return conflict("You cannot remove a running container %s. Stop the container before attempting removal or force remove", c.id)
	}
	// Named volumes stay (v=1 removes anonymous ones, which the fake has not).
	delete(e.containers, c.id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// inspectJSON is c as GET /containers/{id}/json shows it. e.mu is held.
func (e *Engine) inspectJSON(c *ctr) container.InspectResponse {
	zero := "0001-01-01T00:00:00Z"
	st := &container.State{Status: container.ContainerState(c.state), Running: c.state == stateRunning, Pid: c.pid,
		ExitCode: c.exitCode, Error: c.errMsg, StartedAt: zero, FinishedAt: zero}
	if !c.started.IsZero() {
		st.StartedAt = c.started.Format(time.RFC3339Nano)
	}
	if !c.finished.IsZero() {
		st.FinishedAt = c.finished.Format(time.RFC3339Nano)
	}
	cfg := c.cfg
	cfg.Labels = copyMap(c.cfg.Labels)
	host := c.host
	path, args := "", []string{}
	if cmd := append(append([]string(nil), c.cfg.Entrypoint...), c.cfg.Cmd...); len(cmd) > 0 {
		path, args = cmd[0], cmd[1:]
	}
	out := container.InspectResponse{
		ID: c.id, Created: c.created.Format(time.RFC3339Nano), Path: path, Args: args, State: st,
		Image: c.imageID, Name: "/" + c.name, RestartCount: c.restarts, Driver: "dockerfake", Platform: "linux",
		HostConfig: &host, Config: &cfg, Mounts: []container.MountPoint{},
		NetworkSettings: &container.NetworkSettings{Ports: network.PortMap{}, Networks: e.endpointsJSON(c)},
	}
	for _, m := range c.mounts() {
		mp := container.MountPoint{Type: mount.Type(m.typ), Source: m.source, Destination: m.target, RW: !m.readOnly}
		if m.typ == "volume" {
			mp.Name, mp.Driver, mp.Source = m.source, "local", "/var/lib/docker/volumes/"+m.source+"/_data"
		}
		out.Mounts = append(out.Mounts, mp)
	}
	if c.state == stateRunning {
		for p := range c.cfg.ExposedPorts {
			out.NetworkSettings.Ports[p] = nil
		}
		for _, b := range c.bindings() {
			p, _ := network.ParsePort(strconv.Itoa(b.port) + "/" + b.proto)
			pb := network.PortBinding{HostPort: strconv.Itoa(b.hostPort)}
			ip := b.hostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			pb.HostIP, _ = netip.ParseAddr(ip)
			out.NetworkSettings.Ports[p] = append(out.NetworkSettings.Ports[p], pb)
		}
	}
	return out
}

// endpointsJSON is c's NetworkSettings.Networks. e.mu is held.
func (e *Engine) endpointsJSON(c *ctr) map[string]*network.EndpointSettings {
	out := map[string]*network.EndpointSettings{}
	for id, ep := range c.endpoints {
		n := e.networks[id]
		if n == nil {
			continue
		}
		s := &network.EndpointSettings{NetworkID: n.id, EndpointID: ep.endpointID, Aliases: append([]string(nil), ep.aliases...)}
		if ep.static.IsValid() {
			s.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ep.static}
		}
		if ep.ip.IsValid() {
			s.IPAddress, s.IPPrefixLen, s.Gateway, s.MacAddress = ep.ip, n.subnet.Bits(), n.gateway, mac(ep.ip)
		}
		out[n.name] = s
	}
	return out
}

// containerInspect answers GET /containers/{id}/json.
func (e *Engine) containerInspect(w http.ResponseWriter, ref string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.findContainer(ref)
	if c == nil {
		return notFound("No such container: %s", ref)
	}
	writeJSON(w, http.StatusOK, e.inspectJSON(c))
	return nil
}

// containerList answers GET /containers/json?all=…&filters=….
func (e *Engine) containerList(w http.ResponseWriter, r *http.Request) *apiError {
	q := r.URL.Query()
	f, err := parseFilters(q)
	if err != nil {
		return err
	}
	if err := checkFilters(f, []string{"id", "name", "label", "status", "network"},
		[]string{"ancestor", "before", "expose", "exited", "health", "isolation", "is-task", "publish", "since", "volume"}); err != nil {
		return err
	}
	var names []*regexp.Regexp
	for _, v := range f["name"] {
		re, err := regexp.Compile(v)
		if err != nil {
			return badRequest("invalid filter 'name=%s': %v", v, err)
		}
		names = append(names, re)
	}
	for _, s := range f["status"] {
		if !contains([]string{"created", "restarting", "running", "removing", "paused", "exited", "dead"}, s) {
			return badRequest("invalid filter 'status=%s'", s)
		}
	}
	all := boolQuery(q, "all")
	e.mu.Lock()
	defer e.mu.Unlock()
	var cs []*ctr
	for _, c := range e.containers {
		if !all && c.state != stateRunning && len(f["status"]) == 0 {
			continue
		}
		if !anyMatch(f["id"], func(v string) bool { return strings.HasPrefix(c.id, v) }) ||
			!anyMatch(f["status"], func(v string) bool { return v == c.state }) ||
			!anyMatch(f["network"], func(v string) bool { n := e.findNetwork(v); return n != nil && c.endpoints[n.id] != nil }) ||
			!matchLabels(c.cfg.Labels, f["label"]) {
			continue
		}
		if len(names) > 0 {
			ok := false
			for _, re := range names {
				ok = ok || re.MatchString("/"+c.name)
			}
			if !ok {
				continue
			}
		}
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].created.Equal(cs[j].created) {
			return cs[i].created.After(cs[j].created)
		}
		return cs[i].id < cs[j].id
	})
	out := []container.Summary{}
	for _, c := range cs {
		in := e.inspectJSON(c)
		s := container.Summary{
			ID: c.id, Names: []string{"/" + c.name}, Image: c.cfg.Image, ImageID: c.imageID,
			Command: strings.TrimSpace(in.Path + " " + strings.Join(in.Args, " ")), Created: c.created.Unix(),
			Ports: []container.PortSummary{}, Labels: copyMap(c.cfg.Labels), State: container.ContainerState(c.state),
			Status: c.status(), Mounts: in.Mounts,
			NetworkSettings: &container.NetworkSettingsSummary{Networks: in.NetworkSettings.Networks},
		}
		s.HostConfig.NetworkMode = string(c.host.NetworkMode)
		if c.state == stateRunning {
			for _, b := range c.bindings() {
				ps := container.PortSummary{PrivatePort: uint16(b.port), PublicPort: uint16(b.hostPort), Type: b.proto}
				ps.IP, _ = netip.ParseAddr(b.hostIP)
				if !ps.IP.IsValid() {
					ps.IP = netip.IPv4Unspecified()
				}
				s.Ports = append(s.Ports, ps)
			}
		}
		out = append(out, s)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// status is the human-readable status of docker ps.
func (c *ctr) status() string {
	switch c.state {
	case stateRunning:
		return "Up " + humanDuration(time.Since(c.started))
	case stateExited:
		return fmt.Sprintf("Exited (%d) %s ago", c.exitCode, humanDuration(time.Since(c.finished)))
	}
	return "Created"
}

func humanDuration(d time.Duration) string {
	switch s := int(d.Seconds()); {
	case s < 1:
		return "Less than a second"
	case s == 1:
		return "1 second"
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	case s < 3600:
		return fmt.Sprintf("%d minutes", s/60)
	default:
		return fmt.Sprintf("%d hours", s/3600)
	}
}
