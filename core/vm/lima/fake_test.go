package lima

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limayaml"
)

// fakeLima stands in for the Lima library: one instance (or none), and a
// log of the calls that change it.
type fakeLima struct {
	inst        *limatype.Instance
	dir         string // instance directory for Create
	calls       []string
	createdYAML []byte
	startErr    error
	guestAgent  string
	// onStart is what the instance becomes when started.
	onStart limatype.Status
	// afterForce is what the instance becomes when stopped forcibly
	// (default Stopped).
	afterForce limatype.Status
	// inspections counts Inspect calls; statuses, when set, is the status
	// each successive Inspect reports (the last one repeats).
	inspections int
	statuses    []limatype.Status
	// startOpts is what the last Start was given.
	startOpts StartOptions
	// waitErr is what WaitRunning returns.
	waitErr error
	// noVZ: the engine has no vz driver (built without cgo).
	noVZ bool
	// onStop and beforeStart, when set, run at Stop and at Start (to see
	// the instance as Lima would at that moment).
	onStop, beforeStart func()
}

// Inspect returns a copy of the instance; like Lima's, its Config is the
// instance's lima.yaml as Lima's loader reads it (defaults filled in),
// unless the test set one.
func (f *fakeLima) Inspect(ctx context.Context, name string) (*limatype.Instance, error) {
	f.inspections++
	if f.inst == nil {
		return nil, fmt.Errorf("instance %q: %w", name, fs.ErrNotExist)
	}
	if n := len(f.statuses); n > 0 {
		f.inst.Status = f.statuses[min(f.inspections, n)-1]
	}
	c := *f.inst
	if c.Config == nil && c.Dir != "" {
		path := filepath.Join(c.Dir, "lima.yaml")
		if b, err := os.ReadFile(path); err == nil {
			y, err := limayaml.Load(ctx, b, path)
			if err != nil {
				return nil, err
			}
			c.Config = y
		}
	}
	return &c, nil
}

func (f *fakeLima) Create(ctx context.Context, name string, yaml []byte) (*limatype.Instance, error) {
	f.calls = append(f.calls, "create "+name)
	f.createdYAML = yaml
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(f.dir, "lima.yaml"), yaml, 0o644); err != nil {
		return nil, err
	}
	f.inst = &limatype.Instance{Name: name, Dir: f.dir, Status: limatype.StatusStopped, VMType: limatype.VZ, Arch: limatype.AARCH64}
	// Lima's Create returns the instance as Inspect reads it.
	return f.Inspect(ctx, name)
}

func (f *fakeLima) Start(ctx context.Context, inst *limatype.Instance, opts StartOptions) error {
	f.calls = append(f.calls, fmt.Sprintf("start %s hostagent=%s guestagent=%s", inst.Name, opts.HostAgent, opts.GuestAgent))
	f.startOpts = opts
	if f.beforeStart != nil {
		f.beforeStart()
	}
	if f.startErr != nil {
		return f.startErr
	}
	f.inst.Status = f.onStart
	return nil
}

func (f *fakeLima) WaitRunning(ctx context.Context, inst *limatype.Instance, timeout time.Duration) error {
	f.calls = append(f.calls, fmt.Sprintf("wait %s %s", inst.Name, timeout))
	return f.waitErr
}

func (f *fakeLima) Stop(ctx context.Context, inst *limatype.Instance) error {
	f.calls = append(f.calls, "stop "+inst.Name)
	if f.onStop != nil {
		f.onStop()
	}
	f.inst.Status = limatype.StatusStopped
	return nil
}

func (f *fakeLima) StopForcibly(ctx context.Context, inst *limatype.Instance) error {
	f.calls = append(f.calls, "stop -f "+inst.Name)
	f.statuses = nil
	f.inst.Status = limatype.StatusStopped
	if f.afterForce != "" {
		f.inst.Status = f.afterForce
	}
	return nil
}

func (f *fakeLima) Delete(ctx context.Context, inst *limatype.Instance) error {
	f.calls = append(f.calls, "delete "+inst.Name)
	f.inst = nil
	return nil
}

func (f *fakeLima) GuestAgent(guestOS limatype.OS, arch limatype.Arch) (string, error) {
	if f.guestAgent == "" {
		return "", fs.ErrNotExist
	}
	return f.guestAgent, nil
}

func (f *fakeLima) VZ(context.Context) (bool, error) { return !f.noVZ, nil }
