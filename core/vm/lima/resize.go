package lima

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	units "github.com/docker/go-units"
	qcow2reader "github.com/lima-vm/go-qcow2reader"
	"github.com/lima-vm/go-qcow2reader/image/asif"
	"github.com/lima-vm/go-qcow2reader/image/qcow2"
	"github.com/lima-vm/go-qcow2reader/image/raw"
	"github.com/lima-vm/lima/v2/pkg/driverutil"
	"github.com/lima-vm/lima/v2/pkg/imgutil/nativeimgutil"
	"github.com/lima-vm/lima/v2/pkg/imgutil/nativeimgutil/asifutil"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"
	"github.com/lima-vm/lima/v2/pkg/limayaml"
	"github.com/lima-vm/lima/v2/pkg/qemuimgutil"
	"github.com/lima-vm/lima/v2/pkg/yqutil"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/vm/limavm"
)

// planResize compares the instance's lima.yaml (as Lima loads it) with the
// config: the size, and for a running VM the provisioning it booted with
// (a stopped VM's is refreshed before it boots). A smaller vm.disk is an
// error: a disk cannot shrink.
func (d *Driver) planResize(ctx context.Context, inst *limatype.Instance) (limavm.Resize, error) {
	r := limavm.Resize{Running: inst.Status == limatype.StatusRunning}
	if inst.Config == nil {
		return r, nil
	}
	c := inst.Config
	if r.Running {
		_, changed, err := provisioningDiffers(inst.Dir, d.provisionFor(guestUserOf(ctx, c)))
		if err != nil {
			return r, err
		}
		r.Provision = changed
	}
	r.CPUs = [2]int{deref(c.CPUs), d.cfg.VM.CPUs}
	r.Memory = [2]string{deref(c.Memory), d.cfg.VM.Memory}
	r.Disk = [2]string{deref(c.Disk), d.cfg.VM.Disk}
	if r.CPUs[0] == 0 {
		r.CPUs[0] = r.CPUs[1] // not set: nothing to compare
	}
	if r.Memory[0] == "" {
		r.Memory[0] = r.Memory[1]
	}
	if r.Disk[0] == "" {
		r.Disk[0] = r.Disk[1]
	}
	have, err1 := units.RAMInBytes(r.Disk[0])
	want, err2 := units.RAMInBytes(r.Disk[1])
	if err1 == nil && err2 == nil && want < have {
		return r, shrinkError(r.Disk[1], r.Disk[0])
	}
	return r, nil
}

func shrinkError(want, have string) error {
	return fmt.Errorf("vm.disk is %s but the VM's disk is %s: a disk cannot shrink; set vm.disk to %s or more (or recreate the VM, losing what is in it: marina destroy && marina up)",
		want, have, have)
}

// PlanResize reports the change of size the config asks of the existing VM
// (Empty when none, or when there is no VM). A smaller vm.disk is an error.
func (d *Driver) PlanResize(ctx context.Context) (limavm.Resize, error) {
	inst, err := d.lima.Inspect(ctx, d.vmName())
	if errors.Is(err, fs.ErrNotExist) {
		return limavm.Resize{}, nil
	}
	if err != nil {
		return limavm.Resize{}, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	return d.planResize(ctx, inst)
}

// Pending is what the last Start left unapplied on a running VM (Restart
// not set), with the command that applies it; "" when nothing.
func (d *Driver) Pending() string { return d.pending.Note(d.vmName()) }

// applyResize applies r to the stopped instance the way `limactl edit` does:
// the lima.yaml is edited with Lima's yq expressions (the user's other
// settings and comments stay), loaded and validated by Lima, and checked
// against the current one (no shrinking); then the disk is grown in place
// and the new lima.yaml written. marina's record of the VM follows.
func (d *Driver) applyResize(ctx context.Context, inst *limatype.Instance, r limavm.Resize) error {
	path := filepath.Join(inst.Dir, filenames.LimaYAML)
	b, err := resizedLimaYAML(ctx, path, r)
	if err != nil {
		return err
	}
	if !limavm.SameSize(r.Disk[0], r.Disk[1]) {
		size, err := units.RAMInBytes(r.Disk[1])
		if err != nil {
			return fmt.Errorf("vm.disk %q: %w", r.Disk[1], err)
		}
		if err := growDisk(ctx, diskPath(inst.Dir), size); err != nil {
			return err
		}
	}
	if b != nil {
		if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("write the VM's Lima configuration %s: %w", path, err)
		}
	}
	rec, err := readRecord(inst.Dir)
	if err != nil || rec == nil {
		// No record (a VM marina adopted): Status compares the lima.yaml.
		return nil
	}
	rec.CPUs, rec.Memory, rec.Disk = r.CPUs[1], r.Memory[1], r.Disk[1]
	return writeRecord(inst.Dir, *rec)
}

