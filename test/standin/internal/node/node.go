// Package node is the stand-in node's init program (PID 1 of every node
// container).
//
// A worker node runs nothing: it waits for SIGTERM. The control-plane node
// runs etcd and kube-apiserver, stops both on SIGTERM, and exits non-zero
// when either exits on its own. Once the API server answers it does what
// kubeadm and kind would have done that marina relies on — kubeadm's
// kubeadm:cluster-admins binding, the CoreDNS addon (ConfigMap with kubeadm's
// Corefile, Deployment, Service, RBAC), a Node object per node with the
// labels and taints kubeadm, kind and the kubelet would set — writes
// spec.ReadyFile, and then plays the kubelet and the controller-manager for
// workload STATUS only.
//
// NO POD EVER RUNS: there is no kubelet and no container runtime. The status
// loop reports every Deployment, DaemonSet and StatefulSet as if its pods
// were running (ready, available, updated, observedGeneration = generation)
// without creating a ReplicaSet or a Pod, and creates the "default"
// ServiceAccount of every namespace. Nothing else of the controller-manager
// runs: no garbage collection, no namespace finalization, no Endpoints.
package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/test/standin/internal/spec"
)

// Bounds of the control plane's start.
const (
	etcdReadyTimeout = 60 * time.Second
	apiReadyTimeout  = 3 * time.Minute
	setupTimeout     = 2 * time.Minute
	stopTimeout      = 10 * time.Second
	// statusInterval is how often the status loop converges workloads.
	statusInterval = time.Second
)

// Etcd's addresses inside the node (loopback only, no TLS).
const (
	etcdClientURL = "http://127.0.0.1:2379"
	etcdPeerURL   = "http://127.0.0.1:2380"
)

// Run runs the node described by s until ctx ends (nil) or, on the control
// plane, until etcd or the API server exits or the setup fails (an error).
func Run(ctx context.Context, s *spec.Spec, logger *log.Logger) error {
	logger.Printf("node %s of cluster %s (%s): a marina stand-in for a kind node. "+
		"It runs no kubelet and no container runtime: pods are never started; "+
		"the control plane reports workload status as if they were.", s.Self, s.Cluster, s.Role)
	if s.Role != spec.RoleControlPlane {
		<-ctx.Done()
		logger.Printf("stopping")
		return nil
	}
	cp := &controlPlane{spec: s, log: logger}
	return cp.run(ctx)
}

// controlPlane is the control-plane node's supervisor.
type controlPlane struct {
	spec  *spec.Spec
	log   *log.Logger
	procs []*proc
}

