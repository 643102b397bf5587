package pluginstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/bcollard/marina/sdk"
)

// Real plugin binaries built once from testdata/plugin by TestMain.
var bins struct {
	v120, v130, v200 string // this machine's platform
	other            string // 1.2.0 built for otherArch
	metallb          string // 1.0.0 calling itself metallb, a built-in's name
}

// otherArch is a CPU architecture this machine is not.
var otherArch = map[bool]string{true: "amd64", false: "arm64"}[runtime.GOARCH == "arm64"]

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pluginstore-bins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		builds := []struct {
			out                 *string
			name, version, arch string
		}{
			{&bins.v120, "acme", "1.2.0", runtime.GOARCH},
			{&bins.v130, "acme", "1.3.0", runtime.GOARCH},
			{&bins.v200, "acme", "2.0.0", runtime.GOARCH},
			{&bins.other, "acme", "1.2.0", otherArch},
			{&bins.metallb, "metallb", "1.0.0", runtime.GOARCH},
		}
		errs := make([]error, len(builds))
		var wg sync.WaitGroup
		for i, b := range builds {
			*b.out = filepath.Join(dir, fmt.Sprintf("marina-plugin-%s_%s_%s", b.name, b.version, b.arch))
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.CommandContext(ctx, "go", "build", "-o", *b.out, "-ldflags", "-s -w -X main.name="+b.name+" -X main.version="+b.version, "./testdata/plugin")
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+b.arch)
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("build test plugin %s for %s: %v\n%s", b.version, b.arch, err, out)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// describeReal launches the binary with go-plugin exactly as marina's
// runtime does (gRPC, AutoMTLS, the SDK's handshake) and asks it to describe
// itself.
func describeReal(ctx context.Context, path string) (*sdk.Description, error) {
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.HostPluginSets(),
		Cmd:              exec.Command(path),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           hclog.NewNullLogger(),
		StartTimeout:     20 * time.Second,
		SyncStderr:       io.Discard,
	})
	defer client.Kill()
	rpc, err := client.Client()
	if err != nil {
		return nil, err
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		return nil, err
	}
	hc, ok := raw.(*sdk.HostClient)
	if !ok {
		return nil, fmt.Errorf("dispensed %T, want *sdk.HostClient", raw)
	}
	return hc.Describe(ctx, "pluginstore-test")
}

// counting wraps a Describer and counts launches.
type counting struct {
	n    atomic.Int32
	next Describer
}

func (c *counting) describe(ctx context.Context, path string) (*sdk.Description, error) {
	c.n.Add(1)
	return c.next(ctx, path)
}

// fixedDescriber returns d whatever binary it is given (without launching it).
func fixedDescriber(d sdk.Description) Describer {
	return func(context.Context, string) (*sdk.Description, error) {
		cp := d
		return &cp, nil
	}
}

// newStore returns a store in a fresh temp dir using the real describer.
func newStore(t testing.TB) *Store {
	t.Helper()
	dir := t.TempDir()
	return Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins.lock"), describeReal)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustInstall installs src or fails the test.
func mustInstall(t *testing.T, s *Store, src string, opts InstallOptions) *Installed {
	t.Helper()
	inst, err := s.Install(testCtx(t), src, opts)
	if err != nil {
		t.Fatalf("Install(%s): %v", src, err)
	}
	return inst
}

// wantErr checks err is of kind and its message contains every fragment.
func wantErr(t *testing.T, err, kind error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", kind)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("error %q is not %v", err, kind)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not contain %q", err, f)
		}
	}
}

// assertNoLeftovers fails if the store root holds temporary directories.
func assertNoLeftovers(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".install-") || strings.HasPrefix(e.Name(), ".remove-") {
			t.Errorf("leftover %s in %s", e.Name(), root)
		}
	}
}

func sha(t *testing.T, path string) string {
	t.Helper()
	sum, err := hashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}
