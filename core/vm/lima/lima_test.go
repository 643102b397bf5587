package lima

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limatype"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/limavm"
	"github.com/bcollard/marina/core/vm/limavm/sshtest"
)

// fakeDriver is a Driver on a fake Lima whose instance directory is in a
// temp dir, with Docker answering unless dockerErr is set.
func fakeDriver(t *testing.T, inst *limatype.Instance) (*Driver, *fakeLima) {
	t.Helper()
	home := t.TempDir()
	f := &fakeLima{inst: inst, dir: filepath.Join(home, ".marina", "lima", "marina"), onStart: limatype.StatusRunning}
	if inst != nil && inst.Dir == "" {
		inst.Dir = f.dir
		writeLimaYAML(t, f.dir, nil)
	}
	d := New(config.Default(), home, nil)
	d.lima = f
	d.goos, d.goarch = "darwin", "arm64"
	d.host = hermeticHost(t, home)
	d.GuestAgent = fakeFile(t, filepath.Join(home, "opt", "marina", "share", "lima", "lima-guestagent.Linux-aarch64.gz"))
	d.Executable = "/opt/marina/bin/marina-lima"
	d.pingDocker = func(context.Context, string) error { return nil }
	d.dockerWait = time.Second
	return d, f
}

// writeLimaYAML writes the instance's lima.yaml as marina renders it, with
// prov as its provisioning (nil: the current one).
func writeLimaYAML(t *testing.T, dir string, prov *limavm.Provision) {
	t.Helper()
	y, err := Template(config.Default(), TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome, Provision: prov})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(y)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lima.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStatus(t *testing.T) {
	srv := sshtest.Start(t)
	for _, tc := range []struct {
		name       string
		inst       *limatype.Instance
		dockerDown bool
		want       vm.State
		detail     string
		guestIP    string
	}{
		{name: "absent", want: vm.Absent},
		{name: "stopped", inst: &limatype.Instance{Status: limatype.StatusStopped, VMType: limatype.VZ}, want: vm.Stopped, detail: "marina up"},
		{name: "running", inst: &limatype.Instance{Status: limatype.StatusRunning, VMType: limatype.VZ, SSHLocalPort: srv.Port}, want: vm.Running, guestIP: "192.168.64.7"},
		{name: "running qemu (no lima0)", inst: &limatype.Instance{Status: limatype.StatusRunning, VMType: limatype.QEMU, SSHLocalPort: srv.Port}, want: vm.Running},
		{name: "docker down", inst: &limatype.Instance{Status: limatype.StatusRunning, VMType: limatype.VZ, SSHLocalPort: srv.Port}, dockerDown: true, want: vm.Stopped, detail: "Docker does not answer"},
		{name: "broken", inst: &limatype.Instance{Status: limatype.StatusBroken, Errors: []error{errors.New("host agent is running but driver is not")}}, want: vm.Stopped, detail: "driver is not"},
		{name: "installing", inst: &limatype.Instance{Status: limatype.StatusInstalling}, want: vm.Stopped, detail: "Installing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := fakeDriver(t, tc.inst)
			if tc.inst != nil {
				// Lima's key where marina's LIMA_HOME keeps it.
				key, _ := os.ReadFile(srv.KeyFile)
				_ = os.MkdirAll(filepath.Dir(d.sshKey()), 0o700)
				if err := os.WriteFile(d.sshKey(), key, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := writeRecord(tc.inst.Dir, recordOf(d.cfg, "darwin", "arm64")); err != nil {
					t.Fatal(err)
				}
			}
			if tc.dockerDown {
				d.pingDocker = func(context.Context, string) error { return errors.New("connection refused") }
			}
			st, err := d.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tc.want || st.GuestIP != tc.guestIP || !strings.Contains(st.Detail, tc.detail) || (tc.detail == "" && st.Detail != "") {
				t.Errorf("Status = %+v, want state %s, guest IP %q, detail containing %q", st, tc.want, tc.guestIP, tc.detail)
			}
			if st.Driver != "lima" || st.Name != "marina" {
				t.Errorf("Status names %s/%s", st.Driver, st.Name)
			}
			if tc.inst != nil {
				if want := "unix://" + filepath.Join(d.home, ".marina.docker.sock"); st.DockerHost != want {
					t.Errorf("DockerHost = %q, want %q", st.DockerHost, want)
				}
				if st.CPUs != 4 || st.Memory != "10GiB" || st.Disk != "40GiB" || len(st.Drift) != 0 {
					t.Errorf("resources/drift = %d %s %s %q", st.CPUs, st.Memory, st.Disk, st.Drift)
				}
			}
		})
	}
}