func (c *controlPlane) run(parent context.Context) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	defer c.stopAll()

	// A restarted node (docker restart, a reboot) keeps its files: it is
	// ready again only once the API server is.
	if err := os.Remove(spec.ReadyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the previous run's %s: %w", spec.ReadyFile, err)
	}
	ip, err := ownIPv4()
	if err != nil {
		return err
	}
	etcd, err := c.start(ctx, cancel, "etcd", spec.Etcd, []string{
		"--name=" + c.spec.Self,
		"--data-dir=" + spec.EtcdDataDir,
		"--listen-client-urls=" + etcdClientURL,
		"--advertise-client-urls=" + etcdClientURL,
		"--listen-peer-urls=" + etcdPeerURL,
		"--initial-advertise-peer-urls=" + etcdPeerURL,
		"--initial-cluster=" + c.spec.Self + "=" + etcdPeerURL,
		// A stand-in cluster lives for a test; fsync is most of etcd's
		// write latency.
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, etcdReadyTimeout, "etcd "+etcdClientURL+"/health", func(ctx context.Context) error {
		return etcdHealthy(ctx)
	}); err != nil {
		return c.failure(ctx, err)
	}
	c.log.Printf("etcd (pid %d) is healthy", etcd.cmd.Process.Pid)

	pki := func(f string) string { return filepath.Join(spec.PKIDir, f) }
	api, err := c.start(ctx, cancel, "kube-apiserver", spec.KubeAPIServer, []string{
		"--etcd-servers=" + etcdClientURL,
		"--bind-address=0.0.0.0",
		"--advertise-address=" + ip.String(),
		"--secure-port=" + strconv.Itoa(spec.APIServerPort),
		"--tls-cert-file=" + pki(spec.APIServerCert),
		"--tls-private-key-file=" + pki(spec.APIServerKey),
		"--client-ca-file=" + pki(spec.CACert),
		"--service-account-issuer=https://kubernetes.default.svc." + c.spec.DNSDomain,
		"--service-account-key-file=" + pki(spec.SAPub),
		"--service-account-signing-key-file=" + pki(spec.SAKey),
		"--service-cluster-ip-range=" + c.spec.ServiceSubnet,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
	})
	if err != nil {
		return err
	}
	cs, err := c.client()
	if err != nil {
		return err
	}
	if err := waitFor(ctx, apiReadyTimeout, "kube-apiserver /readyz", func(ctx context.Context) error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w (%s)", err, body)
		}
		return nil
	}); err != nil {
		return c.failure(ctx, err)
	}
	c.log.Printf("kube-apiserver (pid %d) is ready on %s:%d", api.cmd.Process.Pid, ip, spec.APIServerPort)

	setupCtx, cancelSetup := context.WithTimeout(ctx, setupTimeout)
	err = setup(setupCtx, cs, c.spec, c.log)
	cancelSetup()
	if err != nil {
		return c.failure(ctx, fmt.Errorf("playing kubeadm: %w", err))
	}
	if err := os.WriteFile(spec.ReadyFile, []byte("ready\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", spec.ReadyFile, err)
	}
	c.log.Printf("ready: Nodes and the CoreDNS addon exist; reporting workload status from now on (no pod runs)")

	statusLoop(ctx, cs, c.log)
	return c.failure(ctx, nil)
}

// failure returns why the control plane stops: the process that exited,
// else err (nil when ctx ended because the node is being stopped).
func (c *controlPlane) failure(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if ctx.Err() != nil {
		c.log.Printf("stopping")
		return nil
	}
	return err
}

// client connects with super-admin.conf to the API server on loopback
// (its certificate always covers localhost).
func (c *controlPlane) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.SuperAdminKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", spec.SuperAdminKubeconfig, err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://127.0.0.1:" + strconv.Itoa(spec.APIServerPort)
	cfg.TLSClientConfig.ServerName = "localhost"
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "marina-standin-node"
	return kubernetes.NewForConfig(cfg)
}

// proc is a supervised child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start starts a child whose output goes to ours, line-prefixed with its
// name; its exit cancels ctx with the reason.
func (c *controlPlane) start(ctx context.Context, cancel context.CancelCauseFunc, name, path string, args []string) (*proc, error) {
	cmd := exec.Command(path, args...)
	w := prefixWriter(os.Stdout, name+": ")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	c.procs = append(c.procs, p)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		if ctx.Err() == nil {
			cancel(fmt.Errorf("%s exited: %v", name, p.err))
		}
	}()
	return p, nil
}

// stopAll stops the children, the last started first: SIGTERM, then
// SIGKILL after stopTimeout.
func (c *controlPlane) stopAll() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			c.log.Printf("%s did not stop within %s; killing it", p.name, stopTimeout)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// waitFor calls check (each call bounded to 5 s) every 250 ms until it
// succeeds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready after %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func etcdHealthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdClientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

// ownIPv4 is the node's address on its Docker network (the API server's
// advertise address, as kubeadm's node-ip).
func ownIPv4() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagLoopback != 0 || iface.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("the node has no IPv4 address: is the container attached to its Docker network?")
}

// lineWriter writes each complete line to w with a prefix.
type lineWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func prefixWriter(w io.Writer, prefix string) io.Writer { return &lineWriter{w: w, prefix: prefix} }

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i]); err != nil {
			return len(b), err
		}
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}
