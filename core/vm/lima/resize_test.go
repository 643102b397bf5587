package lima

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"

	qcow2reader "github.com/lima-vm/go-qcow2reader"
	"github.com/lima-vm/go-qcow2reader/image/qcow2"
	"github.com/lima-vm/lima/v2/pkg/imgutil/nativeimgutil"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limayaml"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm/limavm"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

func TestResizeString(t *testing.T) {
	r := limavm.Resize{CPUs: [2]int{4, 6}, Memory: [2]string{"10GiB", "12GiB"}, Disk: [2]string{"40GiB", "40960MiB"}}
	if got := r.String(); got != "cpus 4→6, memory 10GiB→12GiB" {
		t.Errorf("String = %q", got)
	}
	if r.Empty() {
		t.Error("a change of cpus and memory is Empty")
	}
	same := limavm.Resize{CPUs: [2]int{4, 4}, Memory: [2]string{"10GiB", "10240MiB"}, Disk: [2]string{"40GiB", "40GiB"}}
	if !same.Empty() || same.String() != "" {
		t.Errorf("equal sizes are a change: %q", same)
	}
}

// TestResizedLimaYAMLGolden edits a user's lima.yaml (comments, a user
// name, provisioning of its own) the way `limactl edit --cpus --memory
// --disk` does: only the three fields change.
func TestResizedLimaYAMLGolden(t *testing.T) {
	dir := t.TempDir()
	in, err := os.ReadFile(filepath.Join("testdata", "resize", "klimax-user.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lima.yaml")
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}
	r := limavm.Resize{CPUs: [2]int{4, 6}, Memory: [2]string{"10GiB", "12GiB"}, Disk: [2]string{"40GiB", "60GiB"}}
	got, err := resizedLimaYAML(context.Background(), path, r)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/resize/klimax-user.resized.yaml", got)
	// The file itself is written only by applyResize, after the disk grew.
	if now, _ := os.ReadFile(path); !bytes.Equal(now, in) {
		t.Error("resizedLimaYAML wrote the file")
	}
	// Only the three lines differ.
	var changed []string
	inLines, gotLines := strings.Split(string(in), "\n"), strings.Split(string(got), "\n")
	if len(inLines) != len(gotLines) {
		t.Fatalf("the edit changed the number of lines: %d -> %d", len(inLines), len(gotLines))
	}
	for i := range inLines {
		if inLines[i] != gotLines[i] {
			changed = append(changed, gotLines[i])
		}
	}
	if !reflect.DeepEqual(changed, []string{"cpus: 6  # the user's own comment stays", "memory: 12GiB", "disk: 60GiB"}) {
		t.Errorf("changed lines = %q", changed)
	}
}

// TestResizedLimaYAMLKeepsTheRest parses marina's own lima.yaml back with
// Lima's loader after the edit: everything but cpus, memory and disk is as
// before.
func TestResizedLimaYAMLKeepsTheRest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeLimaYAML(t, dir, nil)
	path := filepath.Join(dir, "lima.yaml")
	before, _ := os.ReadFile(path)
	got, err := resizedLimaYAML(ctx, path, limavm.Resize{CPUs: [2]int{4, 6}, Memory: [2]string{"10GiB", "10GiB"}, Disk: [2]string{"40GiB", "100GiB"}})
	if err != nil {
		t.Fatal(err)
	}
	old, err := limayaml.Load(ctx, before, path)
	if err != nil {
		t.Fatal(err)
	}
	y, err := limayaml.Load(ctx, got, path)
	if err != nil {
		t.Fatal(err)
	}
	if *y.CPUs != 6 || *y.Memory != "10GiB" || *y.Disk != "100GiB" {
		t.Errorf("loaded back: cpus %d, memory %s, disk %s", *y.CPUs, *y.Memory, *y.Disk)
	}
	y.CPUs, y.Disk = old.CPUs, old.Disk
	if !reflect.DeepEqual(y, old) {
		t.Error("the edit changed more than cpus, memory and disk")
	}

	// Nothing to change: no new content.
	if b, err := resizedLimaYAML(ctx, path, limavm.Resize{CPUs: [2]int{4, 4}, Memory: [2]string{"10GiB", "10GiB"}, Disk: [2]string{"40GiB", "40GiB"}}); err != nil || b != nil {
		t.Errorf("no change = %d bytes, %v", len(b), err)
	}
	// Lima's validation has the last word.
	if _, err := resizedLimaYAML(ctx, path, limavm.Resize{CPUs: [2]int{4, 4}, Memory: [2]string{"10GiB", "lots"}, Disk: [2]string{"40GiB", "40GiB"}}); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("memory lots = %v, want Lima's refusal", err)
	}
}

