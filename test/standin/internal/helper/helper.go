// Package helper is the stand-in for kind's library behind marina's kind
// helper protocol (core/kind.HelperBackend): it creates a kind cluster's
// node containers exactly where kind puts them — same names, labels,
// hostnames, network, published API port, extra mounts and restart policy —
// from one local node image (MARINA_STANDIN_IMAGE) whose init program runs
// a real etcd and kube-apiserver on the control-plane node and nothing on
// the others (see package node: no pod ever runs).
package helper

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/test/standin/internal/kubeadm"
	"github.com/bcollard/marina/test/standin/internal/pki"
	"github.com/bcollard/marina/test/standin/internal/spec"
)

// Environment the helper reads.
const (
	// ImageEnv names the stand-in node image (standin.Build builds it).
	ImageEnv = "MARINA_STANDIN_IMAGE"
	// NetworkEnv is kind's variable for the nodes' Docker network.
	NetworkEnv = "KIND_EXPERIMENTAL_DOCKER_NETWORK"
	// DefaultNetwork is kind's network when NetworkEnv is unset.
	DefaultNetwork = "kind"
)

// Labels of node containers: kind's two, and the stand-in's.
const (
	// RoleLabel is kind's node role label (control-plane or worker).
	RoleLabel = "io.x-k8s.kind.role"
	// StandinLabel marks a node the stand-in created ("1").
	StandinLabel = "dev.marina.standin"
	// ConfigImageLabel records the node image the kind config asked for
	// (the stand-in runs its own).
	ConfigImageLabel = "dev.marina.standin.config-image"
)

// Labels of the node image, set by standin.Build.
const (
	// ImageVersionLabel is the Kubernetes version of the image's
	// kube-apiserver (what kind reads from a node image's /kind/version).
	ImageVersionLabel = "dev.marina.standin.kubernetes-version"
)

// Bounds.
const (
	// DefaultWait bounds the wait for the control plane when the request
	// sets none.
	DefaultWait = 2 * time.Minute
	// dockerTimeout bounds the Docker calls of one operation.
	dockerTimeout = 2 * time.Minute
	pollInterval  = 250 * time.Millisecond
)

// Backend is the stand-in's core/kind.HelperBackend over the Docker Engine
// API.
type Backend struct {
	api     *client.Client
	log     kindlog.Logger
	image   string
	network string
	// networkOverridden is set when the network came from NetworkEnv
	// (kind warns about it when it creates a cluster).
	networkOverridden bool
}

var _ kind.HelperBackend = (*Backend)(nil)

