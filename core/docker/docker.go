// Package docker is the core's thin adapter over the Docker Engine API
// (github.com/moby/moby/client): the endpoint the lab uses and the shared
// `kind` bridge network. Containers of services are the plugins' business
// (sdk/container); the core only owns the network they share.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// DefaultHost is the engine Docker's client talks to without a context:
// $DOCKER_HOST, else the platform's default socket.
func DefaultHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	if runtime.GOOS == "windows" {
		return "npipe:////./pipe/docker_engine"
	}
	return "unix:///var/run/docker.sock"
}

// Client is a connection to one Docker engine.
type Client struct {
	api  *client.Client
	host string
}

// Open connects to the engine at host and checks that it answers.
func Open(ctx context.Context, host string) (*Client, error) {
	api, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %q: %w", host, err)
	}
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = api.Close()
		return nil, &UnreachableError{Host: host, Err: err}
	}
	return &Client{api: api, host: host}, nil
}

// UnreachableError says the Docker engine at Host did not answer.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the Docker engine at %s does not answer: %v", e.Host, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Host returns the endpoint.
func (c *Client) Host() string { return c.host }

// API returns the Docker Engine API client.
func (c *Client) API() *client.Client { return c.api }

// Close releases the connection.
func (c *Client) Close() error { return c.api.Close() }

// NetworkSpec is the wanted shape of the shared bridge.
type NetworkSpec struct {
	Name    string
	Subnet  netip.Prefix
	Gateway netip.Addr
	// IPRange is where Docker picks container addresses itself.
	IPRange netip.Prefix
	Labels  map[string]string
}

// NetworkState is what InspectNetwork found.
type NetworkState struct {
	ID      string
	Subnet  netip.Prefix
	Gateway netip.Addr
	IPRange netip.Prefix
	// Containers are the names of the attached containers, sorted.
	Containers []string
	// Bridge is the host interface of the network (br-<id prefix>, or the
	// com.docker.network.bridge.name option).
	Bridge string
}

// InspectNetwork returns the network's state, or nil when it does not exist.
func (c *Client) InspectNetwork(ctx context.Context, name string) (*NetworkState, error) {
	res, err := c.api.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect docker network %s: %w", name, err)
	}
	n := res.Network
	st := &NetworkState{ID: n.ID, Bridge: n.Options["com.docker.network.bridge.name"]}
	if st.Bridge == "" && len(n.ID) >= 12 {
		st.Bridge = "br-" + n.ID[:12]
	}
	for _, cfg := range n.IPAM.Config {
		if cfg.Subnet.Addr().Is4() {
			st.Subnet, st.Gateway, st.IPRange = cfg.Subnet, cfg.Gateway, cfg.IPRange
			break
		}
	}
	for _, ep := range n.Containers {
		st.Containers = append(st.Containers, ep.Name)
	}
	sort.Strings(st.Containers)
	return st, nil
}

// NetworkProblem says why an existing network does not match spec ("" if
// it does).
func NetworkProblem(st *NetworkState, spec NetworkSpec) string {
	var p []string
	if st.Subnet != spec.Subnet {
		p = append(p, fmt.Sprintf("subnet %s, not %s", st.Subnet, spec.Subnet))
	}
	if spec.Gateway.IsValid() && st.Gateway.IsValid() && st.Gateway != spec.Gateway {
		p = append(p, fmt.Sprintf("gateway %s, not %s", st.Gateway, spec.Gateway))
	}
	if st.IPRange != spec.IPRange {
		have := "none"
		if st.IPRange.IsValid() {
			have = st.IPRange.String()
		}
		p = append(p, fmt.Sprintf("ip-range %s, not %s", have, spec.IPRange))
	}
	return strings.Join(p, ", ")
}

// ErrNetworkMismatch is returned (wrapped) when the network exists with
// another shape and cannot be recreated because containers use it.
var ErrNetworkMismatch = errors.New("docker network has the wrong shape")

// EnsureNetwork creates the network when missing. A network with another
// shape is recreated when nothing is attached to it; otherwise the error
// says what differs and how to fix it. It reports what it did: "created",
// "recreated" or "" (unchanged).
func (c *Client) EnsureNetwork(ctx context.Context, spec NetworkSpec) (string, error) {
	st, err := c.InspectNetwork(ctx, spec.Name)
	if err != nil {
		return "", err
	}
	if st != nil {
		problem := NetworkProblem(st, spec)
		if problem == "" {
			return "", nil
		}
		if len(st.Containers) > 0 {
			return "", fmt.Errorf("%w: network %s has %s, and %d containers use it (%s). "+
				"Fix: delete the clusters and services on it (marina destroy), or remove the network by hand "+
				"(docker network rm %s) once nothing uses it; or set network.bridgeCIDR to %s",
				ErrNetworkMismatch, spec.Name, problem, len(st.Containers), strings.Join(st.Containers, ", "), spec.Name, st.Subnet)
		}
		if _, err := c.api.NetworkRemove(ctx, st.ID, client.NetworkRemoveOptions{}); err != nil {
			return "", fmt.Errorf("remove docker network %s to recreate it (%s): %w", spec.Name, problem, err)
		}
		if err := c.createNetwork(ctx, spec); err != nil {
			return "", err
		}
		return "recreated", nil
	}
	if err := c.createNetwork(ctx, spec); err != nil {
		return "", err
	}
	return "created", nil
}