// rawDisk creates an empty raw disk of size bytes the way Lima creates one
// (nativeimgutil, a sparse file), with a marker at its start.
func rawDisk(t *testing.T, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk")
	if err := (&nativeimgutil.NativeImageUtil{}).CreateDisk(context.Background(), path, size); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("marina-disk-marker"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// imageSize is the disk's virtual size as Lima reads it (go-qcow2reader,
// as Lima's start does before resizing) and its format.
func imageSize(t *testing.T, path string) (int64, string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := qcow2reader.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	return img.Size(), string(img.Type())
}

func TestGrowRawDisk(t *testing.T) {
	ctx := context.Background()
	path := rawDisk(t, 10*mib)
	if err := growDisk(ctx, path, 24*mib); err != nil {
		t.Fatal(err)
	}
	size, typ := imageSize(t, path)
	if size != 24*mib || typ != "raw" {
		t.Errorf("after growing: %d bytes, %s; want %d, raw", size, typ, 24*mib)
	}
	b := make([]byte, 18)
	f, _ := os.Open(path)
	_, _ = f.ReadAt(b, 0)
	f.Close()
	if string(b) != "marina-disk-marker" {
		t.Errorf("the disk's content was lost: %q", b)
	}

	// The same size: nothing to do.
	if err := growDisk(ctx, path, 24*mib); err != nil {
		t.Fatal(err)
	}
	// Smaller: refused, naming vm.disk and the current size; unchanged.
	err := growDisk(ctx, path, 16*mib)
	if err == nil || !strings.Contains(err.Error(), "vm.disk is 16MiB but the VM's disk is 24MiB") || !strings.Contains(err.Error(), "cannot shrink") {
		t.Errorf("shrink = %v", err)
	}
	// Not a whole number of sectors: Lima would round it up and then
	// refuse to start.
	if err := growDisk(ctx, path, 24*mib+100); err == nil || !strings.Contains(err.Error(), "multiple of 512") {
		t.Errorf("odd size = %v", err)
	}
	if size, _ := imageSize(t, path); size != 24*mib {
		t.Errorf("a refused resize changed the disk to %d bytes", size)
	}
	// No disk yet (created, never started): Lima creates it at the size
	// lima.yaml says.
	if err := growDisk(ctx, filepath.Join(t.TempDir(), "disk"), 24*mib); err != nil {
		t.Errorf("missing disk = %v", err)
	}
}

// qcow2Disk writes a minimal qcow2 (v2 header, 64 KiB clusters, an empty
// L1 table) of virtual size size: what go-qcow2reader, and so Lima, reads
// as a qcow2 disk.
func qcow2Disk(t *testing.T, size int64) string {
	t.Helper()
	const cluster = 64 << 10
	h := qcow2.HeaderFieldsV2{Version: 2, ClusterBits: 16, Size: uint64(size), L1Size: 2, L1TableOffset: cluster}
	copy(h.Magic[:], qcow2.Magic)
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.BigEndian, h); err != nil {
		t.Fatal(err)
	}
	buf.Write(make([]byte, 2*cluster-buf.Len()))
	path := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGrowQcow2NeedsQemuImg(t *testing.T) {
	path := qcow2Disk(t, gib)
	if size, typ := imageSize(t, path); size != gib || typ != "qcow2" {
		t.Fatalf("the test image reads as %d bytes, %s", size, typ)
	}
	before, _ := os.ReadFile(path)
	t.Setenv("PATH", t.TempDir()) // no qemu-img
	err := growDisk(context.Background(), path, 2*gib)
	if err == nil || !strings.Contains(err.Error(), "needs qemu-img") {
		t.Errorf("grow without qemu-img = %v", err)
	}
	// Shrinking is refused before any tool is looked for.
	if err := growDisk(context.Background(), path, gib/2); err == nil || !strings.Contains(err.Error(), "vm.disk is 512MiB but the VM's disk is 1GiB") {
		t.Errorf("shrink = %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a qcow2 disk was changed without qemu-img (truncated?)")
	}
}

// resizeDriver is a fake-Lima driver whose VM (marina's lima.yaml of the
// default config: 4 CPUs, 10GiB, 40GiB) has a real raw disk and a record,
// and whose config now asks for 6 CPUs, 12GiB memory and a 60GiB disk.
func resizeDriver(t *testing.T, status limatype.Status) (*Driver, *fakeLima, string) {
	t.Helper()
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: status, VMType: limatype.QEMU})
	disk := filepath.Join(f.dir, "disk")
	if err := (&nativeimgutil.NativeImageUtil{}).CreateDisk(context.Background(), disk, 40*gib); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(f.dir, recordOf(config.Default(), "darwin", "arm64")); err != nil {
		t.Fatal(err)
	}
	d.cfg.VM.CPUs, d.cfg.VM.Memory, d.cfg.VM.Disk = 6, "12GiB", "60GiB"
	return d, f, disk
}