// New returns the Backend for ServeHelperWith: Docker from the environment
// (DOCKER_HOST, as the docker CLI kind runs would use), the node image from
// MARINA_STANDIN_IMAGE (only Create needs it), the network from
// KIND_EXPERIMENTAL_DOCKER_NETWORK.
func New(logger kindlog.Logger) (kind.HelperBackend, func(), error) {
	image := os.Getenv(ImageEnv)
	api, err := client.New(client.FromEnv)
	if err != nil {
		return nil, nil, fmt.Errorf("docker endpoint from the environment (DOCKER_HOST): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = api.Close()
		return nil, nil, fmt.Errorf("the Docker engine at %s does not answer: %w", api.DaemonHost(), err)
	}
	b := &Backend{api: api, log: logger, image: image, network: DefaultNetwork}
	if n := os.Getenv(NetworkEnv); n != "" {
		b.network, b.networkOverridden = n, true
	}
	return b, func() { _ = api.Close() }, nil
}

// node is one node container to create.
type node struct {
	name string
	role string
	cfg  v1alpha4.Node
	// files are copied in before the container starts.
	files map[string][]byte
	id    string
}

// Create implements kind.HelperBackend the way kind creates a cluster: it
// loads the config (LoadConfig), refuses a name that has nodes, renders
// kind's kubeadm config with the patches, issues the PKI, creates and
// starts the node containers concurrently, and waits until the control
// plane's init is ready (its API server answers and the Nodes and CoreDNS
// exist). Like kind, whose kubeadm init waits for the API server even when
// no wait is asked for, it always waits: at most wait, or DefaultWait when
// wait is 0. A failed Create removes the containers it made unless retain.
func (b *Backend) Create(in *v1alpha4.Cluster, retain bool, wait time.Duration) (err error) {
	bound := wait
	if bound <= 0 {
		bound = DefaultWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound+2*dockerTimeout)
	defer cancel()
	st := &status{log: b.log}
	defer func() { st.end(err == nil) }()

	if b.image == "" {
		return fmt.Errorf("%s is not set: the kind stand-in needs its node image (build it with standin.Build in a test, and pass Paths.Env to the process running the helper)", ImageEnv)
	}
	raw, err := encodeConfig(in)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(raw)
	if err != nil {
		return err
	}
	b.log.V(0).Infof("Creating cluster %q ...", cfg.Name)
	if b.networkOverridden {
		b.log.Warn("Overriding docker network due to KIND_EXPERIMENTAL_DOCKER_NETWORK")
		b.log.Warn("Here be dragons! This is not supported currently.")
	}
	if nodes, err := b.containers(ctx, cfg.Name); err != nil {
		return err
	} else if len(nodes) > 0 {
		return fmt.Errorf("node(s) already exist for a cluster with the name %q", cfg.Name)
	}

	st.start(fmt.Sprintf("Ensuring node image (%s) 🖼", b.image))
	img, err := b.api.ImageInspect(ctx, b.image)
	if err != nil {
		return fmt.Errorf("node image %s (%s) is not on the Docker host %s: %w; build it with standin.Build", b.image, ImageEnv, b.api.DaemonHost(), err)
	}
	version := ""
	if img.Config != nil {
		version = img.Config.Labels[ImageVersionLabel]
	}
	if version == "" {
		return fmt.Errorf("node image %s has no %s label: it was not built by standin.Build; rebuild it", b.image, ImageVersionLabel)
	}
	for _, n := range cfg.Nodes {
		if n.Image != b.image {
			b.log.V(1).Infof("node image %s of the config is replaced by the stand-in's %s", n.Image, b.image)
		}
	}
	if _, err := b.api.NetworkInspect(ctx, b.network, client.NetworkInspectOptions{}); err != nil {
		return fmt.Errorf("failed to ensure docker network: docker network %s: %w; kind would create it, the stand-in does not (marina up creates it; tests create it with dockertest.Network)", b.network, err)
	}

	nodes, err := b.plan(cfg, version, img.Architecture)
	if err != nil {
		st.start("Writing configuration 📜")
		return err
	}

	st.start("Preparing nodes " + strings.Repeat("📦 ", len(nodes)))
	defer func() {
		if err == nil {
			return
		}
		if retain {
			b.log.V(0).Infof("the node containers are kept (retain)")
			return
		}
		cctx, ccancel := context.WithTimeout(context.Background(), dockerTimeout)
		defer ccancel()
		for _, n := range nodes {
			if n.id != "" {
				_, _ = b.api.ContainerRemove(cctx, n.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}()
	if err := b.createNodes(ctx, cfg, nodes); err != nil {
		return err
	}
	st.start("Writing configuration 📜")
	st.start("Starting control-plane 🕹️")
	b.log.V(0).Infof("the stand-in's control plane is a real etcd and kube-apiserver; no kubelet, CNI or StorageClass: pods never run")
	var cp *node
	for _, n := range nodes {
		if n.role == spec.RoleControlPlane {
			cp = n
		}
	}
	begin := time.Now()
	if err := b.waitReady(ctx, cp, bound); err != nil {
		return err
	}
	if len(nodes) > 1 {
		st.start("Joining worker nodes 🚜")
	}
	if wait > 0 {
		st.start(fmt.Sprintf("Waiting ≤ %s for control-plane = Ready ⏳", wait))
		st.end(true)
		b.log.V(0).Infof(" • Ready after %s 💚", time.Since(begin).Round(time.Second))
	}
	return nil
}

// plan computes every node's container and files: kind's kubeadm config
// with the config's patches applied, the PKI, the node specs.
func (b *Backend) plan(cfg *v1alpha4.Cluster, version, arch string) ([]*node, error) {
	names := nodeNames(cfg)
	res, err := kubeadm.Configure(kubeadm.Input{Cluster: cfg, Names: names, KubernetesVersion: version, Arch: arch})
	if err != nil {
		return nil, err
	}
	for _, u := range res.Unmatched {
		b.log.Warnf("kubeadm config patch %s matches no document of kind's %s config: ignored, as kind ignores it", u, kubeadm.APIVersion)
	}
	var cpName string
	var specNodes []spec.Node
	for _, n := range res.Nodes {
		if n.Role == spec.RoleControlPlane {
			cpName = n.Name
		}
		specNodes = append(specNodes, spec.Node{Name: n.Name, Role: n.Role, Labels: n.Labels, Taints: n.Taints, ProviderID: n.ProviderID})
	}
	dns, ips, err := res.APIServerSANs(cpName)
	if err != nil {
		return nil, err
	}
	files, err := pki.Generate(pki.Cluster{
		Name:     cfg.Name,
		Server:   pki.ServerURL(cpName, spec.APIServerPort),
		DNSNames: dns,
		IPs:      ips,
	}, time.Now())
	if err != nil {
		return nil, err
	}
	var nodes []*node
	for i, n := range res.Nodes {
		s := spec.Spec{Cluster: cfg.Name, Self: n.Name, Role: n.Role, Nodes: specNodes,
			ServiceSubnet: res.ServiceSubnet, DNSDomain: res.DNSDomain}
		js, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("node spec of %s: %w", n.Name, err)
		}
		nd := &node{name: n.Name, role: n.Role, cfg: cfg.Nodes[i], files: map[string][]byte{spec.File: js}}
		if n.Role == spec.RoleControlPlane {
			p := func(f string) string { return path.Join(spec.PKIDir, f) }
			nd.files[p(spec.CACert)] = files.CACert
			nd.files[p(spec.APIServerCert)] = files.APIServerCert
			nd.files[p(spec.APIServerKey)] = files.APIServerKey
			nd.files[p(spec.SAKey)] = files.SAKey
			nd.files[p(spec.SAPub)] = files.SAPub
			nd.files[spec.AdminKubeconfig] = files.AdminConf
			nd.files[spec.SuperAdminKubeconfig] = files.SuperAdminConf
		}
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

// createNodes creates, fills and starts every node container concurrently
// (as kind does); it returns the first error. Created containers' ids are
// recorded in nodes for the caller's cleanup.
func (b *Backend) createNodes(ctx context.Context, cfg *v1alpha4.Cluster, nodes []*node) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.createNode(ctx, cfg, n); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (b *Backend) createNode(ctx context.Context, cfg *v1alpha4.Cluster, n *node) error {
	ports := slices.Clone(n.cfg.ExtraPortMappings)
	if n.role == spec.RoleControlPlane {
		ports = append(ports, v1alpha4.PortMapping{
			ListenAddress: cfg.Networking.APIServerAddress,
			HostPort:      cfg.Networking.APIServerPort,
			ContainerPort: spec.APIServerPort,
		})
	}
	exposed, bindings, err := portBindings(ports)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	binds, err := mountBindings(n.cfg.ExtraMounts)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	var env []string
	if n.role == spec.RoleControlPlane {
		env = append(env, "KUBECONFIG="+spec.AdminKubeconfig)
	}
	noInit := false
	res, err := b.api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: n.name,
		Config: &container.Config{
			Hostname:     n.name, // kind: hostname = container name
			Image:        b.image,
			Tty:          true,
			Env:          env,
			ExposedPorts: exposed,
			Labels: map[string]string{
				kind.ClusterLabel: cfg.Name,
				RoleLabel:         n.role,
				StandinLabel:      "1",
				ConfigImageLabel:  n.cfg.Image,
			},
			// kind keeps /var (etcd's data, pods, logs) in an anonymous
			// volume, which `docker rm -v` removes.
			Volumes: map[string]struct{}{"/var": {}},
		},
		HostConfig: &container.HostConfig{
			Binds:        binds,
			PortBindings: bindings,
			NetworkMode:  container.NetworkMode(b.network),
			// kind: restart once, which in practice means on reboots.
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: 1},
			Init:          &noInit,
			Tmpfs:         map[string]string{"/tmp": "", "/run": ""},
		},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{b.network: {}}},
	})
	if err != nil {
		return fmt.Errorf("failed to create node %s: %w", n.name, err)
	}
	n.id = res.ID
	archive, err := tarFiles(n.files)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	if _, err := b.api.CopyToContainer(ctx, n.id, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(archive)}); err != nil {
		return fmt.Errorf("failed to create node %s: copying its files in: %w", n.name, err)
	}
	if _, err := b.api.ContainerStart(ctx, n.id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("failed to start node %s: %w", n.name, err)
	}
	return nil
}

