package lima

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lima-vm/lima/v2/pkg/limatype"
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
}

func (f *fakeLima) Inspect(ctx context.Context, name string) (*limatype.Instance, error) {
	if f.inst == nil {
		return nil, fmt.Errorf("instance %q: %w", name, fs.ErrNotExist)
	}
	c := *f.inst
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
	c := *f.inst
	return &c, nil
}

func (f *fakeLima) Start(ctx context.Context, inst *limatype.Instance, hostAgent, guestAgent string) error {
	f.calls = append(f.calls, fmt.Sprintf("start %s hostagent=%s guestagent=%s", inst.Name, hostAgent, guestAgent))
	if f.startErr != nil {
		return f.startErr
	}
	f.inst.Status = f.onStart
	return nil
}

func (f *fakeLima) Stop(ctx context.Context, inst *limatype.Instance) error {
	f.calls = append(f.calls, "stop "+inst.Name)
	f.inst.Status = limatype.StatusStopped
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