func (c *Client) createNetwork(ctx context.Context, spec NetworkSpec) error {
	ipv4 := true
	_, err := c.api.NetworkCreate(ctx, spec.Name, client.NetworkCreateOptions{
		Driver:     "bridge",
		EnableIPv4: &ipv4,
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{
			Subnet: spec.Subnet, Gateway: spec.Gateway, IPRange: spec.IPRange,
		}}},
		Options: map[string]string{
			"com.docker.network.bridge.enable_ip_masquerade": "true",
			"com.docker.network.driver.mtu":                  "1500",
		},
		Labels: spec.Labels,
	})
	if err != nil {
		return fmt.Errorf("create docker network %s (%s): %w", spec.Name, spec.Subnet, err)
	}
	return nil
}

// RemoveNetwork removes the network; a missing one is not an error.
func (c *Client) RemoveNetwork(ctx context.Context, name string) error {
	_, err := c.api.NetworkRemove(ctx, name, client.NetworkRemoveOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove docker network %s: %w", name, err)
	}
	return nil
}

// Container is a container as listed by Services.
type Container struct {
	ID, Name, Image, State string
	Running                bool
	Labels                 map[string]string
	// IPs are the IPv4 addresses by network name (running containers).
	IPs map[string]string
	// Networks are the networks the container is attached to.
	Networks []string
}

// Services lists the containers marina created (label
// app.kubernetes.io/managed-by=marina), running or not, sorted by name.
func (c *Client) Services(ctx context.Context) ([]Container, error) {
	res, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", "app.kubernetes.io/managed-by=marina")})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []Container
	for _, s := range res.Items {
		ct := Container{ID: s.ID, Image: s.Image, State: string(s.State), Running: s.State == "running", Labels: s.Labels, IPs: map[string]string{}}
		if len(s.Names) > 0 {
			ct.Name = strings.TrimPrefix(s.Names[0], "/")
		}
		if s.NetworkSettings != nil {
			for n, ep := range s.NetworkSettings.Networks {
				ct.Networks = append(ct.Networks, n)
				if ep != nil && ep.IPAddress.IsValid() {
					ct.IPs[n] = ep.IPAddress.String()
				}
			}
			sort.Strings(ct.Networks)
		}
		out = append(out, ct)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// kind's container labels.
const (
	kindClusterLabel = "io.x-k8s.kind.cluster"
	kindRoleLabel    = "io.x-k8s.kind.role"
)

// APIPortHolders returns the slot API ports (7001..7099) that containers
// other than the kind nodes on network (the lab's own clusters) publish on
// the Docker host, each with a description of its holder — most often a
// cluster of another lab on the same engine. A stopped container counts by
// its port bindings: it takes the port back when it restarts.
func (c *Client) APIPortHolders(ctx context.Context, network string) (map[int]string, error) {
	res, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := map[int]string{}
	for _, s := range res.Items {
		onLab := false
		if s.NetworkSettings != nil {
			_, onLab = s.NetworkSettings.Networks[network]
		}
		if onLab && s.Labels[kindClusterLabel] != "" {
			continue
		}
		var ports []int
		if s.State == container.StateRunning {
			for _, p := range s.Ports {
				ports = append(ports, int(p.PublicPort))
			}
		} else {
			ins, err := c.api.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
			if err != nil || ins.Container.HostConfig == nil {
				continue // removed meanwhile
			}
			for _, bindings := range ins.Container.HostConfig.PortBindings {
				for _, b := range bindings {
					if p, err := strconv.Atoi(b.HostPort); err == nil {
						ports = append(ports, p)
					}
				}
			}
		}
		for _, p := range ports {
			if p > 7000 && p < 7100 {
				out[p] = describeHolder(s)
			}
		}
	}
	return out, nil
}

// describeHolder names a container for a message: its name, and the kind
// cluster and networks when it is a kind node.
func describeHolder(s container.Summary) string {
	name := s.ID
	if len(s.Names) > 0 {
		name = strings.TrimPrefix(s.Names[0], "/")
	}
	d := "container " + name
	if cl := s.Labels[kindClusterLabel]; cl != "" {
		var nets []string
		if s.NetworkSettings != nil {
			for n := range s.NetworkSettings.Networks {
				nets = append(nets, n)
			}
		}
		sort.Strings(nets)
		d += fmt.Sprintf(" (kind cluster %s on network %s)", cl, strings.Join(nets, ", "))
	}
	return d
}

// ClusterSlots returns the slot of every marina cluster on the engine: the
// kind clusters on network whose control-plane container binds the API on a
// slot port (7000+N), running or not. kind clusters marina did not make (on
// another network, or on a random API port) are not listed, so nothing
// marina does touches them.
func (c *Client) ClusterSlots(ctx context.Context, network string) (map[string]int, error) {
	res, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", kindRoleLabel+"=control-plane")})
	if err != nil {
		return nil, fmt.Errorf("list kind nodes: %w", err)
	}
	out := map[string]int{}
	for _, s := range res.Items {
		name := s.Labels[kindClusterLabel]
		if name == "" {
			continue
		}
		ins, err := c.api.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
		if err != nil {
			continue
		}
		if ins.Container.HostConfig == nil || ins.Container.NetworkSettings == nil || ins.Container.NetworkSettings.Networks[network] == nil {
			continue
		}
		for port, bindings := range ins.Container.HostConfig.PortBindings {
			if port.Num() != 6443 {
				continue
			}
			for _, b := range bindings {
				if p, err := strconv.Atoi(b.HostPort); err == nil && p > 7000 && p < 7100 {
					out[name] = p - 7000
				}
			}
		}
	}
	return out, nil
}
