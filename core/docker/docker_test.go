package docker_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/sdk/dockertest"
)

// subnet is this package's test network (other packages use other ones).
const subnet = "172.25.0.0/16"

func TestEnsureNetwork(t *testing.T) {
	dockertest.Require(t)
	img := dockertest.Image(t, "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := docker.Open(ctx, docker.DefaultHost())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := "marina-test-net-" + strings.ReplaceAll(t.Name(), "/", "-")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.RemoveNetwork(ctx, name); err != nil {
			t.Error(err)
		}
	})
	spec := docker.NetworkSpec{
		Name:    name,
		Subnet:  netip.MustParsePrefix(subnet),
		Gateway: netip.MustParseAddr("172.25.0.1"),
		IPRange: netip.MustParsePrefix("172.25.128.0/18"),
		Labels:  dockertest.Labels(t),
	}
	if did, err := c.EnsureNetwork(ctx, spec); err != nil || did != "created" {
		t.Fatalf("first EnsureNetwork = %q, %v; want created", did, err)
	}
	st, err := c.InspectNetwork(ctx, name)
	if err != nil || st == nil {
		t.Fatalf("InspectNetwork: %+v, %v", st, err)
	}
	if docker.NetworkProblem(st, spec) != "" || !strings.HasPrefix(st.Bridge, "br-") {
		t.Fatalf("network as created: %+v (%s)", st, docker.NetworkProblem(st, spec))
	}
	if did, err := c.EnsureNetwork(ctx, spec); err != nil || did != "" {
		t.Fatalf("second EnsureNetwork = %q, %v; want unchanged", did, err)
	}

	// A container started on it gets an address from the ip-range.
	id := dockertest.Run(t, "--network", name, img, "--data-dir", "/data")
	ip := netip.MustParseAddr(dockertest.Docker(t, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+name+"\").IPAddress}}", id))
	if !spec.IPRange.Contains(ip) {
		t.Fatalf("container got %s, outside the ip-range %s", ip, spec.IPRange)
	}

	// Another shape with a container attached: refused, naming the container.
	wider := spec
	wider.IPRange = netip.MustParsePrefix("172.25.192.0/18")
	_, err = c.EnsureNetwork(ctx, wider)
	if !errors.Is(err, docker.ErrNetworkMismatch) || !strings.Contains(err.Error(), "ip-range 172.25.128.0/18, not 172.25.192.0/18") {
		t.Fatalf("EnsureNetwork over a used network of another shape: %v", err)
	}
	dockertest.Docker(t, "rm", "-f", id)

	// Nothing attached: recreated with the new shape.
	if did, err := c.EnsureNetwork(ctx, wider); err != nil || did != "recreated" {
		t.Fatalf("EnsureNetwork of an unused network of another shape = %q, %v; want recreated", did, err)
	}
	st, err = c.InspectNetwork(ctx, name)
	if err != nil || st == nil || st.IPRange != wider.IPRange {
		t.Fatalf("after recreate: %+v, %v", st, err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := docker.Open(ctx, "unix:///nonexistent/docker.sock")
	var ue *docker.UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "/nonexistent/docker.sock") {
		t.Fatalf("Open of a missing socket: %v", err)
	}
}

// TestClusterSlots: only kind control planes on the lab's network with an
// API binding on a slot port are marina's clusters; a user's own kind
// cluster (random port) or one on another network is left out.
func TestClusterSlots(t *testing.T) {
	dockertest.Require(t)
	img := dockertest.Image(t, "etcd")
	lab := dockertest.Network(t, "172.21.0.0/16")
	other := dockertest.Network(t, "172.20.0.0/16")
	kindNode := func(cluster, network, publish string) {
		dockertest.Run(t, "--network", network, "--label", "io.x-k8s.kind.role=control-plane",
			"--label", "io.x-k8s.kind.cluster="+cluster, "-p", publish, img, "--data-dir", "/data")
	}
	kindNode("ours", lab.Name, "127.0.0.1:7097:6443")
	kindNode("usersown", lab.Name, "127.0.0.1::6443")
	kindNode("elsewhere", other.Name, "127.0.0.1:7096:6443")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := docker.Open(ctx, docker.DefaultHost())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.ClusterSlots(ctx, lab.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["ours"] != 97 {
		t.Fatalf("ClusterSlots = %v, want only ours in slot 97", got)
	}

	// APIPortHolders: every slot port held by anything but the lab's own
	// clusters — another lab's cluster, any container, a stopped one too
	// (it takes its port back when it starts) — with who holds it.
	stopped := dockertest.Docker(t, append(append([]string{"create"}, dockertest.LabelArgs(t)...), "--name", "marina-test-stopped-"+strconv.Itoa(os.Getpid()),
		"-p", "127.0.0.1:7095:2379", img, "--data-dir", "/data")...)
	dockertest.Cleanup(t, []string{stopped}, nil)
	holders, err := c.APIPortHolders(ctx, lab.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := holders[7097]; ok {
		t.Errorf("APIPortHolders lists the lab's own cluster's port 7097: %v", holders)
	}
	if h := holders[7096]; !strings.Contains(h, "(kind cluster elsewhere on network "+other.Name+")") {
		t.Errorf("APIPortHolders[7096] = %q; want the kind cluster elsewhere on %s", h, other.Name)
	}
	if h := holders[7095]; !strings.HasPrefix(h, "container marina-test-stopped-") {
		t.Errorf("APIPortHolders[7095] = %q; want the stopped container", h)
	}
}

func TestDefaultHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
	if h := docker.DefaultHost(); h != "tcp://127.0.0.1:2375" {
		t.Errorf("DefaultHost with DOCKER_HOST = %q", h)
	}
	t.Setenv("DOCKER_HOST", "")
	if h := docker.DefaultHost(); h != "unix:///var/run/docker.sock" {
		t.Errorf("DefaultHost = %q", h)
	}
}
