package node

import (
	"bytes"
	"context"
	"io"
	"log"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSupervision checks that a child exiting on its own cancels the
// control plane with the reason, and that stopAll stops the others with
// SIGTERM.
func TestSupervision(t *testing.T) {
	for _, bin := range []string{"sleep", "false"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not on PATH: %v", bin, err)
		}
	}
	c := &controlPlane{log: log.New(io.Discard, "", 0)}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sleeper, err := c.start(ctx, cancel, "sleeper", "sleep", []string{"60"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.start(ctx, cancel, "quitter", "false", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a child's exit did not end the control plane")
	}
	if err := c.failure(ctx, nil); err == nil || !strings.Contains(err.Error(), "quitter exited: exit status 1") {
		t.Errorf("failure = %v, want the quitter's exit", err)
	}
	begin := time.Now()
	c.stopAll()
	select {
	case <-sleeper.done:
	default:
		t.Fatal("stopAll returned with the sleeper running")
	}
	if time.Since(begin) >= stopTimeout {
		t.Errorf("the sleeper needed SIGKILL (%s): SIGTERM did not stop it", time.Since(begin))
	}
}

// TestFailureOnStop checks that a stop (ctx cancelled without a cause) is
// no failure.
func TestFailureOnStop(t *testing.T) {
	var out bytes.Buffer
	c := &controlPlane{log: log.New(&out, "", 0)}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(nil)
	if err := c.failure(ctx, nil); err != nil {
		t.Errorf("failure after a stop = %v", err)
	}
	if !strings.Contains(out.String(), "stopping") {
		t.Errorf("no stopping line: %q", out.String())
	}
}

func TestPrefixWriter(t *testing.T) {
	var out bytes.Buffer
	w := prefixWriter(&out, "etcd: ")
	for _, s := range []string{"a\nb", "c\n", "\n"} {
		if _, err := io.WriteString(w, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), "etcd: a\netcd: bc\netcd: \n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
