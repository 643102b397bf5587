package kind

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// HelperArg is the single argument with which marina runs as a kind helper
// (`marina kind-helper`): KindProvider re-executes marina that way for every
// kind operation. The binary's main must hand such a run to ServeHelper
// before anything else:
//
//	if len(os.Args) == 2 && os.Args[1] == kind.HelperArg {
//		os.Exit(kind.ServeHelper(os.Stdin, os.Stdout, os.Stderr))
//	}
const HelperArg = "kind-helper"

// The helper's operations.
const (
	opCreate     = "create"
	opDelete     = "delete"
	opList       = "list"
	opKubeconfig = "kubeconfig"
	opNodes      = "nodes"
)

// helperRequest is what KindProvider writes to the helper's stdin.
type helperRequest struct {
	Op       string            `json:"op"`
	Name     string            `json:"name,omitempty"`
	Config   *v1alpha4.Cluster `json:"config,omitempty"`
	Retain   bool              `json:"retain,omitempty"`
	Wait     time.Duration     `json:"wait,omitempty"`
	Internal bool              `json:"internal,omitempty"`
	// Verbosity is kind's log level forwarded on stderr (0: status lines).
	Verbosity int32 `json:"verbosity,omitempty"`
}

// helperResponse is what the helper writes to stdout.
type helperResponse struct {
	Names      []string `json:"names,omitempty"`
	Kubeconfig string   `json:"kubeconfig,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// ServeHelper runs one kind operation: it reads the request KindProvider
// wrote on stdin, runs it with kind's library (whose docker CLI calls see
// this process's environment: DOCKER_HOST, KIND_EXPERIMENTAL_DOCKER_NETWORK),
// writes kind's log lines to stderr and the result to stdout, and returns the
// exit status (0 on success, 1 when the operation failed, 2 on a bad
// request).
func ServeHelper(stdin io.Reader, stdout, stderr io.Writer) int {
	return ServeHelperWith(stdin, stdout, stderr, newLibraryBackend)
}

// HelperBackend performs the kind helper's operations. ServeHelper's is
// kind's own library; ServeHelperWith takes another, for a program that
// stands in for kind where kind's nodes cannot run (marina's end-to-end
// tests). KindProvider's guarantees (validation, refusing an existing name,
// rolling back a failed create, process-group kill on cancellation) hold
// whatever the backend, because they live on the caller's side.
type HelperBackend interface {
	// Create creates the cluster cfg describes and returns when it is
	// ready or wait has passed (0: do not wait). With retain, a failed
	// create keeps its nodes.
	Create(cfg *v1alpha4.Cluster, retain bool, wait time.Duration) error
	// Delete removes every node of the cluster; no nodes is no error.
	Delete(name string) error
	// List returns the names of the clusters that have nodes.
	List() ([]string, error)
	// Kubeconfig returns the cluster's admin kubeconfig (see
	// Provider.Kubeconfig for internal).
	Kubeconfig(name string, internal bool) (string, error)
	// Nodes returns the cluster's node names, sorted.
	Nodes(name string) ([]string, error)
}

// ServeHelperWith is ServeHelper over the backend newBackend returns for the
// request's logger (kind's log interface: its lines go to stderr, where
// KindProvider forwards them to the user).
func ServeHelperWith(stdin io.Reader, stdout, stderr io.Writer, newBackend func(kindlog.Logger) (HelperBackend, func(), error)) int {
	var req helperRequest
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintf(stderr, "marina %s: read the request from stdin: %v (this mode is for marina's own use)\n", HelperArg, err)
		return 2
	}
	var resp helperResponse
	b, done, err := newBackend(&lineLogger{w: stderr, v: kindlog.Level(req.Verbosity)})
	if err == nil {
		resp, err = serve(req, b)
		done()
	}
	code := 0
	if err != nil {
		resp.Error = describeKindError(err)
		code = 1
	}
	if err := json.NewEncoder(stdout).Encode(resp); err != nil {
		fmt.Fprintf(stderr, "marina %s: write the result: %v\n", HelperArg, err)
		return 2
	}
	return code
}

func serve(req helperRequest, b HelperBackend) (helperResponse, error) {
	var resp helperResponse
	var err error
	switch req.Op {
	case opCreate:
		if req.Config == nil {
			return resp, errors.New("create: no kind config in the request")
		}
		err = b.Create(req.Config, req.Retain, req.Wait)
	case opDelete:
		err = b.Delete(req.Name)
	case opList:
		resp.Names, err = b.List()
	case opKubeconfig:
		resp.Kubeconfig, err = b.Kubeconfig(req.Name, req.Internal)
	case opNodes:
		resp.Names, err = b.Nodes(req.Name)
		slices.Sort(resp.Names)
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	return resp, err
}

// libraryBackend is kind's own library (docker node provider).
type libraryBackend struct {
	p *cluster.Provider
	// kubeconfig is a throwaway file: kind reads and writes a kubeconfig
	// on create and delete, and the user's ~/.kube/config must never be
	// touched (marina writes its own kubeconfigs from Kubeconfig).
	kubeconfig string
}

func newLibraryBackend(logger kindlog.Logger) (HelperBackend, func(), error) {
	tmp, err := os.MkdirTemp("", "marina-kind-")
	if err != nil {
		return nil, nil, fmt.Errorf("temporary kubeconfig directory: %w", err)
	}
	b := &libraryBackend{
		p:          cluster.NewProvider(cluster.ProviderWithLogger(logger), cluster.ProviderWithDocker()),
		kubeconfig: filepath.Join(tmp, "kubeconfig"),
	}
	return b, func() { os.RemoveAll(tmp) }, nil
}

func (b *libraryBackend) Create(cfg *v1alpha4.Cluster, retain bool, wait time.Duration) error {
	return b.p.Create(cfg.Name,
		cluster.CreateWithV1Alpha4Config(cfg),
		cluster.CreateWithRetain(retain),
		cluster.CreateWithWaitForReady(wait),
		cluster.CreateWithKubeconfigPath(b.kubeconfig),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	)
}

func (b *libraryBackend) Delete(name string) error { return b.p.Delete(name, b.kubeconfig) }

func (b *libraryBackend) List() ([]string, error) { return b.p.List() }

func (b *libraryBackend) Kubeconfig(name string, internal bool) (string, error) {
	return b.p.KubeConfig(name, internal)
}

func (b *libraryBackend) Nodes(name string) ([]string, error) {
	nodes, err := b.p.ListNodes(name)
	var names []string
	for _, n := range nodes {
		names = append(names, n.String())
	}
	return names, err
}

// describeKindError returns err's message with the output of the command that
// failed, which kind keeps in its RunError and leaves out of the message.
func describeKindError(err error) string {
	msg := err.Error()
	var run *kindexec.RunError
	if errors.As(err, &run) {
		out := strings.TrimSpace(string(run.Output))
		const max = 4 << 10
		if len(out) > max {
			out = "..." + out[len(out)-max:]
		}
		if out != "" {
			msg += "\ncommand output:\n" + out
		}
	}
	return msg
}

// lineLogger is kind's logger in the helper: one line per message on w.
type lineLogger struct {
	mu sync.Mutex
	w  io.Writer
	v  kindlog.Level
}

func (l *lineLogger) write(prefix, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		if strings.TrimSpace(line) != "" {
			fmt.Fprintln(l.w, prefix+strings.TrimSpace(line))
		}
	}
}

func (l *lineLogger) Warn(m string)                        { l.write("WARNING: ", m) }
func (l *lineLogger) Warnf(f string, a ...any)             { l.write("WARNING: ", fmt.Sprintf(f, a...)) }
func (l *lineLogger) Error(m string)                       { l.write("ERROR: ", m) }
func (l *lineLogger) Errorf(f string, a ...any)            { l.write("ERROR: ", fmt.Sprintf(f, a...)) }
func (l *lineLogger) V(v kindlog.Level) kindlog.InfoLogger { return infoLogger{l: l, on: v <= l.v} }

type infoLogger struct {
	l  *lineLogger
	on bool
}

func (i infoLogger) Info(m string) {
	if i.on {
		i.l.write("", m)
	}
}

func (i infoLogger) Infof(f string, a ...any) {
	if i.on {
		i.l.write("", fmt.Sprintf(f, a...))
	}
}

func (i infoLogger) Enabled() bool { return i.on }