// portBindings converts port mappings as kind does (generatePortMappings):
// no listen address means 0.0.0.0, no protocol TCP, a host port of 0 or
// less a random one.
func portBindings(pms []v1alpha4.PortMapping) (network.PortSet, network.PortMap, error) {
	exposed, bindings := network.PortSet{}, network.PortMap{}
	for _, pm := range pms {
		addr := pm.ListenAddress
		if addr == "" {
			addr = "0.0.0.0"
		}
		hostIP, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("port mapping listen address %q is not an IP address", pm.ListenAddress)
		}
		proto := strings.ToLower(string(pm.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		switch proto {
		case "tcp", "udp", "sctp":
		default:
			return nil, nil, fmt.Errorf("unknown port mapping protocol: %v", pm.Protocol)
		}
		port, err := network.ParsePort(strconv.Itoa(int(pm.ContainerPort)) + "/" + proto)
		if err != nil {
			return nil, nil, fmt.Errorf("port mapping %d/%s: %w", pm.ContainerPort, proto, err)
		}
		hostPort := ""
		if pm.HostPort > 0 {
			hostPort = strconv.Itoa(int(pm.HostPort))
		}
		exposed[port] = struct{}{}
		bindings[port] = append(bindings[port], network.PortBinding{HostIP: hostIP, HostPort: hostPort})
	}
	return exposed, bindings, nil
}

// mountBindings converts extra mounts to Docker binds as kind does
// (generateMountBindings): host:container[:ro,Z,rshared|rslave], relative
// host paths made absolute. Docker creates a missing host path as a
// directory, as it does for kind.
func mountBindings(mounts []v1alpha4.Mount) ([]string, error) {
	var binds []string
	for _, m := range mounts {
		host := m.HostPath
		if !filepath.IsAbs(host) {
			abs, err := filepath.Abs(host)
			if err != nil {
				return nil, fmt.Errorf("unable to resolve absolute path for hostPath: %q: %w", host, err)
			}
			host = abs
		}
		bind := host + ":" + m.ContainerPath
		var attrs []string
		if m.Readonly {
			attrs = append(attrs, "ro")
		}
		if m.SelinuxRelabel {
			attrs = append(attrs, "Z")
		}
		switch m.Propagation {
		case v1alpha4.MountPropagationBidirectional:
			attrs = append(attrs, "rshared")
		case v1alpha4.MountPropagationHostToContainer:
			attrs = append(attrs, "rslave")
		}
		if len(attrs) > 0 {
			bind += ":" + strings.Join(attrs, ",")
		}
		binds = append(binds, bind)
	}
	return binds, nil
}

// waitReady waits, at most bound, until the control plane's init wrote
// spec.ReadyFile; a node that stops meanwhile fails the wait with the end
// of its log.
func (b *Backend) waitReady(ctx context.Context, cp *node, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		ins, err := b.api.ContainerInspect(ctx, cp.id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect node %s: %w", cp.name, err)
		}
		if s := ins.Container.State; s == nil || !s.Running || s.Restarting {
			state := "gone"
			if s != nil {
				state = fmt.Sprintf("%s (exit code %d)", s.Status, s.ExitCode)
			}
			return fmt.Errorf("failed to init node with kubeadm: the control-plane node %s stopped: %s; its last output:\n%s", cp.name, state, b.logTail(cp.id))
		}
		if _, err := b.readFile(ctx, cp.id, spec.ReadyFile); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failed to init node with kubeadm: the control plane of %s was not ready after %s; its last output:\n%s", cp.name, bound, b.logTail(cp.id))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// logTail is the end of a container's output.
func (b *Backend) logTail(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := b.api.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "40"})
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer r.Close()
	out, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	return strings.TrimRight(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n")
}

// readFile reads one regular file from a container (Docker's archive API,
// which also works on stopped containers).
func (b *Backend) readFile(ctx context.Context, id, file string) ([]byte, error) {
	res, err := b.api.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: file})
	if err != nil {
		return nil, err
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if h.Typeflag == tar.TypeReg {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}

// Delete implements kind.HelperBackend: `docker rm -f -v` of every node.
func (b *Backend) Delete(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	nodes, err := b.containers(ctx, name)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		if _, err := b.api.ContainerRemove(ctx, n.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("node %s: %w", containerName(n), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to delete nodes: %w", errors.Join(errs...))
	}
	return nil
}

// List implements kind.HelperBackend: the distinct cluster labels of all
// containers, running or not.
func (b *Backend) List() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	res, err := b.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", kind.ClusterLabel)})
	if err != nil {
		return nil, fmt.Errorf("failed to list clusters: %w", err)
	}
	var names []string
	for _, c := range res.Items {
		if n := c.Labels[kind.ClusterLabel]; n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Nodes implements kind.HelperBackend.
func (b *Backend) Nodes(name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	nodes, err := b.containers(ctx, name)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, containerName(n))
	}
	slices.Sort(names)
	return names, nil
}

// Kubeconfig implements kind.HelperBackend as kind does: admin.conf read
// back from the control-plane node, its entries renamed kind-NAME, and,
// unless internal, the server set to the API server's host binding as
// Docker reports it.
func (b *Backend) Kubeconfig(name string, internal bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	nodes, err := b.containers(ctx, name)
	if err != nil {
		return "", err
	}
	var cps []container.Summary
	for _, n := range nodes {
		if n.Labels[RoleLabel] == spec.RoleControlPlane {
			cps = append(cps, n)
		}
	}
	if len(cps) == 0 {
		return "", fmt.Errorf("could not locate any control plane nodes for cluster named '%s'. Use the --name option to select a different cluster", name)
	}
	slices.SortFunc(cps, func(a, b container.Summary) int { return strings.Compare(containerName(a), containerName(b)) })
	cp := cps[0]
	raw, err := b.readFile(ctx, cp.ID, spec.AdminKubeconfig)
	if err != nil {
		return "", fmt.Errorf("failed to get cluster internal kubeconfig: %w", err)
	}
	server := ""
	if !internal {
		ins, err := b.api.ContainerInspect(ctx, cp.ID, client.ContainerInspectOptions{})
		if err != nil {
			return "", fmt.Errorf("failed to get api server port: %w", err)
		}
		server, err = apiEndpoint(ins.Container)
		if err != nil {
			return "", err
		}
	}
	return kindKubeconfig(raw, name, server)
}

// apiEndpoint is https://<host IP>:<host port> of the node's 6443/tcp
// binding as Docker reports it (kind's GetAPIServerEndpoint).
func apiEndpoint(c container.InspectResponse) (string, error) {
	port := network.MustParsePort(strconv.Itoa(spec.APIServerPort) + "/tcp")
	var bs []network.PortBinding
	if c.NetworkSettings != nil {
		bs = c.NetworkSettings.Ports[port]
	}
	if len(bs) == 0 {
		return "", fmt.Errorf("failed to get api server port: node %s publishes no %s (is it running?)", strings.TrimPrefix(c.Name, "/"), port)
	}
	host := "0.0.0.0"
	if bs[0].HostIP.IsValid() {
		host = bs[0].HostIP.String()
	}
	p, err := strconv.Atoi(bs[0].HostPort)
	if err != nil {
		return "", fmt.Errorf("failed to get api server port: %q: %w", bs[0].HostPort, err)
	}
	return pki.ServerURL(host, p), nil
}

// kindKubeconfig is kind's KINDFromRawKubeadm: one cluster, user and
// context, all named kind-NAME, and the server replaced when server is set.
func kindKubeconfig(raw []byte, name, server string) (string, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return "", fmt.Errorf("failed to get cluster internal kubeconfig: %w", err)
	}
	if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 || len(cfg.Contexts) != 1 {
		return "", fmt.Errorf("kubeadm KUBECONFIG should have one cluster, user and context, but read %d, %d, %d", len(cfg.Clusters), len(cfg.AuthInfos), len(cfg.Contexts))
	}
	key := "kind-" + name
	for k, v := range cfg.Clusters {
		delete(cfg.Clusters, k)
		if server != "" {
			v.Server = server
		}
		cfg.Clusters[key] = v
	}
	for k, v := range cfg.AuthInfos {
		delete(cfg.AuthInfos, k)
		cfg.AuthInfos[key] = v
	}
	for k, v := range cfg.Contexts {
		delete(cfg.Contexts, k)
		v.Cluster, v.AuthInfo = key, key
		cfg.Contexts[key] = v
	}
	cfg.CurrentContext = key
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", fmt.Errorf("encode the kubeconfig of %s: %w", name, err)
	}
	return string(out), nil
}

