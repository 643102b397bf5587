package lima

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limayaml"
)

// limaDefaultUser is Lima v2.2.0's default guest user, restated from its
// documentation (osutil.LimaUser): the host user's name when it is a valid
// Linux user name other than admin, else lima.
func limaDefaultUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`).MatchString(u.Username) || u.Username == "admin" {
		return "lima"
	}
	return u.Username
}

// TestGuestUserOfKlimaxFixtures reads klimax's lima.yaml files with Lima's
// own loader (defaults filled in, as Lima's Inspect does): the guest user is
// user.name when set, Lima's default otherwise — never a constant.
func TestGuestUserOfKlimaxFixtures(t *testing.T) {
	t.Setenv("LIMA_HOME", t.TempDir()) // no default.yaml/override.yaml of this machine
	ctx := context.Background()
	for _, tc := range []struct{ file, want string }{
		{"klimax-lima-user-set.yaml", "bcollard"},
		{"klimax-lima-user-unset.yaml", limaDefaultUser(t)},
		{"lima-darwin-arm64-defaults.yaml", "lima"}, // what marina creates
	} {
		path := filepath.Join("testdata", tc.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		y, err := limayaml.Load(ctx, b, path)
		if err != nil {
			t.Fatalf("%s: Lima's loader: %v", tc.file, err)
		}
		if got := guestUserOf(ctx, y); got != tc.want {
			t.Errorf("%s: guest user %q, want %q", tc.file, got, tc.want)
		}
		// Without Lima's defaults (a plain unmarshal) the answer is the same.
		var raw limatype.LimaYAML
		if err := limayaml.Unmarshal(b, &raw, path); err != nil {
			t.Fatal(err)
		}
		if got := guestUserOf(ctx, &raw); got != tc.want {
			t.Errorf("%s unmarshalled: guest user %q, want %q", tc.file, got, tc.want)
		}
	}
}

// TestAdoptedVMUsesItsGuestUser: a klimax VM whose lima.yaml names another
// user gets its Docker socket handed to that user at the next boot, and
// marina logs in as that user.
func TestAdoptedVMUsesItsGuestUser(t *testing.T) {
	t.Setenv("LIMA_HOME", t.TempDir())
	d, f := fakeDriver(t, nil)
	b, err := os.ReadFile(filepath.Join("testdata", "klimax-lima-user-set.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "lima.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.inst = &limatype.Instance{Name: "marina", Dir: f.dir, Status: limatype.StatusStopped, VMType: limatype.VZ, SSHLocalPort: 60022}
	ctx := context.Background()
	if _, err := d.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !strings.Contains(string(after), "SocketUser=bcollard\n") || strings.Contains(string(after), "SocketUser=lima") {
		t.Errorf("the refreshed provisioning does not hand the Docker socket to bcollard:\n%s", after)
	}
	var y limatype.LimaYAML
	if err := limayaml.Unmarshal(after, &y, path); err != nil || y.User.Name == nil || *y.User.Name != "bcollard" {
		t.Errorf("user.name after the refresh: %v, %v", y.User.Name, err)
	}

	target, err := d.SSHTarget(ctx)
	if err != nil || target.User != "bcollard" || target.Addr != "127.0.0.1:60022" {
		t.Errorf("SSHTarget = %+v, %v", target, err)
	}
}
