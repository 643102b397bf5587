package lab

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/hostvm"
)

// sized is a driver whose machine is in state and reports a pending resize.
type sized struct {
	*hostvm.Host
	state   vm.State
	change  string
	restart bool
	err     error
}

func (s sized) Name() string { return "lima" }

func (s sized) Status(context.Context) (vm.Status, error) {
	return vm.Status{Driver: "lima", Name: "marina", State: s.state}, nil
}

func (s sized) PendingResize(context.Context) (string, bool, error) {
	return s.change, s.restart, s.err
}

// TestMachinePlanShowsResize: up's machine step plans (and --dry-run shows)
// the resize of a stopped VM, and the restart of a running one when the
// driver will restart it (a resize that waits is not pending).
func TestMachinePlanShowsResize(t *testing.T) {
	for _, tc := range []struct {
		name string
		drv  sized
		want []lifecycle.Change
		err  string
	}{
		{name: "stopped", drv: sized{state: vm.Stopped, change: "cpus 4→6"},
			want: []lifecycle.Change{{Action: "resize", Target: "VM marina", Detail: "cpus 4→6"}, {Action: "start", Target: "VM marina"}}},
		{name: "running, restart", drv: sized{state: vm.Running, change: "cpus 4→6", restart: true},
			want: []lifecycle.Change{{Action: "restart", Target: "VM marina", Detail: "to apply cpus 4→6"}}},
		{name: "running, change waits", drv: sized{state: vm.Running}},
		{name: "Lima runs it, Docker does not answer: restart", drv: sized{state: vm.Stopped, change: "cpus 4→6", restart: true},
			want: []lifecycle.Change{{Action: "restart", Target: "VM marina", Detail: "to apply cpus 4→6"}}},
		{name: "stopped, same size", drv: sized{state: vm.Stopped}, want: []lifecycle.Change{{Action: "start", Target: "VM marina"}}},
		{name: "smaller disk", drv: sized{state: vm.Running, err: errors.New("vm.disk is 20GiB but the VM's disk is 40GiB")}, err: "vm.disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Lab{Config: config.Default(), Driver: tc.drv}
			got, err := l.stepMachine().Plan(context.Background())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Plan = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
