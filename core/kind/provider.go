package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// Provider creates, lists and deletes the kind clusters of one Docker
// endpoint. Every method honours ctx: when it ends, the operation stops.
type Provider interface {
	// Create creates the cluster cfg describes (cfg.Name) and returns when
	// it is ready or opts.Wait has passed. It refuses a name that already
	// has nodes. Unless opts.Retain, a failed or cancelled Create leaves no
	// node container behind.
	Create(ctx context.Context, cfg *v1alpha4.Cluster, opts CreateOptions) error
	// Delete removes every node of the cluster; a cluster without nodes is
	// no error.
	Delete(ctx context.Context, name string) error
	// List returns the names of the clusters that have node containers.
	List(ctx context.Context) ([]string, error)
	// Kubeconfig returns the cluster's admin kubeconfig: with internal, the
	// server is the control-plane node on the Docker network
	// (https://<name>-control-plane:6443); otherwise it is the API server's
	// host binding as Docker reports it (https://0.0.0.0:700N when the
	// config listens on all addresses: the caller rewrites the host).
	Kubeconfig(ctx context.Context, name string, internal bool) ([]byte, error)
	// Nodes returns the names of the cluster's node containers, sorted.
	Nodes(ctx context.Context, name string) ([]string, error)
}

// CreateOptions tune Create.
type CreateOptions struct {
	// Retain keeps the node containers of a failed Create, for debugging.
	Retain bool
	// Wait is how long to wait for the control plane to be ready (0: do not
	// wait).
	Wait time.Duration
}

// cleanupTimeout bounds the Delete that rolls back a failed or cancelled
// Create.
const cleanupTimeout = 2 * time.Minute

// killWait bounds how long a killed helper may take to release its output.
const killWait = 5 * time.Second

// KindProvider is the Provider over kind's library (sigs.k8s.io/kind
// v0.33.0, docker node provider). Each operation runs in a helper process,
// Executable re-executed with HelperArg, because kind picks the Docker
// endpoint and network only from the process environment and cannot be
// cancelled (see the package doc). The helper and every docker CLI it starts
// share a process group that is killed when ctx ends.
type KindProvider struct {
	// Executable is the program run with HelperArg; empty means this
	// program (os.Executable), whose main must call ServeHelper.
	Executable string
	// DockerHost is the Docker endpoint the helper's docker CLI calls use
	// (DOCKER_HOST, e.g. unix:///Users/me/.marina/docker.sock); empty means
	// the environment's own docker settings.
	DockerHost string
	// Network is the docker network the nodes join
	// (KIND_EXPERIMENTAL_DOCKER_NETWORK); empty or "kind" means kind's
	// default network "kind". kind creates it when it is missing.
	Network string
	// Log receives kind's progress lines (" ✓ Preparing nodes 📦"), one
	// call at a time from a goroutine of the running operation; nil drops
	// them.
	Log func(line string)
	// Verbosity is kind's log level: 0 shows status lines, 1 and more show
	// kind's debug output.
	Verbosity int
	// ProxyEnv are the proxy variables (HTTP_PROXY, HTTPS_PROXY,
	// NO_PROXY and their lower-case twins) the helper runs with instead
	// of this process's: kind gives them to every node (containerd pulls
	// through the proxy) and adds the cluster's subnets to NO_PROXY. None:
	// the nodes get no proxy.
	ProxyEnv []string

	// started, when set (tests), receives each helper's operation and pid
	// once it runs.
	started func(op string, pid int)
}

var _ Provider = (*KindProvider)(nil)

// Create implements Provider.
func (p *KindProvider) Create(ctx context.Context, cfg *v1alpha4.Cluster, opts CreateOptions) error {
	if cfg == nil {
		return errors.New("create cluster: no kind config; render one with kind.Render")
	}
	if err := ValidateName(cfg.Name); err != nil {
		return err
	}
	if err := Validate(cfg); err != nil {
		return fmt.Errorf("create cluster %s: %w", cfg.Name, err)
	}
	// kind refuses an existing name too, but checking first means a
	// cancelled Create never rolls back a cluster it did not make.
	nodes, err := p.Nodes(ctx, cfg.Name)
	if err != nil {
		return fmt.Errorf("create cluster %s: %w", cfg.Name, err)
	}
	if len(nodes) > 0 {
		return fmt.Errorf("create cluster %s: it already exists (nodes %s); delete it first (marina cluster delete %s)", cfg.Name, strings.Join(nodes, ", "), cfg.Name)
	}
	_, err = p.run(ctx, helperRequest{Op: opCreate, Name: cfg.Name, Config: cfg, Retain: opts.Retain, Wait: opts.Wait})
	if err == nil {
		return nil
	}
	err = fmt.Errorf("create cluster %s: %w", cfg.Name, err)
	if opts.Retain {
		return fmt.Errorf("%w\nthe node containers are kept (retain); inspect them with `docker ps -a --filter label=%s=%s`, remove them with marina cluster delete %s", err, ClusterLabel, cfg.Name, cfg.Name)
	}
	// kind removes the nodes of a failed create itself, but not when it was
	// killed (cancellation) or died.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if derr := p.rollback(cctx, cfg.Name); derr != nil {
		return fmt.Errorf("%w\nrolling back failed too: %v; remove the nodes with marina cluster delete %s", err, derr, cfg.Name)
	}
	return err
}

