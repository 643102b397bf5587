package dockerfake_test

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/dockerfake"
	"github.com/bcollard/marina/sdk/dockertest"
)

// conformanceSubnet is this package's test network on the real engine;
// other packages use other subnets (test/README.md).
const conformanceSubnet = "10.232.0.0/16"

// pullRefused is what Docker 20.10 answers when the registry of an image
// refuses connections.
const pullRefused = `Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused`

// backend is one engine the conformance scenario runs against.
type backend struct {
	host    string
	image   string            // present on the engine; runs a long-lived process (etcd)
	network string            // user-defined, with conformanceSubnet
	prefix  string            // unique prefix of every name the scenario uses
	labels  map[string]string // put on everything the scenario creates
	// missing is an image whose pull fails (its registry refuses
	// connections); pullable one the engine lacks and can pull.
	missing, pullable string
	port              int // a free port on 127.0.0.1
	// stop stops a running container as `docker stop` does.
	stop func(t *testing.T, name string)
	// exited returns once the process of container name (restart policy
	// "no", command that exits 0 at once) has exited.
	exited func(t *testing.T, name string)
	// crashed returns once the process of container name (restart policy
	// "always", command that fails at once) has crashed and the engine
	// restarted it.
	crashed func(t *testing.T, name string)
}

func randHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestConformance runs one scenario of sdk/container calls (and the raw
// API calls a plugin makes next to them) against the fake and against the
// real Docker engine, and compares what each observes: actions, states,
// labels, addresses, files, and the kinds of errors. A difference means
// the fake has drifted from Docker.
func TestConformance(t *testing.T) {
	var fake, real []string
	t.Run("fake", func(t *testing.T) {
		eng := dockerfake.Start(t)
		const image = "marina-test/etcd:v3.7.3"
		eng.AddImage(image)
		net := "dockerfake-" + randHex()
		eng.AddNetwork(net, conformanceSubnet)
		missing := "127.0.0.1:1/marina-test/dockerfake-missing:v0"
		eng.FailPull(missing, pullRefused)
		b := backend{
			host: eng.Host(), image: image, network: net, prefix: "df-" + randHex(),
			labels: map[string]string{"dockerfake.test": "1"}, missing: missing,
			pullable: "127.0.0.1:5000/dockerfake/registry:" + randHex(), port: freePort(t),
			stop:    func(t *testing.T, name string) { eng.Stop(name) },
			exited:  func(t *testing.T, name string) { eng.Exit(name, 0) },
			crashed: func(t *testing.T, name string) { eng.Exit(name, 2) },
		}
		fake = scenario(t, b)
	})
	if t.Failed() {
		return
	}
	t.Run("docker", func(t *testing.T) {
		dockertest.Require(t)
		image := dockertest.Image(t, "etcd")
		n := dockertest.Network(t, conformanceSubnet)
		prefix := "df-" + randHex()
		labels := dockertest.Labels(t)
		labels["dockerfake.test"] = prefix
		// Whatever the scenario leaves (a failure half-way): the containers
		// by id, then (cleanups run last first) the volume they used.
		dockertest.Cleanup(t, nil, []string{prefix + "-data"})
		t.Cleanup(func() {
			ids := dockerOut(t, "ps", "-aq", "--filter", "label=dockerfake.test="+prefix)
			for _, id := range strings.Fields(ids) {
				dockerOut(t, "rm", "-f", "-v", id)
			}
		})

		// An image the engine lacks but can pull: the registry test image,
		// pushed to a registry of this test on 127.0.0.1 under a unique
		// tag (removed by that tag: its id is the test image's).
		registry := dockertest.Registry(t)
		pullable := registry + "/dockerfake/registry:" + randHex()
		dockertest.Docker(t, "tag", dockertest.Image(t, "registry"), pullable)
		t.Cleanup(func() { dockerOut(t, "image", "rm", pullable) })
		dockertest.Docker(t, "push", pullable)
		dockertest.Docker(t, "image", "rm", pullable)

		inspect := func(t *testing.T, name string) (string, int) {
			out := dockertest.Docker(t, "inspect", "--format", "{{.State.Status}} {{.RestartCount}}", name)
			st, rc, _ := strings.Cut(out, " ")
			n, _ := strconv.Atoi(rc)
			return st, n
		}
		b := backend{
			host: container.HostFromEnv(), image: image, network: n.Name, prefix: prefix, labels: labels,
			missing: "127.0.0.1:1/marina-test/dockerfake-missing:v0", pullable: pullable, port: freePort(t),
			stop: func(t *testing.T, name string) { dockertest.Docker(t, "stop", "-t", "5", name) },
			exited: func(t *testing.T, name string) {
				dockertest.WaitFor(t, time.Minute, 50*time.Millisecond, name+" exits", func() error {
					if st, _ := inspect(t, name); st != "exited" {
						return fmt.Errorf("it is %s", st)
					}
					return nil
				})
			},
			crashed: func(t *testing.T, name string) {
				dockertest.WaitFor(t, time.Minute, 50*time.Millisecond, name+" is restarted", func() error {
					if _, n := inspect(t, name); n < 1 {
						return fmt.Errorf("restarted %d times", n)
					}
					return nil
				})
			},
		}
		real = scenario(t, b)
	})
	if t.Failed() || t.Skipped() || real == nil {
		return
	}
	if d := diff(fake, real); d != "" {
		t.Errorf("the fake and Docker observed different things (- fake, + docker):\n%s", d)
	}
}

// dockerOut runs the docker CLI for cleanup: errors are logged, not fatal.
func dockerOut(t *testing.T, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), dockertest.CommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil && !strings.Contains(strings.ToLower(string(out)), "no such") {
		t.Logf("cleanup: docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// kind names the class of err as the Docker client sees it.
func kind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case cerrdefs.IsNotFound(err):
		return "not-found"
	case cerrdefs.IsConflict(err):
		return "conflict"
	case cerrdefs.IsInvalidArgument(err):
		return "invalid"
	case cerrdefs.IsPermissionDenied(err):
		return "forbidden"
	case cerrdefs.IsInternal(err):
		return "internal"
	case cerrdefs.IsNotImplemented(err):
		return "not-implemented"
	}
	return "other"
}

// scenario runs the calls and returns one line per observation.
func scenario(t *testing.T, b backend) []string {
	var obs []string
	see := func(format string, args ...any) { obs = append(obs, fmt.Sprintf(format, args...)) }
	bg, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := container.Connect(bg, b.host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	api := c.API()
	name := func(role string) string { return b.prefix + "-" + role }
	labels := func(role string) map[string]string {
		l := map[string]string{"dockerfake.role": role, "dockerfake.group": b.prefix}
		for k, v := range b.labels {
			l[k] = v
		}
		return l
	}
	state := func(step, n string) {
		st, err := c.Get(bg, n)
		switch {
		case err != nil:
			see("%s: Get: %s", step, kind(err))
		case st == nil:
			see("%s: Get: none", step)
		default:
			see("%s: Get: status=%s running=%v ip=%q", step, st.Status, st.Running, st.IPs[b.network])
		}
	}
	id := func(n string) string {
		st, err := c.Get(bg, n)
		if err != nil || st == nil {
			return ""
		}
		return st.ID
	}
	ensure := func(step string, spec container.Spec) container.Outcome {
		out, err := c.Ensure(bg, spec)
		if err != nil {
			see("%s: Ensure: error %s", step, kind(err))
			return out
		}
		see("%s: Ensure: %s %q", step, out.Action, out.Reason)
		return out
	}

	// A container with everything Ensure sets.
	vol := name("data")
	main := container.Spec{
		Name: name("main"), Image: b.image, Labels: labels("main"),
		Cmd:     []string{"--data-dir", "/data", "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://10.232.0.10:2379"},
		Env:     []string{"ETCD_LOG_LEVEL=warn"},
		Network: b.network, IP: "10.232.0.10", Aliases: []string{"main"},
		Ports:  []container.Port{{HostIP: "127.0.0.1", HostPort: b.port, ContainerPort: 2379}},
		Mounts: []container.Mount{{Type: "volume", Source: vol, Target: "/data"}},
		Files:  []container.File{{Path: "/etc/dockerfake/secret.yml", Content: []byte("password: one\n"), Mode: 0o600, UID: 1000, GID: 1001}},
	}
	first := ensure("create", main)
	state("create", main.Name)
	in, err := api.ContainerInspect(bg, main.Name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct := in.Container
	see("create: name=%q image-as-given=%v restart=%s restarts=%d", strings.TrimPrefix(ct.Name, "/"+b.prefix), ct.Config.Image == b.image, ct.HostConfig.RestartPolicy.Name, ct.RestartCount)
	see("create: labels managed=%q spec=%v role=%q", ct.Config.Labels[container.LabelManagedBy], ct.Config.Labels[container.LabelSpec] == first.Spec, ct.Config.Labels["dockerfake.role"])
	ep := ct.NetworkSettings.Networks[b.network]
	see("create: endpoint ip=%s prefix=%d gateway=%s aliases-has-main=%v static=%s", ep.IPAddress, ep.IPPrefixLen, ep.Gateway, contains(ep.Aliases, "main"), ep.IPAMConfig.IPv4Address)
	for _, pb := range ct.NetworkSettings.Ports[network.MustParsePort("2379/tcp")] {
		see("create: 2379/tcp published on %s port-ok=%v", pb.HostIP, pb.HostPort == strconv.Itoa(b.port))
	}
	for _, m := range ct.Mounts {
		see("create: mount %s name-ok=%v -> %s rw=%v", m.Type, m.Name == vol, m.Destination, m.RW)
	}
	see("create: file %s", readBack(bg, api, main.Name, "/etc/dockerfake/secret.yml"))
	see("create: dir %s", readBack(bg, api, main.Name, "/etc/dockerfake"))
	see("create: missing file %s", readBack(bg, api, main.Name, "/etc/dockerfake/nope"))
	if st, err := api.ContainerStatPath(bg, main.Name, client.ContainerStatPathOptions{Path: "/etc/dockerfake/secret.yml"}); err != nil {
		see("create: stat: %s", kind(err))
	} else {
		see("create: stat name=%s size=%d mode=%v", st.Stat.Name, st.Stat.Size, st.Stat.Mode)
	}
	list, err := api.NetworkInspect(bg, b.network, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	see("create: network subnet=%s lists main at %s", list.Network.IPAM.Config[0].Subnet, list.Network.Containers[first.ID].IPv4Address)

	again := ensure("again", main)
	see("again: same id %v", again.ID == first.ID)

	b.stop(t, main.Name)
	state("stopped", main.Name)
	started := ensure("stopped", main)
	see("stopped: same id %v", started.ID == first.ID)
	state("started", main.Name)

	main.Files[0].Content = []byte("password: two\n")
	changed := ensure("changed", main)
	see("changed: new id %v", changed.ID != first.ID && changed.ID != "")
	see("changed: file %s", readBack(bg, api, main.Name, "/etc/dockerfake/secret.yml"))
	state("changed", main.Name)

	bad := main
	bad.Image = b.missing
	_, err = c.Ensure(bg, bad)
	see("missing image: Ensure: %s names-ref=%v", kind(err), err != nil && strings.Contains(err.Error(), b.missing))
	see("missing image: still the same container %v", id(main.Name) == changed.ID)
	state("missing image", main.Name)
	_, err = api.ImageInspect(bg, b.missing)
	see("missing image: ImageInspect: %s", kind(err))

	// What the engine refuses leaves nothing behind.
	twin := container.Spec{Name: name("twin"), Image: b.image, Labels: labels("twin"), Cmd: []string{"--data-dir", "/tmp/twin"}, Network: b.network}
	for _, tc := range []struct {
		step string
		edit func(*container.Spec)
	}{
		{"address in use", func(s *container.Spec) { s.IP = "10.232.0.10" }},
		{"address outside subnet", func(s *container.Spec) { s.IP = "10.99.0.10" }},
		{"port in use", func(s *container.Spec) {
			s.Ports = []container.Port{{HostIP: "127.0.0.1", HostPort: b.port, ContainerPort: 2379}}
		}},
		{"missing network", func(s *container.Spec) { s.Network = name("nonet") }},
	} {
		s := twin
		tc.edit(&s)
		_, err := c.Ensure(bg, s)
		see("%s: Ensure: %s", tc.step, kind(err))
		state(tc.step, s.Name)
	}
	dyn := ensure("dynamic address", twin)
	if st, err := c.Get(bg, twin.Name); err == nil && st != nil {
		see("dynamic address: in subnet %v, not main's %v", strings.HasPrefix(st.IPs[b.network], "10.232."), st.IPs[b.network] != "10.232.0.10")
	}
	_ = dyn

	pulled := ensure("pull", container.Spec{Name: name("pulled"), Image: b.pullable, Labels: labels("pulled"), Network: b.network})
	_, err = api.ImageInspect(bg, b.pullable)
	see("pull: ImageInspect after: %s; created %v", kind(err), pulled.ID != "")

	// Restart policy "no": a process that exits stays exited; Ensure starts it.
	once := container.Spec{Name: name("once"), Image: b.image, Labels: labels("once"), Cmd: []string{"--version"}, Restart: "no"}
	onceOut := ensure("exit", once)
	b.exited(t, once.Name)
	state("exit", once.Name)
	if in, err := api.ContainerInspect(bg, once.Name, client.ContainerInspectOptions{}); err == nil {
		see("exit: code=%d restarts=%d", in.Container.State.ExitCode, in.Container.RestartCount)
	}
	again = ensure("exit", once)
	see("exit: same id %v", again.ID == onceOut.ID)

	// Restart policy "always": the engine restarts a crashed process, and
	// Ensure leaves it alone.
	loop := container.Spec{Name: name("loop"), Image: b.image, Labels: labels("loop"), Cmd: []string{"--no-such-flag"}}
	loopOut := ensure("crash", loop)
	b.crashed(t, loop.Name)
	again = ensure("crash", loop)
	see("crash: same id %v", again.ID == loopOut.ID)
	if st, err := c.Get(bg, loop.Name); err == nil && st != nil {
		see("crash: running %v", st.Running)
	}

	// A container marina did not create, through the raw API.
	foreign := name("foreign")
	res, err := api.ContainerCreate(bg, client.ContainerCreateOptions{Name: foreign, Config: configFor(b.image, labels("foreign"))})
	see("foreign: create %s", kind(err))
	_, err = c.Ensure(bg, container.Spec{Name: foreign, Image: b.image})
	see("foreign: Ensure refused %v", err != nil && strings.Contains(err.Error(), "not created by marina"))
	_, err = c.Remove(bg, foreign)
	see("foreign: Remove refused %v", err != nil)
	_, err = api.ContainerCreate(bg, client.ContainerCreateOptions{Name: foreign, Config: configFor(b.image, labels("foreign"))})
	see("foreign: create again: %s", kind(err))
	_, err = api.ContainerCreate(bg, client.ContainerCreateOptions{Name: "x", Config: configFor(b.image, labels("foreign"))})
	see("foreign: create with a one-letter name: %s", kind(err))
	_, err = api.ContainerCreate(bg, client.ContainerCreateOptions{Name: name("noimage"), Config: configFor(b.missing, labels("foreign"))})
	see("foreign: create without the image: %s", kind(err))
	_, err = api.ContainerStart(bg, res.ID, client.ContainerStartOptions{})
	see("foreign: start %s", kind(err))
	_, err = api.ContainerStart(bg, foreign, client.ContainerStartOptions{})
	see("foreign: start again %s", kind(err))
	_, err = api.ContainerRemove(bg, foreign, client.ContainerRemoveOptions{})
	see("foreign: remove running %s", kind(err))
	_, err = api.ContainerRemove(bg, res.ID, client.ContainerRemoveOptions{Force: true})
	see("foreign: remove forced %s", kind(err))
	_, err = api.ContainerInspect(bg, foreign, client.ContainerInspectOptions{})
	see("foreign: inspect after %s", kind(err))
	_, err = api.ContainerRemove(bg, foreign, client.ContainerRemoveOptions{Force: true})
	see("foreign: remove again %s", kind(err))

	// Labels select.
	got, err := c.List(bg, map[string]string{"dockerfake.group": b.prefix})
	see("list: %s", kind(err))
	for _, s := range got {
		see("list: %s labelled %q", strings.TrimPrefix(s.Name, b.prefix), s.Labels["dockerfake.role"])
	}
	got, err = c.List(bg, map[string]string{"dockerfake.group": b.prefix, "dockerfake.role": "main"})
	see("list main: %s %d", kind(err), len(got))

	// Networks, through the raw API.
	_, err = api.NetworkConnect(bg, "bridge", client.NetworkConnectOptions{Container: main.Name})
	see("connect bridge: %s", kind(err))
	if st, err := c.Get(bg, main.Name); err == nil && st != nil {
		see("connect bridge: address on bridge %v", strings.HasPrefix(st.IPs["bridge"], "172.17."))
	}
	_, err = api.NetworkConnect(bg, "bridge", client.NetworkConnectOptions{Container: main.Name})
	see("connect bridge again: %s", kind(err))
	_, err = api.NetworkDisconnect(bg, "bridge", client.NetworkDisconnectOptions{Container: main.Name})
	see("disconnect bridge: %s", kind(err))
	_, err = api.NetworkDisconnect(bg, "bridge", client.NetworkDisconnectOptions{Container: main.Name})
	see("disconnect bridge again: %s", kind(err))
	_, err = api.NetworkRemove(bg, b.network, client.NetworkRemoveOptions{})
	see("remove network in use: %s", kind(err))
	_, err = api.NetworkInspect(bg, name("nonet"), client.NetworkInspectOptions{})
	see("inspect missing network: %s", kind(err))

	// Volumes and removal.
	err = c.RemoveVolume(bg, vol)
	see("volume in use: %s", kind(err))
	for _, role := range []string{"main", "twin", "pulled", "once", "loop"} {
		removed, err := c.Remove(bg, name(role))
		see("remove %s: %v %s", role, removed, kind(err))
	}
	state("removed", main.Name)
	removed, err := c.Remove(bg, main.Name)
	see("remove again: %v %s", removed, kind(err))
	see("volume free: %s", kind(c.RemoveVolume(bg, vol)))
	see("volume gone: %s", kind(c.RemoveVolume(bg, vol)))
	_, err = api.VolumeRemove(bg, vol, client.VolumeRemoveOptions{})
	see("raw volume remove of a missing volume: %s", kind(err))

	for _, line := range obs {
		t.Log(line)
	}
	return obs
}

// readBack copies path out of container name and describes it.
func readBack(ctx context.Context, api *client.Client, name, path string) string {
	res, err := api.CopyFromContainer(ctx, name, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return kind(err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "bad archive: " + err.Error()
		}
		b, _ := io.ReadAll(tr)
		out = append(out, fmt.Sprintf("%s %o %d:%d %q", h.Name, h.Mode&0o7777, h.Uid, h.Gid, b))
	}
	return fmt.Sprintf("stat=%s %v [%s]", res.Stat.Name, res.Stat.Mode.IsDir(), strings.Join(out, "; "))
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// diff renders the lines of a and b that differ, in order.
func diff(a, b []string) string {
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i++
			j++
		default:
			// Find the next line they share.
			ni, nj := len(a), len(b)
			for x := i; x < len(a) && ni == len(a); x++ {
				for y := j; y < len(b); y++ {
					if a[x] == b[y] {
						ni, nj = x, y
						break
					}
				}
			}
			for ; i < ni; i++ {
				fmt.Fprintf(&out, "- %s\n", a[i])
			}
			for ; j < nj; j++ {
				fmt.Fprintf(&out, "+ %s\n", b[j])
			}
		}
	}
	return out.String()
}

func configFor(image string, labels map[string]string) *ctypes.Config {
	return &ctypes.Config{Image: image, Labels: labels}
}