// containers returns the node containers of cluster name.
func (b *Backend) containers(ctx context.Context, name string) ([]container.Summary, error) {
	res, err := b.api.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", kind.ClusterLabel+"="+name)})
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}
	return res.Items, nil
}

func containerName(c container.Summary) string {
	if len(c.Names) == 0 {
		return c.ID
	}
	return strings.TrimPrefix(c.Names[0], "/")
}

// tarFiles archives files (absolute paths) with their parent directories.
func tarFiles(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		var parents []string
		for d := path.Dir(p); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		mode := int64(0o644)
		if strings.HasSuffix(p, ".key") || strings.HasSuffix(p, ".conf") {
			mode = 0o600
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: mode, Size: int64(len(files[p]))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// status prints kind's status lines (kind's cli.Status without a
// terminal): " • step  ..." when a step starts, " ✓ step" or " ✗ step" when
// it ends.
type status struct {
	log kindlog.Logger
	cur string
}

func (s *status) start(step string) {
	s.end(true)
	s.cur = step
	s.log.V(0).Infof(" • %s  ...", step)
}

func (s *status) end(ok bool) {
	if s.cur == "" {
		return
	}
	mark := "✓"
	if !ok {
		mark = "✗"
	}
	s.log.V(0).Infof(" %s %s", mark, s.cur)
	s.cur = ""
}