// loadedSize is lima.yaml's cpus, memory and disk as Lima loads them.
func loadedSize(t *testing.T, dir string) (int, string, string) {
	t.Helper()
	path := filepath.Join(dir, "lima.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	y, err := limayaml.Load(context.Background(), b, path)
	if err != nil {
		t.Fatal(err)
	}
	return *y.CPUs, *y.Memory, *y.Disk
}

func checkResized(t *testing.T, d *Driver, dir, disk string) {
	t.Helper()
	if c, m, s := loadedSize(t, dir); c != 6 || m != "12GiB" || s != "60GiB" {
		t.Errorf("lima.yaml: cpus %d, memory %s, disk %s; want 6, 12GiB, 60GiB", c, m, s)
	}
	if size, _ := imageSize(t, disk); size != 60*gib {
		t.Errorf("disk: %d bytes, want %d", size, 60*gib)
	}
	if st, err := d.Status(context.Background()); err != nil || len(st.Drift) != 0 || st.CPUs != 6 || st.Memory != "12GiB" || st.Disk != "60GiB" {
		t.Errorf("after the resize Status = %+v, %v (the record should follow)", st, err)
	}
}

func TestStartResizesAStoppedVM(t *testing.T) {
	d, f, disk := resizeDriver(t, limatype.StatusStopped)
	ctx := context.Background()
	change, restart, err := pendingResize(ctx, d)
	if err != nil || change != "cpus 4→6, memory 10GiB→12GiB, disk 40GiB→60GiB" || restart {
		t.Errorf("PendingResize = %q, %v, %v", change, restart, err)
	}
	var lines []string
	if _, err := d.Start(ctx, func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start marina hostagent=/opt/marina/bin/marina-lima guestagent=" + d.GuestAgent}; !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls = %q, want %q", f.calls, want)
	}
	if len(lines) == 0 || lines[0] != "resizing the VM marina: cpus 4→6, memory 10GiB→12GiB, disk 40GiB→60GiB" {
		t.Errorf("progress = %q", lines)
	}
	checkResized(t, d, f.dir, disk)
	if d.Pending() != "" {
		t.Errorf("Pending = %q", d.Pending())
	}
}

func TestStartRestartsARunningVMToResize(t *testing.T) {
	d, f, disk := resizeDriver(t, limatype.StatusRunning)
	d.Restart = true
	ctx := context.Background()
	if change, restart, err := pendingResize(ctx, d); err != nil || change == "" || !restart {
		t.Errorf("PendingResize = %q, %v, %v", change, restart, err)
	}
	// Stop sees the disk at its old size; Start sees the resized VM.
	var atStop, atStart int64
	f.onStop = func() { atStop, _ = imageSize(t, disk) }
	f.beforeStart = func() { atStart, _ = imageSize(t, disk) }
	if _, err := d.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"wait marina 10m0s", "stop marina", "start marina hostagent=/opt/marina/bin/marina-lima guestagent=" + d.GuestAgent}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls = %q, want %q", f.calls, want)
	}
	if atStop != 40*gib || atStart != 60*gib {
		t.Errorf("disk at stop %d, at start %d: want it grown between the two", atStop, atStart)
	}
	checkResized(t, d, f.dir, disk)
}

