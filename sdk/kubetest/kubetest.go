package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// StartTimeout bounds how long Start waits for etcd and the API server (and its
// default and kube-system namespaces) to be ready. Ready takes ~3–5 s here; the
// margin is for a loaded 2-core machine.
const StartTimeout = 60 * time.Second

// CommandTimeout bounds every Kubectl call.
const CommandTimeout = 2 * time.Minute

// ServiceCIDR is the cluster's --service-cluster-ip-range.
const ServiceCIDR = "10.96.0.0/16"

// startAttempts is how often Start tries new ports when another process took one.
const startAttempts = 3

// Cluster is an etcd and a kube-apiserver started for one test by Start. The
// fields are set when Start returns; do not change them.
type Cluster struct {
	// Kubeconfig is an admin kubeconfig: server https://127.0.0.1:<port>, the CA
	// of the API server's self-signed serving certificate, and a bearer token of
	// user marina-test-admin in group system:masters.
	Kubeconfig []byte
	// KubeconfigPath is a file (mode 0600) holding Kubeconfig.
	KubeconfigPath string
	// Config is the client configuration read from Kubeconfig. Copy it
	// (rest.CopyConfig) before changing it.
	Config *rest.Config
	// Host is the API server URL, https://127.0.0.1:<port>.
	Host string
	// Token is the admin bearer token.
	Token string
	// EtcdURL is etcd's client URL, http://127.0.0.1:<port> (no TLS, no auth).
	EtcdURL string
	// Dir is the cluster's directory (inside the test's t.TempDir): etcd data,
	// certificates, keys, the token file, the kubeconfig and the processes' logs
	// (etcd.log, kube-apiserver.log).
	Dir string

	assets    Assets
	etcd      *process
	apiserver *process
}

// Options change how StartWithOptions starts a cluster. The zero value is what
// Start does.
type Options struct {
	// SecurePort is the API server's --secure-port on 127.0.0.1; 0 picks a free
	// port. A chosen port is used as is (a stand-in for a kind cluster can listen
	// on the cluster's API host port): if it is taken, the start fails instead of
	// moving to another port.
	SecurePort int
}

// Start starts etcd and kube-apiserver on free 127.0.0.1 ports, waits until the
// API server is ready and its default and kube-system namespaces exist, and
// registers cleanup that stops both processes (SIGTERM, then SIGKILL) and fails the
// test if a process remains. Missing binaries fail the test with the command that
// builds them (see RequireAssets).
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWithOptions(t, Options{})
}

// StartWithOptions is Start with options, e.g. a chosen API server port.
func StartWithOptions(t testing.TB, opts Options) *Cluster {
	t.Helper()
	a := RequireAssets(t)
	c, err := start(t, a, opts)
	if err != nil {
		t.Fatalf("kubetest.Start: %v", err)
	}
	return c
}

// start starts a cluster from a and opts; cleanup is registered on t even when
// it fails.
func start(t testing.TB, a Assets, opts Options) (*Cluster, error) {
	if opts.SecurePort < 0 || opts.SecurePort > 65535 {
		return nil, fmt.Errorf("Options.SecurePort %d is not a TCP port; use 1-65535, or 0 for a free port", opts.SecurePort)
	}
	begin := time.Now()
	c := &Cluster{Dir: t.TempDir(), assets: a}
	deadline := begin.Add(StartTimeout)
	if err := c.startEtcd(t, deadline); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(t, opts.SecurePort, deadline); err != nil {
		return nil, err
	}
	t.Logf("kubetest: kube-apiserver ready at %s in %s (etcd pid %d, kube-apiserver pid %d, logs in %s)",
		c.Host, time.Since(begin).Round(time.Millisecond), c.etcd.pid, c.apiserver.pid, c.Dir)
	return c, nil
}

// track registers the cleanup of p: stop it, fail the test if anything of it
// remains, and log the tail of its log when the test failed.
func track(t testing.TB, p *process) {
	t.Cleanup(func() {
		if err := p.stop(StopTimeout); err != nil {
			t.Errorf("kubetest cleanup: %v", err)
		}
		if t.Failed() {
			t.Logf("last lines of the %s log (%s):\n%s", p.name, p.logPath, p.logTail(40))
		}
	})
}

// startError explains a process that did not become ready.
func startError(p *process, what string, err error) error {
	return fmt.Errorf("%s (pid %d) %s: %v\nlast lines of %s:\n%s", p.name, p.pid, what, err, p.logPath, p.logTail(30))
}

func (c *Cluster) startEtcd(t testing.TB, deadline time.Time) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		data := filepath.Join(c.Dir, "etcd")
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=marina-test",
			"--data-dir=" + data,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=marina-test=" + peer,
			"--initial-cluster-state=new",
			// A test cluster lives seconds; losing it on power loss is fine, and
			// fsync is most of etcd's write latency.
			"--unsafe-no-fsync",
			"--log-level=warn",
		}
		p, err := startProcess("etcd", c.assets.Etcd, args, c.Dir, c.logPath("etcd", attempt))
		if err != nil {
			return err
		}
		track(t, p)
		err = poll(p, deadline, func(ctx context.Context) error { return etcdHealthy(ctx, client) })
		if err == nil {
			c.etcd, c.EtcdURL = p, client
			return nil
		}
		if exited, _ := p.exited(); exited && p.addressInUse() && attempt < startAttempts {
			t.Logf("kubetest: etcd could not bind %s or %s (taken meanwhile); retrying with other ports", client, peer)
			continue
		}
		return startError(p, "not healthy at "+client, err)
	}
}

