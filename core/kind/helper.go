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
	var req helperRequest
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintf(stderr, "marina %s: read the request from stdin: %v (this mode is for marina's own use)\n", HelperArg, err)
		return 2
	}
	resp, err := serve(req, &lineLogger{w: stderr, v: kindlog.Level(req.Verbosity)})
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

func serve(req helperRequest, logger kindlog.Logger) (helperResponse, error) {
	p := cluster.NewProvider(cluster.ProviderWithLogger(logger), cluster.ProviderWithDocker())
	// kind reads and writes a kubeconfig on create and delete; give it a
	// throwaway one so that the user's ~/.kube/config is never touched
	// (marina writes its own kubeconfigs from Kubeconfig).
	tmp, err := os.MkdirTemp("", "marina-kind-")
	if err != nil {
		return helperResponse{}, fmt.Errorf("temporary kubeconfig directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	kubeconfig := filepath.Join(tmp, "kubeconfig")

	var resp helperResponse
	switch req.Op {
	case opCreate:
		if req.Config == nil {
			return resp, errors.New("create: no kind config in the request")
		}
		err = p.Create(req.Config.Name,
			cluster.CreateWithV1Alpha4Config(req.Config),
			cluster.CreateWithRetain(req.Retain),
			cluster.CreateWithWaitForReady(req.Wait),
			cluster.CreateWithKubeconfigPath(kubeconfig),
			cluster.CreateWithDisplayUsage(false),
			cluster.CreateWithDisplaySalutation(false),
		)
	case opDelete:
		err = p.Delete(req.Name, kubeconfig)
	case opList:
		resp.Names, err = p.List()
	case opKubeconfig:
		resp.Kubeconfig, err = p.KubeConfig(req.Name, req.Internal)
	case opNodes:
		nodes, lerr := p.ListNodes(req.Name)
		for _, n := range nodes {
			resp.Names = append(resp.Names, n.String())
		}
		slices.Sort(resp.Names)
		err = lerr
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	return resp, err
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
