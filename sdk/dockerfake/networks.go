package dockerfake

import (
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/network"
)

type netw struct {
	id, name, driver string
	created          time.Time
	subnet           netip.Prefix // invalid for host and none
	ipRange          netip.Prefix // where dynamic addresses come from (valid if set)
	gateway          netip.Addr
	labels           map[string]string
	options          map[string]string
	internal         bool
	predefined       bool
}

// userSubnet reports whether static addresses work on n: Docker allows them
// only on user-defined networks with a configured subnet.
func (n *netw) userSubnet() bool { return !n.predefined && n.subnet.IsValid() }

// findNetwork finds a network by full id, name, or id prefix. e.mu is held.
func (e *Engine) findNetwork(ref string) *netw {
	if n := e.networks[ref]; n != nil {
		return n
	}
	for _, n := range e.networks {
		if n.name == ref {
			return n
		}
	}
	var found *netw
	for id, n := range e.networks {
		if strings.HasPrefix(id, ref) {
			if found != nil {
				return nil
			}
			found = n
		}
	}
	return found
}

// createNetwork adds a network; a zero subnet is allocated from Docker's
// default pools. e.mu is held.
func (e *Engine) createNetwork(name, driver string, subnet netip.Prefix, gateway netip.Addr, ipRange netip.Prefix, labels map[string]string, internal bool) (*netw, *apiError) {
	if name == "" {
		return nil, badRequest("network name must not be empty")
	}
	for _, n := range e.networks {
		if n.name == name {
			return nil, conflict("network with name %s already exists", name)
		}
	}
	if driver == "" {
		driver = "bridge"
	}
	if driver != "bridge" {
		return nil, errf(http.StatusNotImplemented, "dockerfake: network driver %q is not implemented by the fake Docker engine (only bridge)", driver)
	}
	if subnet.IsValid() {
		for _, n := range e.networks {
			if n.subnet.IsValid() && n.subnet.Overlaps(subnet) {
				return nil, errf(http.StatusForbidden, "Pool overlaps with other one on this address space")
			}
		}
	} else {
		subnet = e.freeSubnet()
		if !subnet.IsValid() {
			return nil, errf(http.StatusForbidden, "could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network")
		}
	}
	if ipRange.IsValid() && !(subnet.Contains(ipRange.Addr()) && ipRange.Bits() >= subnet.Bits()) {
		return nil, badRequest("invalid IP range %s: it is not in subnet %s", ipRange, subnet)
	}
	if !gateway.IsValid() {
		// Docker takes the first free address of the pool: the IP range's
		// when there is one.
		gateway = subnet.Addr().Next()
		if ipRange.IsValid() && ipRange.Addr() != subnet.Addr() {
			gateway = ipRange.Addr()
		}
	} else if !subnet.Contains(gateway) {
		return nil, errf(http.StatusForbidden, "Invalid address %s: It does not belong to any of this network's subnets", gateway)
	}
	n := &netw{id: randomID(), name: name, driver: driver, created: time.Now().UTC(), subnet: subnet, gateway: gateway,
		ipRange: ipRange, labels: copyMap(labels), internal: internal}
	e.networks[n.id] = n
	return n, nil
}

// freeSubnet returns the first of Docker's default local pools (172.17-31
// /16, then 192.168.x.0/20) that overlaps no network. e.mu is held.
func (e *Engine) freeSubnet() netip.Prefix {
	var pools []netip.Prefix
	for b := 17; b <= 31; b++ {
		pools = append(pools, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(b), 0, 0}), 16))
	}
	for c := 0; c < 256; c += 16 {
		pools = append(pools, netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(c), 0}), 20))
	}
next:
	for _, p := range pools {
		for _, n := range e.networks {
			if n.subnet.IsValid() && n.subnet.Overlaps(p) {
				continue next
			}
		}
		return p
	}
	return netip.Prefix{}
}

// usedIPs returns the addresses in use on n by running containers. e.mu is
// held.
func (e *Engine) usedIPs(n *netw) map[netip.Addr]string {
	used := map[netip.Addr]string{}
	for _, c := range e.containers {
		if ep := c.endpoints[n.id]; ep != nil && ep.ip.IsValid() {
			used[ep.ip] = c.id
		}
	}
	return used
}