func TestStartLeavesARunningVMWithoutRestart(t *testing.T) {
	d, f, disk := resizeDriver(t, limatype.StatusRunning)
	ctx := context.Background()
	// Start will not apply it: nothing for up's plan.
	if change, restart, err := pendingResize(ctx, d); err != nil || change != "" || restart {
		t.Errorf("PendingResize = %q, %v, %v", change, restart, err)
	}
	if r, err := d.PlanResize(ctx); err != nil || r.String() != "cpus 4→6, memory 10GiB→12GiB, disk 40GiB→60GiB" || !r.Running {
		t.Errorf("PlanResize = %+v, %v", r, err)
	}
	path := filepath.Join(f.dir, "lima.yaml")
	before, _ := os.ReadFile(path)
	var lines []string
	if _, err := d.Start(ctx, func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"wait marina 10m0s"}; !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls = %q, want %q", f.calls, want)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("lima.yaml changed while the VM runs")
	}
	if size, _ := imageSize(t, disk); size != 40*gib {
		t.Errorf("the disk of a running VM was resized to %d", size)
	}
	p := d.Pending()
	for _, s := range []string{"cpus 4→6, memory 10GiB→12GiB, disk 40GiB→60GiB", "marina up --restart"} {
		if !strings.Contains(p, s) {
			t.Errorf("Pending = %q, want it to contain %q", p, s)
		}
	}
	if !reflect.DeepEqual(lines, []string{p}) {
		t.Errorf("progress = %q", lines)
	}
	// Status still shows the difference.
	if st, _ := d.Status(ctx); len(st.Drift) != 3 {
		t.Errorf("drift = %q", st.Drift)
	}
}

func TestStartRefusesToShrinkTheDisk(t *testing.T) {
	for _, status := range []limatype.Status{limatype.StatusStopped, limatype.StatusRunning} {
		t.Run(string(status), func(t *testing.T) {
			d, f, disk := resizeDriver(t, status)
			d.Restart = true
			d.cfg.VM.Disk = "20GiB"
			path := filepath.Join(f.dir, "lima.yaml")
			before, _ := os.ReadFile(path)
			_, err := d.Start(context.Background(), nil)
			if err == nil || !strings.Contains(err.Error(), "vm.disk is 20GiB but the VM's disk is 40GiB") {
				t.Fatalf("Start = %v", err)
			}
			if _, _, err := pendingResize(context.Background(), d); err == nil {
				t.Error("PendingResize accepts a smaller disk")
			}
			if len(f.calls) != 0 {
				t.Errorf("calls = %q", f.calls)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("lima.yaml changed")
			}
			if size, _ := imageSize(t, disk); size != 40*gib {
				t.Errorf("disk = %d", size)
			}
		})
	}
}

// pendingResize is what up's plan gets from marina's driver
// (limavm.Driver.PendingResize): this driver's PlanResize, read by
// Resize.Planned with its Restart.
func pendingResize(ctx context.Context, d *Driver) (string, bool, error) {
	r, err := d.PlanResize(ctx)
	if err != nil {
		return "", false, err
	}
	change, restart := r.Planned(d.Restart)
	return change, restart, nil
}

// TestRunningVMTakesAChangedProxyAtRestart (issue 25): the VM runs with
// the provisioning it booted with; a proxy added to the config since is
// neither applied nor silently dropped: PlanResize and Start say the
// provisioning waits for a restart, with the command; with Restart the VM
// is restarted and boots with the new provisioning in lima.yaml.
func TestRunningVMTakesAChangedProxyAtRestart(t *testing.T) {
	old := proxyEnv
	proxyEnv = func(string) string { return "" } // not this machine's environment
	t.Cleanup(func() { proxyEnv = old })
	d, f, _ := resizeDriver(t, limatype.StatusRunning)
	d.cfg.VM.CPUs, d.cfg.VM.Memory, d.cfg.VM.Disk = 4, "10GiB", "40GiB" // the size as created
	ctx := context.Background()
	r, err := d.PlanResize(ctx)
	if err != nil || !r.Empty() {
		t.Fatalf("before the change PlanResize = %+v, %v; want nothing", r, err)
	}
	d.cfg.Proxy.HTTPS = "http://proxy.corp.example:3128"
	r, err = d.PlanResize(ctx)
	if err != nil || !r.Provision || r.String() != "provisioning (proxy, trust.extraCAs or pinned versions)" {
		t.Fatalf("PlanResize = %+v (%q), %v; want the provisioning", r, r.String(), err)
	}
	path := filepath.Join(f.dir, "lima.yaml")
	before, _ := os.ReadFile(path)
	if _, err := d.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("lima.yaml changed while the VM runs")
	}
	if p := d.Pending(); !strings.Contains(p, "provisioning") || !strings.Contains(p, "marina up --restart") {
		t.Errorf("Pending = %q; want the provisioning and the command", p)
	}

	d.Restart = true
	f.calls = nil
	if _, err := d.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"wait marina 10m0s", "stop marina", "start marina hostagent=/opt/marina/bin/marina-lima guestagent=" + d.GuestAgent}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls = %q, want %q", f.calls, want)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "proxy.corp.example:3128") {
		t.Errorf("after the restart lima.yaml's provisioning has no proxy:\n%s", b)
	}
}
