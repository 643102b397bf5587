package localdns

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Readiness is checked through the Docker API only. marina runs on the Mac
// and reaches the containers' addresses over a route into the VM that the
// core sets up, but a plugin must not count on that route (it may not exist
// yet, or the host may filter it); the Docker socket always works. So etcd is
// asked for its health by running etcdctl inside its own container (docker
// exec), and CoreDNS, whose image has nothing to exec, must be running and
// stay up — neither restarting nor restarted — for settleTime. A Corefile
// CoreDNS rejects makes it exit at once, which this catches.
const (
	pollInterval = 250 * time.Millisecond
	// probeTimeout bounds one etcdctl run.
	probeTimeout = 10 * time.Second
	// settleTime is how long CoreDNS must stay up unchanged.
	settleTime = time.Second
	// logTail is how many log lines an error carries.
	logTail = 15
	// maxOutput bounds what is kept of a command's output.
	maxOutput = 8 << 10
)

// waitEtcdHealthy runs `etcdctl endpoint health` in container name until it
// succeeds or timeout passes.
func waitEtcdHealthy(ctx context.Context, api *client.Client, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := []string{etcdctlPath, "--endpoints", "http://127.0.0.1:2379", "--command-timeout", "3s", "endpoint", "health"}
	var last string
	for {
		out, code, err := execIn(ctx, api, name, cmd)
		switch {
		case err == nil && code == 0:
			return nil
		case err != nil && isMissingExecutable(err):
			return fmt.Errorf("etcd container %s has no %s: marina needs an etcd image laid out like quay.io/coreos/etcd (etcd and etcdctl in /usr/local/bin); fix images.dnsEtcd in ~/.marina/config.yaml: %w", name, etcdctlPath, err)
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("etcdctl endpoint health exited %d: %s", code, strings.TrimSpace(out))
		}
		if err := sleep(ctx, 2*pollInterval); err != nil {
			return fmt.Errorf("etcd container %s is not healthy after %s (%s)%s; see `docker logs %s`",
				name, timeout, last, logsSuffix(api, name), name)
		}
	}
}

// waitSettled waits until container name is running and stays up, with the
// same start time and restart count, for settleTime.
func waitSettled(ctx context.Context, api *client.Client, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type obs struct {
		started  string
		restarts int
	}
	var (
		prev  *obs
		since time.Time
		last  string
	)
	for {
		res, err := api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		switch {
		case err != nil:
			prev, last = nil, err.Error()
		case res.Container.State == nil:
			prev, last = nil, "Docker reports no state"
		case !res.Container.State.Running || res.Container.State.Restarting:
			st := res.Container.State
			prev, last = nil, fmt.Sprintf("it is %s (exit code %d, restarted %d times)", st.Status, st.ExitCode, res.Container.RestartCount)
		default:
			cur := obs{started: res.Container.State.StartedAt, restarts: res.Container.RestartCount}
			if prev == nil || *prev != cur {
				prev, since = &cur, time.Now()
			} else if time.Since(since) >= settleTime {
				return nil
			}
			last = "it was still starting up"
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("container %s did not stay up within %s: %s%s; see `docker logs %s`",
				name, timeout, last, logsSuffix(api, name), name)
		}
	}
}

// execIn runs cmd in container name and returns its combined output and
// exit code; err is set when the command could not be run.
func execIn(ctx context.Context, api *client.Client, name string, cmd []string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	ex, err := api.ExecCreate(ctx, name, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", 0, fmt.Errorf("docker exec in %s: %w", name, err)
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("docker exec in %s: %w", name, err)
	}
	defer att.Close()
	// Reading the stream does not watch ctx: closing the connection ends it.
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	out := &limitedBuffer{max: maxOutput}
	if _, err := stdcopy.StdCopy(out, out, att.Reader); err != nil && ctx.Err() != nil {
		return out.String(), 0, fmt.Errorf("docker exec in %s: %w", name, ctx.Err())
	}
	// The stream ends when the process does; its exit code may take a moment.
	for {
		in, err := api.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return out.String(), 0, fmt.Errorf("docker exec in %s: %w", name, err)
		}
		if !in.Running {
			return out.String(), in.ExitCode, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return out.String(), 0, fmt.Errorf("docker exec in %s: %w", name, err)
		}
	}
}

// isMissingExecutable reports whether err is Docker's "no such executable".
func isMissingExecutable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "executable file not found") || strings.Contains(s, "no such file or directory")
}

// logsSuffix returns the last log lines of container name, formatted to end
// an error message, or "" when there are none.
func logsSuffix(api *client.Client, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := api.ContainerLogs(ctx, name, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(logTail)})
	if err != nil {
		return ""
	}
	defer rc.Close()
	out := &limitedBuffer{max: maxOutput}
	if _, err := stdcopy.StdCopy(out, out, rc); err != nil && out.Len() == 0 {
		return ""
	}
	s := strings.TrimSpace(out.String())
	if s == "" {
		return ""
	}
	return "\nlast log lines of " + name + ":\n" + s
}

// sleep waits d or until ctx ends (returning its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// limitedBuffer keeps the last max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > b.max {
		p = p[len(p)-b.max:]
	}
	if over := b.Len() + len(p) - b.max; over > 0 {
		rest := append([]byte(nil), b.Bytes()[over:]...)
		b.Reset()
		b.Buffer.Write(rest)
	}
	b.Buffer.Write(p)
	return n, nil
}

var _ io.Writer = (*limitedBuffer)(nil)