// allocate gives ep an address on n, as the engine does when the container
// starts or, running, is connected: the static one when requested, else the
// first free one. e.mu is held.
func (e *Engine) allocate(c *ctr, n *netw, ep *endpoint) *apiError {
	if !n.subnet.IsValid() {
		return nil // host, none
	}
	used := e.usedIPs(n)
	if ep.static.IsValid() {
		if !n.userSubnet() {
			return badRequest("user specified IP address is supported only when connecting to networks with user configured subnets")
		}
		if !n.subnet.Contains(ep.static) {
			return errf(http.StatusInternalServerError, "Invalid address %s: It does not belong to any of this network's subnets", ep.static)
		}
		if id, ok := used[ep.static]; (ok && id != c.id) || ep.static == n.gateway {
			return errf(http.StatusForbidden, "Address already in use")
		}
		ep.ip = ep.static
	} else {
		pool := n.subnet
		if n.ipRange.IsValid() {
			pool = n.ipRange
		}
		ip := pool.Addr()
		for ; pool.Contains(ip); ip = ip.Next() {
			if ip == n.subnet.Addr() || ip == n.gateway || !n.subnet.Contains(ip.Next()) {
				continue // network, gateway, broadcast
			}
			if id, ok := used[ip]; ok && id != c.id {
				continue
			}
			break
		}
		if !pool.Contains(ip) {
			return errf(http.StatusServiceUnavailable, "no available IPv4 addresses on this network's address pools: %s (%s)", n.name, n.subnet)
		}
		ep.ip = ip
	}
	ep.endpointID = randomID()
	return nil
}

// mac is the address Docker 20.10 derives from an IPv4 address.
func mac(ip netip.Addr) network.HardwareAddr {
	if !ip.Is4() {
		return nil
	}
	b := ip.As4()
	return network.HardwareAddr{0x02, 0x42, b[0], b[1], b[2], b[3]}
}