// rollbackSettle is how long rollback watches for a node container that
// the Docker daemon was still creating when the helper was killed: the
// daemon finishes such a create after the kill, possibly after the first
// Delete listed the nodes.
const rollbackSettle = 3 * time.Second

// rollback deletes the nodes of a failed or cancelled Create, then deletes
// again any node that appears within rollbackSettle.
func (p *KindProvider) rollback(ctx context.Context, name string) error {
	if err := p.Delete(ctx, name); err != nil {
		return err
	}
	deadline := time.Now().Add(rollbackSettle)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		nodes, err := p.Nodes(ctx, name)
		if err != nil {
			return err
		}
		if len(nodes) > 0 {
			if err := p.Delete(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// ClusterLabel is the docker label kind puts on every node container, with
// the cluster name as value.
const ClusterLabel = "io.x-k8s.kind.cluster"

// Delete implements Provider.
func (p *KindProvider) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if _, err := p.run(ctx, helperRequest{Op: opDelete, Name: name}); err != nil {
		return fmt.Errorf("delete cluster %s: %w", name, err)
	}
	return nil
}

// List implements Provider.
func (p *KindProvider) List(ctx context.Context) ([]string, error) {
	resp, err := p.run(ctx, helperRequest{Op: opList})
	if err != nil {
		return nil, fmt.Errorf("list kind clusters: %w", err)
	}
	return resp.Names, nil
}

// Kubeconfig implements Provider.
func (p *KindProvider) Kubeconfig(ctx context.Context, name string, internal bool) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	resp, err := p.run(ctx, helperRequest{Op: opKubeconfig, Name: name, Internal: internal})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of cluster %s: %w", name, err)
	}
	return []byte(resp.Kubeconfig), nil
}

// Nodes implements Provider.
func (p *KindProvider) Nodes(ctx context.Context, name string) ([]string, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	resp, err := p.run(ctx, helperRequest{Op: opNodes, Name: name})
	if err != nil {
		return nil, fmt.Errorf("nodes of cluster %s: %w", name, err)
	}
	return resp.Names, nil
}

// env is the helper's environment: this process's, with the Docker endpoint,
// network and proxy of p (and nothing of the user's that would override
// them).
func (p *KindProvider) env() []string {
	drop := map[string]bool{
		"KIND_EXPERIMENTAL_DOCKER_NETWORK": true,
		"KIND_EXPERIMENTAL_PROVIDER":       true, // we always use docker
		"KIND_CLUSTER_NAME":                true,
	}
	// The proxy is the lab's (config, else this environment), with the
	// lab's own addresses in NO_PROXY: never the user's raw variables.
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"} {
		drop[k] = true
	}
	if p.DockerHost != "" {
		for _, k := range []string{"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"} {
			drop[k] = true
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	if p.DockerHost != "" {
		env = append(env, "DOCKER_HOST="+p.DockerHost)
	}
	if p.Network != "" && p.Network != "kind" {
		env = append(env, "KIND_EXPERIMENTAL_DOCKER_NETWORK="+p.Network)
	}
	return append(env, p.ProxyEnv...)
}

// run runs one helper and returns its response.
func (p *KindProvider) run(ctx context.Context, req helperRequest) (helperResponse, error) {
	var resp helperResponse
	if err := ctx.Err(); err != nil {
		return resp, err
	}
	exe := p.Executable
	if exe == "" {
		self, err := os.Executable()
		if err != nil {
			return resp, fmt.Errorf("find marina's own executable to run kind: %w", err)
		}
		exe = self
	}
	req.Verbosity = int32(p.Verbosity)
	in, err := json.Marshal(req)
	if err != nil {
		return resp, fmt.Errorf("encode the kind request: %w", err)
	}

	cmd := exec.CommandContext(ctx, exe, HelperArg)
	cmd.Env = p.env()
	cmd.Stdin = bytes.NewReader(in)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	tail := &lineTail{max: 20}
	stderr := &lineWriter{line: func(line string) {
		tail.add(line)
		if p.Log != nil {
			p.Log(line)
		}
	}}
	cmd.Stderr = stderr
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
	cmd.WaitDelay = killWait

	if err := cmd.Start(); err != nil {
		return resp, fmt.Errorf("start the kind helper %s: %w", exe, err)
	}
	if p.started != nil {
		p.started(req.Op, cmd.Process.Pid)
	}
	werr := cmd.Wait()
	stderr.flush()

	derr := json.Unmarshal(stdout.Bytes(), &resp)
	switch {
	case derr == nil && werr == nil && resp.Error == "":
		return resp, nil // done, even if ctx ended meanwhile
	case ctx.Err() != nil:
		return resp, fmt.Errorf("kind %s stopped: %w", req.Op, context.Cause(ctx))
	case derr != nil:
		return resp, fmt.Errorf("the kind helper (%s %s) gave no result (%v; does its main hand %q to kind.ServeHelper?); its last output:\n%s", exe, HelperArg, werr, HelperArg, tail)
	case resp.Error != "":
		return resp, errors.New(resp.Error)
	default:
		return resp, fmt.Errorf("the kind helper failed: %v; its last output:\n%s", werr, tail)
	}
}

// lineWriter calls line for every line written to it. os/exec writes to it
// from one goroutine; flush after Wait.
type lineWriter struct {
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(b), nil
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	max   int
	lines []string
}

func (t *lineTail) add(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *lineTail) String() string { return strings.Join(t.lines, "\n") }
