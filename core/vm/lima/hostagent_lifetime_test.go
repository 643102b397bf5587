package lima

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limatype"

	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/limavm"
)

// The host agent's lifetime as the driver sees it, through the fake Lima:
// Broken VMs are stopped forcibly, interrupted starts leave the VM alone.

func TestStopBrokenStopsForcibly(t *testing.T) {
	ctx := context.Background()
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusBroken,
		Errors: []error{errors.New("host agent is running but driver is not")}})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.calls, []string{"stop -f marina"}) {
		t.Errorf("Stop of a Broken VM: calls %q, want Lima's forcible stop", f.calls)
	}
	if st, _ := d.Status(ctx); st.State != vm.Stopped || !strings.Contains(st.Detail, "stopped; `marina up` starts it") {
		t.Errorf("after the forcible stop: %+v", st)
	}
	// Stopped now: a second down changes nothing.
	if err := d.Stop(ctx); err != nil || len(f.calls) != 1 {
		t.Errorf("second Stop = %v, calls %q", err, f.calls)
	}
}

func TestStartBrokenStopsForciblyThenStarts(t *testing.T) {
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusBroken})
	d.brokenSettle = 20 * time.Millisecond
	var lines []string
	st, err := d.Start(context.Background(), func(s string) { lines = append(lines, s) })
	if err != nil || st.State != vm.Running {
		t.Fatalf("Start of a Broken VM = %+v, %v", st, err)
	}
	if len(f.calls) != 2 || f.calls[0] != "stop -f marina" || !strings.HasPrefix(f.calls[1], "start marina") {
		t.Errorf("calls = %q, want a forcible stop, then a start", f.calls)
	}
	if len(lines) == 0 || !strings.Contains(lines[0], "is broken; stopping it forcibly") {
		t.Errorf("progress = %q", lines)
	}
}

// TestStartBrokenThatSettles: a VM whose host agent is just starting (a
// `marina up` interrupted a moment ago) is Broken for a moment; it is not
// killed, it is waited for.
func TestStartBrokenThatSettles(t *testing.T) {
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusBroken})
	d.brokenSettle = 2 * time.Second
	f.statuses = []limatype.Status{limatype.StatusBroken, limatype.StatusBroken, limatype.StatusRunning}
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.calls, []string{"wait marina 10m0s"}) {
		t.Errorf("calls = %q, want only the wait for the booting VM", f.calls)
	}
}

// TestStartInterruptedSaysTheVMKeepsBooting: Start hands Lima's
// interrupted-wait error back as it is (no "start failed, see the log"),
// so `up` exits 130 with the message.
func TestStartInterruptedSaysTheVMKeepsBooting(t *testing.T) {
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusStopped})
	f.startErr = fmt.Errorf("%w marina (%w); it keeps booting in the background", limavm.ErrStartInterrupted, context.Canceled)
	_, err := d.Start(context.Background(), nil)
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "ha.stderr.log") || !strings.Contains(err.Error(), "keeps booting") {
		t.Errorf("Start = %v", err)
	}
	// The wait for a running VM is interrupted the same way.
	f.startErr, f.inst.Status = nil, limatype.StatusRunning
	f.waitErr = fmt.Errorf("%w (%w); it keeps booting in the background", limavm.ErrStartInterrupted, context.Canceled)
	if _, err := d.Start(context.Background(), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Start on a booting VM, interrupted = %v", err)
	}
}

func TestStartPassesTheStartTimeout(t *testing.T) {
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusStopped})
	d.cfg.VM.StartTimeout = 25 * time.Minute
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if f.startOpts.Timeout != 25*time.Minute || f.startOpts.HostAgent != "/opt/marina/bin/marina-lima" || f.startOpts.GuestAgent != d.GuestAgent {
		t.Errorf("Lima got %+v", f.startOpts)
	}
	f.inst.Status = limatype.StatusRunning
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if last := f.calls[len(f.calls)-1]; last != "wait marina 25m0s" {
		t.Errorf("the wait for a running VM: %q", last)
	}
}

// TestStatusBrokenNamesAWayOut: the status of a Broken VM names the command
// that recovers it (`marina down && marina up` did not: down was a no-op and
// up refused a Broken VM).
func TestStatusBrokenNamesAWayOut(t *testing.T) {
	d, _ := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusBroken})
	st, err := d.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Detail, "`marina up` stops it forcibly and starts it again") || strings.Contains(st.Detail, "marina down && marina up") {
		t.Errorf("detail = %q", st.Detail)
	}
}

// TestWaitRunningReadsTheHostAgentsEvents runs waitRunning on event logs as
// Lima's host agent writes them.
func TestWaitRunningReadsTheHostAgentsEvents(t *testing.T) {
	for _, tc := range []struct {
		name, events, want string
	}{
		{"up", `{"time":"2026-01-01T00:00:00Z","status":{"sshLocalPort":60022}}` + "\n" + `{"time":"2026-01-01T00:01:00Z","status":{"running":true,"sshLocalPort":60022}}` + "\n", ""},
		{"degraded", `{"time":"2026-01-01T00:01:00Z","status":{"running":true,"degraded":true,"errors":["no guest agent"]}}` + "\n", "degraded: [no guest agent]"},
		{"exiting", `{"time":"2026-01-01T00:01:00Z","status":{"exiting":true}}` + "\n", "exiting"},
		{"silent", `{"time":"2026-01-01T00:00:00Z","status":{"sshLocalPort":60022}}` + "\n", "did not come up within 300ms (vm.startTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeEventLog(t, dir, "ha.stdout.log", tc.events)
			writeEventLog(t, dir, "ha.stderr.log", "")
			err := WaitRunning(context.Background(), dir, 300*time.Millisecond)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("waitRunning = %v, want %q", err, tc.want)
			}
		})
	}
	dir := t.TempDir()
	writeEventLog(t, dir, "ha.stdout.log", `{"time":"2026-01-01T00:00:00Z","status":{"sshLocalPort":60022}}`+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := WaitRunning(ctx, dir, time.Minute); !errors.Is(err, limavm.ErrStartInterrupted) || !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted waitRunning = %v", err)
	}
}

func writeEventLog(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