// etcdHealthy asks etcd's /health endpoint.
func etcdHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"health":"true"`)) {
		return fmt.Errorf("GET %s/health: %s %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// startAPIServer starts kube-apiserver on port, or on a free port when port is 0.
func (c *Cluster) startAPIServer(t testing.TB, port int, deadline time.Time) error {
	saKey, saPub := filepath.Join(c.Dir, "sa.key"), filepath.Join(c.Dir, "sa.pub")
	if err := writeServiceAccountKeys(saKey, saPub); err != nil {
		return err
	}
	tokens := filepath.Join(c.Dir, "tokens.csv")
	token, err := writeTokenFile(tokens)
	if err != nil {
		return fmt.Errorf("token file %s: %w", tokens, err)
	}
	certDir := filepath.Join(c.Dir, "pki")
	for attempt := 1; ; attempt++ {
		ports := []int{port}
		if port == 0 {
			if ports, err = freePorts(1); err != nil {
				return err
			}
		}
		args := []string{
			"--etcd-servers=" + c.EtcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			// No --tls-cert-file: the API server writes a self-signed serving
			// certificate (for 127.0.0.1, with its CA) into --cert-dir.
			"--cert-dir=" + certDir,
			"--token-auth-file=" + tokens,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + saPub,
			"--service-account-signing-key-file=" + saKey,
			"--service-cluster-ip-range=" + ServiceCIDR,
			// No kubernetes Service endpoints to maintain: nothing but the test
			// talks to this API server, and 127.0.0.1 is not a routable endpoint.
			"--endpoint-reconciler-type=none",
			"--authorization-mode=RBAC",
			"--allow-privileged=true",
			"--profiling=false",
		}
		p, err := startProcess("kube-apiserver", c.assets.KubeAPIServer, args, c.Dir, c.logPath("kube-apiserver", attempt))
		if err != nil {
			return err
		}
		track(t, p)
		err = c.waitAPIServer(p, ports[0], token, certDir, deadline)
		if err == nil {
			c.apiserver = p
			return nil
		}
		if exited, _ := p.exited(); exited && p.addressInUse() {
			if port != 0 {
				return startError(p, fmt.Sprintf("could not bind the chosen port 127.0.0.1:%d (Options.SecurePort): "+
					"it is taken; free it or choose another", port), err)
			}
			if attempt < startAttempts {
				t.Logf("kubetest: kube-apiserver could not bind port %d (taken meanwhile); retrying with another", ports[0])
				continue
			}
		}
		return startError(p, "not ready", err)
	}
}

// waitAPIServer waits for the serving certificate, writes the kubeconfig, then
// polls /readyz and the default and kube-system namespaces.
func (c *Cluster) waitAPIServer(p *process, port int, token, certDir string, deadline time.Time) error {
	var ca []byte
	certPath := filepath.Join(certDir, "apiserver.crt")
	if err := poll(p, deadline, func(context.Context) (err error) {
		ca, err = servingCA(certPath)
		return err
	}); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"marina-test": {Server: host, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{AdminUser: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"marina-test": {Cluster: "marina-test", AuthInfo: AdminUser}},
		CurrentContext: "marina-test",
	})
	if err != nil {
		return fmt.Errorf("render kubeconfig: %w", err)
	}
	path := filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("read back kubeconfig %s: %w", path, err)
	}
	// Tests create objects in bursts; client-go's default 5 QPS would slow them.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "marina-kubetest"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for %s: %w", host, err)
	}
	if err := poll(p, deadline, func(ctx context.Context) error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("GET %s/readyz: %w (%s)", host, err, bytes.TrimSpace(body))
		}
		if s := strings.TrimSpace(string(body)); s != "ok" {
			return fmt.Errorf("GET %s/readyz: %q", host, s)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem} {
		if err := poll(p, deadline, func(ctx context.Context) error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	c.Kubeconfig, c.KubeconfigPath, c.Config, c.Host, c.Token = kubeconfig, path, cfg, host, token
	return nil
}

// poll calls check (each call bounded to 5 s) every 50 ms until it returns nil,
// p exits, or deadline passes; the error then says why, with check's last error.
func poll(p *process, deadline time.Time, check func(context.Context) error) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if exited, exitErr := p.exited(); exited {
			return fmt.Errorf("exited (%v); last check: %w", exitErr, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", StartTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) logPath(name string, attempt int) string {
	if attempt == 1 {
		return filepath.Join(c.Dir, name+".log")
	}
	return filepath.Join(c.Dir, fmt.Sprintf("%s.%d.log", name, attempt))
}

// Clientset returns a client-go clientset for the admin user.
func (c *Cluster) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c.Config))
	if err != nil {
		t.Fatalf("kubetest: clientset for %s: %v", c.Host, err)
	}
	return cs
}

// Dynamic returns a dynamic client for the admin user.
func (c *Cluster) Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(rest.CopyConfig(c.Config))
	if err != nil {
		t.Fatalf("kubetest: dynamic client for %s: %v", c.Host, err)
	}
	return dc
}

// Kubectl runs the kubectl built with the API server against the cluster
// (--kubeconfig=KubeconfigPath, then args), bounded by CommandTimeout, and returns
// its standard output. A non-zero exit fails the test with kubectl's stderr.
func (c *Cluster) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	full := append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)
	cmd := exec.CommandContext(ctx, c.assets.Kubectl, full...)
	// HOME in the cluster dir keeps kubectl's discovery cache out of the user's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.Dir}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %s", err, CommandTimeout)
		}
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String()
}