// networkJSON is n as inspect and list show it.
func (e *Engine) networkJSON(n *netw) network.Inspect {
	out := network.Inspect{Network: network.Network{
		Name: n.name, ID: n.id, Created: n.created, Scope: "local", Driver: n.driver, EnableIPv4: true,
		IPAM:     network.IPAM{Driver: "default", Options: map[string]string{}, Config: []network.IPAMConfig{}},
		Internal: n.internal, Options: copyMap(n.options), Labels: copyMap(n.labels),
	}, Containers: map[string]network.EndpointResource{}}
	if out.Options == nil {
		out.Options = map[string]string{}
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if n.subnet.IsValid() {
		out.IPAM.Config = append(out.IPAM.Config, network.IPAMConfig{Subnet: n.subnet, Gateway: n.gateway, IPRange: n.ipRange})
	}
	for _, c := range e.containers {
		ep := c.endpoints[n.id]
		if ep == nil || c.state != stateRunning {
			continue
		}
		r := network.EndpointResource{Name: c.name, EndpointID: ep.endpointID}
		if ep.ip.IsValid() {
			r.MacAddress = mac(ep.ip)
			r.IPv4Address = netip.PrefixFrom(ep.ip, n.subnet.Bits())
		}
		out.Containers[c.id] = r
	}
	return out
}

// networkList answers GET /networks.
func (e *Engine) networkList(w http.ResponseWriter, r *http.Request) *apiError {
	f, err := parseFilters(r.URL.Query())
	if err != nil {
		return err
	}
	if err := checkFilters(f, []string{"name", "id", "label", "driver", "type"}, []string{"dangling", "scope"}); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []network.Summary{}
	for _, n := range e.networks {
		if !anyMatch(f["name"], func(v string) bool { return strings.Contains(n.name, v) }) ||
			!anyMatch(f["id"], func(v string) bool { return strings.HasPrefix(n.id, v) }) ||
			!anyMatch(f["driver"], func(v string) bool { return n.driver == v }) ||
			!anyMatch(f["type"], func(v string) bool { return (v == "builtin") == n.predefined }) ||
			!matchLabels(n.labels, f["label"]) {
			continue
		}
		// Docker lists networks without their containers.
		out = append(out, network.Summary{Network: e.networkJSON(n).Network})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
	return nil
}

// anyMatch is true when vs is empty or one of them matches.
func anyMatch(vs []string, match func(string) bool) bool {
	if len(vs) == 0 {
		return true
	}
	for _, v := range vs {
		if match(v) {
			return true
		}
	}
	return false
}

// networkInspect answers GET /networks/{id}.
func (e *Engine) networkInspect(w http.ResponseWriter, ref string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.findNetwork(ref)
	if n == nil {
		return notFound("network %s not found", ref)
	}
	writeJSON(w, http.StatusOK, e.networkJSON(n))
	return nil
}

// networkCreate answers POST /networks/create.
func (e *Engine) networkCreate(w http.ResponseWriter, r *http.Request) *apiError {
	var req network.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	var subnet, ipRange netip.Prefix
	var gw netip.Addr
	if req.IPAM != nil {
		if req.IPAM.Driver != "" && req.IPAM.Driver != "default" {
			return errf(http.StatusNotImplemented, "dockerfake: IPAM driver %q is not implemented by the fake Docker engine", req.IPAM.Driver)
		}
		for _, c := range req.IPAM.Config {
			if !c.Subnet.Addr().Is4() {
				continue // IPv6 subnets are accepted and ignored
			}
			if subnet.IsValid() {
				return errf(http.StatusNotImplemented, "dockerfake: several IPv4 subnets on one network are not implemented by the fake Docker engine")
			}
			if c.Subnet.Masked() != c.Subnet {
				return badRequest("invalid subnet %s: it should be %s", c.Subnet, c.Subnet.Masked())
			}
			subnet, gw, ipRange = c.Subnet, c.Gateway, c.IPRange
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n, err := e.createNetwork(req.Name, req.Driver, subnet, gw, ipRange, req.Labels, req.Internal)
	if err != nil {
		return err
	}
	n.options = copyMap(req.Options)
	writeJSON(w, http.StatusCreated, network.CreateResponse{ID: n.id})
	return nil
}

// networkRemove answers DELETE /networks/{id}.
func (e *Engine) networkRemove(w http.ResponseWriter, ref string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.findNetwork(ref)
	if n == nil {
		return notFound("network %s not found", ref)
	}
	if n.predefined {
		return errf(http.StatusForbidden, "%s is a pre-defined network and cannot be removed", n.name)
	}
	for _, c := range e.containers {
		if c.endpoints[n.id] != nil && c.state == stateRunning {
			return errf(http.StatusForbidden, "error while removing network: network %s id %s has active endpoints", n.name, n.id)
		}
	}
	// Stopped containers keep a dangling reference, as with Docker; drop it.
	for _, c := range e.containers {
		delete(c.endpoints, n.id)
	}
	delete(e.networks, n.id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// networkConnect answers POST /networks/{id}/connect.
func (e *Engine) networkConnect(w http.ResponseWriter, r *http.Request, ref string) *apiError {
	var req network.ConnectRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.findNetwork(ref)
	if n == nil {
		return notFound("network %s not found", ref)
	}
	c := e.findContainer(req.Container)
	if c == nil {
		return notFound("No such container: %s", req.Container)
	}
	if c.endpoints[n.id] != nil {
		return errf(http.StatusForbidden, "endpoint with name %s already exists in network %s", c.name, n.name)
	}
	if n.name == "host" || n.name == "none" || c.networkMode() == "host" || c.networkMode() == "none" {
		return badRequest("container cannot be disconnected from host network or connected to host network")
	}
	ep := newEndpoint(req.EndpointConfig)
	if c.state == stateRunning {
		if err := e.allocate(c, n, ep); err != nil {
			return err
		}
	}
	c.endpoints[n.id] = ep
	w.WriteHeader(http.StatusOK)
	return nil
}

// networkDisconnect answers POST /networks/{id}/disconnect.
func (e *Engine) networkDisconnect(w http.ResponseWriter, r *http.Request, ref string) *apiError {
	var req network.DisconnectRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.findNetwork(ref)
	if n == nil {
		return notFound("network %s not found", ref)
	}
	c := e.findContainer(req.Container)
	if c == nil {
		if req.Force {
			w.WriteHeader(http.StatusOK)
			return nil
		}
		return notFound("No such container: %s", req.Container)
	}
	if c.endpoints[n.id] == nil {
		return errf(http.StatusInternalServerError, "container %s is not connected to network %s", c.id, n.name)
	}
	delete(c.endpoints, n.id)
	w.WriteHeader(http.StatusOK)
	return nil
}
