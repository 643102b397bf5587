package lab

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/hostvm"
	"github.com/bcollard/marina/sdk"
)

func TestBridge(t *testing.T) {
	cfg := config.Default()
	cfg.Network.Name = "lab"
	cfg.Network.BridgeCIDR = "172.22.0.0/16"
	spec, err := Bridge(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "lab" || spec.Subnet.String() != "172.22.0.0/16" || spec.Gateway.String() != "172.22.0.1" || spec.IPRange.String() != "172.22.128.0/18" {
		t.Fatalf("Bridge = %+v", spec)
	}
	cfg.Network.BridgeCIDR = "172.22.0.0/24"
	if _, err := Bridge(cfg); err == nil || !strings.Contains(err.Error(), "network.bridgeCIDR") {
		t.Fatalf("a /24 bridge: %v", err)
	}
}

func TestDescribeHostChange(t *testing.T) {
	set := describeHostChange(sdk.HostChange{Resolver: &sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53"}}})
	if set.String() != "set resolver for demo.internal: nameserver 172.30.255.53" {
		t.Errorf("set: %q", set)
	}
	rm := describeHostChange(sdk.HostChange{Resolver: &sdk.ResolverChange{Domain: "demo.internal", Remove: true}})
	if !strings.HasPrefix(rm.String(), "remove resolver for demo.internal") {
		t.Errorf("remove: %q", rm)
	}
}

// stopped is a driver whose machine does not run.
type stopped struct{ *hostvm.Host }

func (stopped) Status(context.Context) (vm.Status, error) {
	return vm.Status{Driver: "host", Name: "x", State: vm.Stopped, Detail: "docker does not answer"}, nil
}

// TestDoctorMachineDown: with the machine down doctor fails the machine
// check, says how to fix it, and still runs the checks that do not need it.
func TestDoctorMachineDown(t *testing.T) {
	l := &Lab{Config: config.Default(), Driver: stopped{&hostvm.Host{}}}
	extraRan := false
	checks := l.Doctor(context.Background(), DoctorOptions{StateDir: os.TempDir(), Extra: []func(context.Context) Check{
		func(context.Context) Check { extraRan = true; return Check{Name: "extra", Status: OK} },
	}})
	if !Failed(checks) || checks[0].Name != "machine" || checks[0].Status != Fail || checks[0].Fix != "marina up" {
		t.Fatalf("checks = %+v", checks)
	}
	if !extraRan {
		t.Error("extra checks did not run with the machine down")
	}
	names := map[string]bool{}
	for _, c := range checks {
		names[c.Name] = true
	}
	if !names["disk space"] {
		t.Errorf("disk check missing: %+v", checks)
	}
	if Failed([]Check{{Status: OK}, {Status: Warn}}) {
		t.Error("warnings count as failure")
	}
}

// TestDownAndDestroyWithMachineDown: hooks are not run against a machine
// that is down; the steps that remain say what they would do.
func TestDownAndDestroyWithMachineDown(t *testing.T) {
	l := &Lab{Config: config.Default(), Driver: stopped{&hostvm.Host{}}}
	down, err := l.DownSteps(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	destroy, err := l.DestroySteps(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, steps := range [][]string{names(down), names(destroy)} {
		for _, n := range steps {
			if strings.HasPrefix(n, "Plugins:") {
				t.Errorf("a hook step runs with the machine down: %v", steps)
			}
		}
	}
}

func names[S interface{ Name() string }](steps []S) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name())
	}
	return out
}