// resizedLimaYAML returns the lima.yaml at path with r applied, by the yq
// expressions `limactl edit --cpus/--memory/--disk` uses, after Lima's
// loader and validation accepted it; nil when nothing changes in the file.
func resizedLimaYAML(ctx context.Context, path string, r limavm.Resize) ([]byte, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the VM's Lima configuration: %w", err)
	}
	var exprs []string
	if r.CPUs[0] != r.CPUs[1] {
		exprs = append(exprs, fmt.Sprintf(".cpus = %d", r.CPUs[1]))
	}
	if !limavm.SameSize(r.Memory[0], r.Memory[1]) {
		exprs = append(exprs, fmt.Sprintf(".memory = %q", r.Memory[1]))
	}
	if !limavm.SameSize(r.Disk[0], r.Disk[1]) {
		exprs = append(exprs, fmt.Sprintf(".disk = %q", r.Disk[1]))
	}
	if len(exprs) == 0 {
		return nil, nil
	}
	b, err := yqutil.EvaluateExpression(ctx, yqutil.Join(exprs), old)
	if err != nil {
		return nil, fmt.Errorf("edit the VM's Lima configuration %s: %w", path, err)
	}
	y, err := limayaml.Load(ctx, b, path)
	if err != nil {
		return nil, fmt.Errorf("the resized Lima configuration: %w", err)
	}
	if err := driverutil.ResolveVMType(y); err != nil {
		return nil, fmt.Errorf("the resized Lima configuration: %w", err)
	}
	if err := limayaml.Validate(y, false); err != nil {
		return nil, fmt.Errorf("the resized Lima configuration (vm.cpus %d, vm.memory %s, vm.disk %s) is invalid: %w", r.CPUs[1], r.Memory[1], r.Disk[1], err)
	}
	if err := limayaml.ValidateAgainstLatestConfig(ctx, b, old); err != nil {
		return nil, fmt.Errorf("the resized Lima configuration is refused: %w", err)
	}
	return b, nil
}

// diskPath is the instance's disk: Lima 2's "disk", or a migrated
// instance's legacy "diffdisk" when there is no "disk" (Lima links one to
// the other when it migrates an instance).
func diskPath(instDir string) string {
	p := filepath.Join(instDir, filenames.Disk)
	if _, err := os.Lstat(p); err != nil {
		if legacy := filepath.Join(instDir, filenames.DiffDiskLegacy); fileExists(legacy) {
			return legacy
		}
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// sectorSize is what Lima rounds raw disks to (nativeimgutil).
const sectorSize = 512

// growDisk grows the disk image at path to size bytes in place, as Lima's
// start does when lima.yaml's disk is larger than the image (prepareDisk):
// a raw image is extended (sparse), a qcow2 image is resized with qemu-img,
// an ASIF image with diskutil. A missing image is left to Lima, which
// creates it at lima.yaml's size. A smaller size is refused, naming vm.disk.
func growDisk(ctx context.Context, path string, size int64) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open the VM's disk: %w", err)
	}
	img, err := qcow2reader.Open(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("read the VM's disk %s: %w", path, err)
	}
	have, typ := img.Size(), img.Type()
	_ = img.Close()
	f.Close()
	switch {
	case size == have:
		return nil
	case size < have:
		return shrinkError(units.BytesSize(float64(size)), units.BytesSize(float64(have)))
	case size%sectorSize != 0:
		// Lima would round the image up, then refuse to start because the
		// image is larger than lima.yaml says.
		return fmt.Errorf("vm.disk is %d bytes, not a multiple of %d: use a size in MiB or GiB", size, sectorSize)
	}
	switch typ {
	case raw.Type:
		err = (&nativeimgutil.NativeImageUtil{}).ResizeDisk(ctx, path, size)
	case qcow2.Type:
		// Truncating a qcow2 file would not resize the disk it holds (and
		// Lima's fallback without qemu-img does just that): qemu-img only.
		if _, lerr := exec.LookPath("qemu-img"); lerr != nil {
			return fmt.Errorf("the VM's disk %s is qcow2 and growing it needs qemu-img, which is not installed (brew install qemu); the disk is unchanged", path)
		}
		err = (&qemuimgutil.QemuImageUtil{DefaultFormat: qemuimgutil.QemuImgFormat}).ResizeDisk(ctx, path, size)
	case asif.Type:
		err = asifutil.ResizeASIF(path, size)
	default:
		return fmt.Errorf("the VM's disk %s is a %s image, which marina cannot grow; the disk is unchanged", path, typ)
	}
	if err != nil {
		return fmt.Errorf("grow the VM's disk %s to %s: %w", path, units.BytesSize(float64(size)), err)
	}
	return nil
}

// restartToResize stops the running VM gracefully and applies r; the caller
// boots it again. It returns the stopped instance as Lima reads it now.
func (d *Driver) restartToResize(ctx context.Context, inst *limatype.Instance, r limavm.Resize, say func(string)) (*limatype.Instance, error) {
	say(fmt.Sprintf("stopping the VM %s to apply %s", d.vmName(), r))
	_ = d.guest.Close()
	if err := d.lima.Stop(ctx, inst); err != nil {
		return nil, fmt.Errorf("stop the VM %s to apply %s: %w", d.vmName(), r, err)
	}
	next, err := d.lima.Inspect(ctx, d.vmName())
	if err != nil {
		return nil, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	if next.Status != limatype.StatusStopped {
		return nil, fmt.Errorf("the VM %s is %q after it was stopped to apply %s%s; `marina up` starts it again", d.vmName(), next.Status, r, instErrors(next))
	}
	say(fmt.Sprintf("resizing the VM %s: %s", d.vmName(), r))
	if err := d.applyResize(ctx, next, r); err != nil {
		return nil, fmt.Errorf("%w; the VM is stopped and unchanged: `marina up` starts it once the change can be applied or vm.cpus, vm.memory and vm.disk are set back", err)
	}
	next, err = d.lima.Inspect(ctx, d.vmName())
	if err != nil {
		return nil, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	return next, nil
}
