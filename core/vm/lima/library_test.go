package lima

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/limavm"
)

// TestRealLimaCreateInspectDelete drives the real Lima library (qemu, as on
// Linux), in process as the engine runs it, under a scratch LIMA_HOME: an absent VM, creating it from marina's
// template (Lima validates it and writes its cloud-init data; nothing
// boots), its status and drift, and deleting it.
//
// Lima refuses to create a VM for root (the guest user takes the host
// user's uid), so as root the test runs itself again as nobody.
func TestRealLimaCreateInspectDelete(t *testing.T) {
	if os.Getuid() == 0 {
		runAsNobody(t, "TestRealLimaCreateInspectDelete")
		return
	}
	old, had := os.LookupEnv("LIMA_HOME")
	t.Cleanup(func() {
		if had {
			_ = os.Setenv("LIMA_HOME", old)
		} else {
			_ = os.Unsetenv("LIMA_HOME")
		}
	})
	home := os.Getenv("MARINA_TEST_HOME")
	if home == "" {
		home = t.TempDir()
	}
	// The engine sets marina's LIMA_HOME before it runs the driver.
	if err := os.Setenv("LIMA_HOME", vm.LimaHome(home)); err != nil {
		t.Fatal(err)
	}
	d := New(config.Default(), home, &Library{})
	d.goos, d.goarch = "linux", "amd64"
	d.pingDocker = func(context.Context, string) error { return nil }
	ctx := context.Background()

	st, err := d.Status(ctx)
	if err != nil || st.State != vm.Absent {
		t.Fatalf("Status before create = %+v, %v", st, err)
	}
	inst, err := d.create(ctx)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if want := filepath.Join(home, ".marina", "lima", "marina"); inst.Dir != want {
		t.Errorf("instance dir = %s, want %s", inst.Dir, want)
	}
	for _, f := range []string{"lima.yaml", "lima-version", recordFile} {
		if _, err := os.Stat(filepath.Join(inst.Dir, f)); err != nil {
			t.Errorf("after create: %v", err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(inst.Dir, "lima-version")); strings.TrimSpace(string(b)) != LimaVersion {
		t.Errorf("lima-version = %q, want %s", b, LimaVersion)
	}

	// The provisioning just written is current; an older one is replaced
	// in a way Lima still accepts.
	if changed, err := refreshProvisioning(inst.Dir, guestUserOf(ctx, inst.Config)); err != nil || changed {
		t.Errorf("refresh right after create = %v, %v", changed, err)
	}
	yamlPath := filepath.Join(inst.Dir, "lima.yaml")
	b, _ := os.ReadFile(yamlPath)
	if err := os.WriteFile(yamlPath, []byte(strings.Replace(string(b), limavm.KindVersion, "v0.32.0", -1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := refreshProvisioning(inst.Dir, guestUserOf(ctx, inst.Config)); err != nil || !changed {
		t.Errorf("refresh of an old provisioning = %v, %v", changed, err)
	}

	st, err = d.Status(ctx)
	if err != nil || st.State != vm.Stopped || st.CPUs != 4 || st.Memory != "10GiB" || st.Arch != "amd64" || len(st.Drift) != 0 {
		t.Fatalf("Status after create = %+v, %v", st, err)
	}
	d.cfg.VM.CPUs = 2
	if st, _ = d.Status(ctx); len(st.Drift) != 1 || !strings.HasPrefix(st.Drift[0], "vm.cpus") {
		t.Errorf("drift after changing vm.cpus = %q", st.Drift)
	}
	// Exec on a VM that does not run says so instead of dialling.
	if _, err := d.Exec(ctx, []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Exec on a stopped VM: %v", err)
	}

	if err := d.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if st, err = d.Status(ctx); err != nil || st.State != vm.Absent {
		t.Fatalf("Status after delete = %+v, %v", st, err)
	}
	if err := d.Delete(ctx); err != nil {
		t.Errorf("Delete of an absent VM: %v", err)
	}
}

// runAsNobody runs the test named test in a child test process as the user
// nobody (65534), with a home directory that user can write.
func runAsNobody(t *testing.T, test string) {
	t.Helper()
	// t.TempDir and the test binary's build directory are private to root.
	dir, err := os.MkdirTemp("", "marina-lima-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, home} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(dir, "lima.test")
	if err := os.WriteFile(child, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(child, "-test.run=^"+test+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "MARINA_TEST_HOME=" + home, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
	}
}