func TestDrift(t *testing.T) {
	created := recordOf(config.Default(), "darwin", "arm64")
	if d := Drift(created, created); len(d) != 0 {
		t.Errorf("no change, drift %q", d)
	}
	cfg := config.Default()
	cfg.VM.CPUs = 6
	cfg.VM.Memory = "10240MiB" // the same size, spelt differently
	cfg.VM.Disk = "60GiB"
	cfg.VM.Rosetta = true
	cfg.Registries.CacheStorage = "guest"
	cfg.Network.DisablePortMirroring = false
	want := []string{
		"vm.cpus: the config says 6, the VM was created with 4",
		"vm.disk: the config says 60GiB, the VM was created with 40GiB",
		"vm.rosetta: the config says true, the VM was created with false",
		"registries.cacheStorage: the config says guest, the VM was created with host",
		"network.disablePortMirroring: the config says false, the VM was created with true",
	}
	if got := Drift(created, recordOf(cfg, "darwin", "arm64")); !reflect.DeepEqual(got, want) {
		t.Errorf("Drift =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Rosetta does not take effect on Intel Macs, so it is no drift there.
	if got := Drift(recordOf(config.Default(), "darwin", "amd64"), recordOf(cfg, "darwin", "amd64")); len(got) != 4 {
		t.Errorf("amd64 drift = %q, want 4 lines without vm.rosetta", got)
	}
}

func TestStatusDriftFromRecord(t *testing.T) {
	d, f := fakeDriver(t, &limatype.Instance{Status: limatype.StatusStopped, VMType: limatype.VZ,
		Config: &limatype.LimaYAML{CPUs: ptr(2), Memory: ptr("4GiB"), Disk: ptr("40GiB")}})
	ctx := context.Background()

	// No record (a VM marina did not create): Lima's own values are compared.
	st, err := d.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Drift) != 3 || !strings.Contains(st.Drift[0], recordFile+" is missing") ||
		st.Drift[1] != "vm.cpus: the config says 4, the VM was created with 2" || !strings.HasPrefix(st.Drift[2], "vm.memory:") {
		t.Errorf("drift without a record = %q", st.Drift)
	}

	if err := writeRecord(f.inst.Dir, Record{CPUs: 4, Memory: "10GiB", Disk: "40GiB", CacheStorage: "host", DisablePortMirroring: true}); err != nil {
		t.Fatal(err)
	}
	d.cfg.Network.DisablePortMirroring = false
	st, _ = d.Status(ctx)
	if !reflect.DeepEqual(st.Drift, []string{"network.disablePortMirroring: the config says false, the VM was created with true"}) {
		t.Errorf("drift = %q", st.Drift)
	}

	if err := os.WriteFile(filepath.Join(f.inst.Dir, recordFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ = d.Status(ctx)
	if len(st.Drift) == 0 || !strings.Contains(st.Drift[0], "is not marina's VM record") {
		t.Errorf("drift with a corrupt record = %q", st.Drift)
	}
}

func TestStartCreatesStartsAndIsIdempotent(t *testing.T) {
	d, f := fakeDriver(t, nil)
	f.onStart = limatype.StatusRunning
	var lines []string
	d.Executable = "/opt/marina/bin/marina-lima"
	st, err := d.Start(context.Background(), func(s string) { lines = append(lines, s) })
	// After the start the fake instance runs as VZ; its guest IP needs SSH,
	// which this test has none of: Status reports that in Detail.
	if err != nil || st.State != vm.Running {
		t.Fatalf("Start = %+v, %v", st, err)
	}
	want := []string{"create marina", "start marina hostagent=/opt/marina/bin/marina-lima guestagent=" + d.GuestAgent}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls = %q, want %q", f.calls, want)
	}
	if !reflect.DeepEqual(lines, []string{"creating the VM marina", "starting the VM marina"}) {
		t.Errorf("progress = %q", lines)
	}
	// Lima got exactly the template.
	y, _ := Template(d.cfg, TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: d.home})
	b, _ := Render(y)
	if string(f.createdYAML) != string(b) {
		t.Error("Lima was given another YAML than Render(Template(cfg))")
	}
	rec, err := readRecord(f.dir)
	if err != nil || rec == nil || *rec != recordOf(d.cfg, "darwin", "arm64") {
		t.Errorf("record = %+v, %v", rec, err)
	}
	if fi, err := os.Stat(limavm.RegistryCacheDir(d.home)); err != nil || !fi.IsDir() {
		t.Errorf("the registry cache directory was not created: %v", err)
	}

	// Running: nothing changes; Lima's report that it is up is waited for
	// (it may still be booting after an interrupted start).
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 3 || f.calls[2] != "wait marina 10m0s" {
		t.Errorf("Start on a running VM called %q", f.calls[2:])
	}
	// Stopped: started, not created again.
	f.inst.Status = limatype.StatusStopped
	if _, err := d.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 4 || !strings.HasPrefix(f.calls[3], "start marina") {
		t.Errorf("Start on a stopped VM: calls %q", f.calls)
	}
}

func TestStartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		inst *limatype.Instance
		edit func(d *Driver, f *fakeLima)
		want string
	}{
		{name: "no vz in this build", edit: func(d *Driver, f *fakeLima) { f.noVZ = true }, want: "CGO_ENABLED=1"},
		{name: "no guest agent", edit: func(d *Driver, f *fakeLima) { d.GuestAgent = "" },
			want: "there is no Go toolchain to build it. Install marina's release archive (it ships share/lima/lima-guestagent.Linux-aarch64.gz beside bin/marina)"},
		{name: "unpinned image", edit: func(d *Driver, f *fakeLima) { d.Images = []limavm.Image{{Arch: "arm64", Location: "https://x/y.img"}} }, want: "pinned by digest"},
		{name: "broken, still after a forcible stop", inst: &limatype.Instance{Status: limatype.StatusBroken}, edit: func(d *Driver, f *fakeLima) {
			d.brokenSettle = 10 * time.Millisecond
			f.afterForce = limatype.StatusBroken
		}, want: "still \"Broken\" after a forcible stop; `marina destroy` removes it"},
		{name: "unknown", inst: &limatype.Instance{Status: limatype.StatusUnknown, Errors: []error{errors.New("lima.yaml: bad")}}, want: "lima.yaml: bad); `marina destroy`"},
		{name: "start fails", inst: &limatype.Instance{Status: limatype.StatusStopped}, edit: func(d *Driver, f *fakeLima) { f.startErr = errors.New("vz: boom") }, want: "ha.stderr.log"},
		{name: "docker never answers", inst: &limatype.Instance{Status: limatype.StatusStopped}, edit: func(d *Driver, f *fakeLima) {
			d.pingDocker = func(context.Context, string) error { return errors.New("no such file") }
		}, want: "Docker does not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, f := fakeDriver(t, tc.inst)
			if tc.edit != nil {
				tc.edit(d, f)
			}
			_, err := d.Start(context.Background(), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want an error containing %q", err, tc.want)
			}
			if tc.inst == nil && len(f.calls) != 0 {
				t.Errorf("a refused start still called Lima: %q", f.calls)
			}
		})
	}
}

func TestStopAndDelete(t *testing.T) {
	ctx := context.Background()
	d, f := fakeDriver(t, nil)
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 0 {
		t.Errorf("absent VM: calls %q", f.calls)
	}
	d, f = fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusStopped})
	if err := d.Stop(ctx); err != nil || len(f.calls) != 0 {
		t.Errorf("stopped VM: Stop = %v, calls %q", err, f.calls)
	}
	f.inst.Status = limatype.StatusRunning
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	f.inst.Status = limatype.StatusRunning
	if err := d.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.calls, []string{"stop marina", "delete marina"}) {
		t.Errorf("calls = %q", f.calls)
	}
}

func TestParseIPAddr(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"3: lima0    inet 192.168.64.3/24 metric 100 brd 192.168.64.255 scope global dynamic lima0\\       valid_lft 86395sec", "192.168.64.3", ""},
		{"3: lima0    inet 10.0.2.15/24 scope global lima0\n3: lima0    inet 10.0.3.1/24 scope global secondary lima0\n", "10.0.2.15", ""},
		{"", "", "no IPv4 address"},
		{"3: lima0    inet bogus brd x", "", "unexpected address"},
	} {
		got, err := parseIPAddr(tc.in)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("parseIPAddr(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestStartRefreshesProvisioning: a VM created by an older marina (other
// pins) gets this marina's provisioning in its lima.yaml before it boots,
// and nothing else in the file changes.
func TestStartRefreshesProvisioning(t *testing.T) {
	d, f := fakeDriver(t, &limatype.Instance{Name: "marina", Status: limatype.StatusStopped, VMType: limatype.VZ})
	old := limavm.DefaultProvision()
	old.Binaries[0].Version = "v0.32.0"
	old.Binaries[0].Files = map[string]limavm.File{"arm64": {URL: "https://example.com/kind-v0.32.0", SHA256: strings.Repeat("1", 64)}}
	writeLimaYAML(t, f.dir, &old)
	path := filepath.Join(f.dir, "lima.yaml")
	before, _ := os.ReadFile(path)

	var lines []string
	if _, err := d.Start(context.Background(), func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	want, _ := os.ReadFile(filepath.Join("testdata", "lima-darwin-arm64-defaults.yaml"))
	if string(after) != string(want) {
		t.Errorf("lima.yaml after the refresh differs from a fresh template:\n%s", after)
	}
	if string(before) == string(after) || len(lines) == 0 || !strings.Contains(lines[0], "updating the VM's provisioning") {
		t.Errorf("no refresh reported: %q", lines)
	}

	// Up to date: the file is left alone.
	f.inst.Status = limatype.StatusStopped
	fi1, _ := os.Stat(path)
	lines = nil
	if _, err := d.Start(context.Background(), func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(path)
	if !fi1.ModTime().Equal(fi2.ModTime()) || len(lines) != 1 {
		t.Errorf("an up-to-date lima.yaml was rewritten; progress %q", lines)
	}
}

func TestSharesRegistryCacheFollowsTheVM(t *testing.T) {
	d, _ := fakeDriver(t, nil)
	d.cfg.Registries.CacheStorage = "guest" // changed after the VM was created with host
	withMount := &limatype.Instance{Config: &limatype.LimaYAML{Mounts: []limatype.Mount{{Location: limavm.RegistryCacheDir(d.home)}}}}
	if !d.sharesRegistryCache(withMount) {
		t.Error("a VM created with the host cache mount needs its directory whatever the config says now")
	}
	d.cfg.Registries.CacheStorage = "host"
	if d.sharesRegistryCache(&limatype.Instance{Config: &limatype.LimaYAML{}}) {
		t.Error("a VM created without the mount does not need it")
	}
}
