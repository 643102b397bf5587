package kind

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
)

// recorder is a fake ExecFunc that records argv and stdin.
type recorder struct {
	calls []call
	fail  error
}

type call struct {
	argv  []string
	stdin string
}

func (r *recorder) exec(_ context.Context, argv []string, stdin io.Reader) ([]byte, error) {
	c := call{argv: argv}
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, err
		}
		c.stdin = string(b)
	}
	r.calls = append(r.calls, c)
	return nil, r.fail
}

func TestNodeFiles(t *testing.T) {
	files := []sdk.NodeFile{
		{Path: "/etc/containerd/certs.d/docker.io/hosts.toml", Content: []byte("a"), Mode: 0o600},
		{Path: "/etc/containerd/certs.d/localhost_5000_/hosts.toml", Content: []byte("b")},
	}
	got, err := NodeFiles("dev", files, "/var/lib/marina/node-files")
	if err != nil {
		t.Fatal(err)
	}
	want := []PlacedFile{
		{NodePath: files[0].Path, HostPath: "/var/lib/marina/node-files/dev/etc/containerd/certs.d/docker.io/hosts.toml", Content: []byte("a"), Mode: 0o600},
		{NodePath: files[1].Path, HostPath: "/var/lib/marina/node-files/dev/etc/containerd/certs.d/localhost_5000_/hosts.toml", Content: []byte("b"), Mode: 0o644},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NodeFiles =\n%+v\nwant\n%+v", got, want)
	}

	bad := []struct {
		name    string
		cluster string
		files   []sdk.NodeFile
		dir     string
		want    string
	}{
		{"bad cluster", "../x", nil, "/d", "cluster name"},
		{"relative dir", "dev", nil, "d", "node files directory: path \"d\""},
		{"dir with dots", "dev", nil, "/d/../e", "must be clean"},
		{"root dir", "dev", nil, "/", "must be absolute"},
		{"empty dir", "dev", nil, "", "node files directory is empty"},
		{"file twice", "dev", []sdk.NodeFile{{Path: "/etc/x"}, {Path: "/etc/x"}}, "/d", "listed twice"},
		{"escaping file", "dev", []sdk.NodeFile{{Path: "/etc/../../../x"}}, "/d", "must be clean"},
		{"too big", "dev", []sdk.NodeFile{{Path: "/etc/x", Content: make([]byte, MaxNodeFileSize+1)}}, "/d", "at most"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NodeFiles(tt.cluster, tt.files, tt.dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NodeFiles error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestPlaceFilesArgv(t *testing.T) {
	placed, err := NodeFiles("dev", []sdk.NodeFile{
		{Path: "/etc/a/hosts.toml", Content: []byte("server = 'x'\n")},
		{Path: "/etc/b/key", Content: []byte("secret"), Mode: 0o600},
	}, "/var/lib/marina/node-files")
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	if err := PlaceFiles(context.Background(), r.exec, placed); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{argv: []string{"install", "-D", "-m", "0644", "/dev/stdin", "/var/lib/marina/node-files/dev/etc/a/hosts.toml"}, stdin: "server = 'x'\n"},
		{argv: []string{"install", "-D", "-m", "0600", "/dev/stdin", "/var/lib/marina/node-files/dev/etc/b/key"}, stdin: "secret"},
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("calls =\n%q\nwant\n%q", r.calls, want)
	}

	r = recorder{}
	if err := RemoveFiles(context.Background(), r.exec, "dev", "/var/lib/marina/node-files"); err != nil {
		t.Fatal(err)
	}
	if want := []call{{argv: []string{"rm", "-rf", "--", "/var/lib/marina/node-files/dev"}}}; !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("RemoveFiles calls = %q, want %q", r.calls, want)
	}

	// Errors name the file and keep the cause.
	boom := errors.New("ssh: connection lost")
	r = recorder{fail: boom}
	err = PlaceFiles(context.Background(), r.exec, placed)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "/etc/a/hosts.toml") {
		t.Fatalf("PlaceFiles error = %v, want the file and the cause", err)
	}
	if len(r.calls) != 1 {
		t.Fatalf("PlaceFiles went on after a failure: %d calls", len(r.calls))
	}

	// Hand-made PlacedFiles are checked before anything runs.
	for _, f := range []PlacedFile{
		{NodePath: "/etc/x", HostPath: "/d/../etc/passwd", Mode: 0o644},
		{NodePath: "/etc/x", HostPath: "relative", Mode: 0o644},
		{NodePath: "/etc/x", HostPath: "/d/x", Mode: 0},
		{NodePath: "/etc/x", HostPath: "/d/x", Mode: fs.ModeSetuid | 0o755},
	} {
		r = recorder{}
		if err := PlaceFiles(context.Background(), r.exec, []PlacedFile{f}); err == nil || len(r.calls) != 0 {
			t.Errorf("PlaceFiles(%+v) = %v after %d calls, want an error before any", f, err, len(r.calls))
		}
	}
	if err := RemoveFiles(context.Background(), (&recorder{}).exec, "..", "/d"); err == nil {
		t.Error("RemoveFiles accepted the cluster name ..")
	}
	if err := RemoveFiles(context.Background(), (&recorder{}).exec, "dev", "/"); err == nil {
		t.Error("RemoveFiles accepted the directory /")
	}
}

// TestPlaceFilesReal runs the argv for real, on this machine, with every
// absolute path but /dev/stdin moved under a temporary root: the commands
// marina sends to the Docker host do what they should.
func TestPlaceFilesReal(t *testing.T) {
	for _, tool := range []string{"install", "rm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	root := t.TempDir()
	local := func(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error) {
		args := make([]string, len(argv))
		for i, a := range argv {
			if strings.HasPrefix(a, "/") && a != "/dev/stdin" {
				a = filepath.Join(root, a)
			}
			args[i] = a
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdin = stdin
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, errors.New(err.Error() + ": " + stderr.String())
		}
		return out, nil
	}
	const dir = "/var/lib/marina/node-files"
	files := []sdk.NodeFile{
		{Path: "/etc/containerd/certs.d/docker.io/hosts.toml", Content: []byte("server = 'https://registry-1.docker.io'\n")},
		{Path: "/etc/acme/token", Content: []byte("s3cr3t"), Mode: 0o600},
		{Path: "/etc/acme/empty", Content: nil, Mode: 0o640},
	}
	placed, err := NodeFiles("dev", files, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 { // idempotent: the second run rewrites the same files
		if err := PlaceFiles(ctx, local, placed); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range placed {
		p := filepath.Join(root, f.HostPath)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("%s holds %q, want %q", f.HostPath, got, f.Content)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != f.Mode {
			t.Errorf("%s has mode %v, want %v", f.HostPath, st.Mode().Perm(), f.Mode)
		}
	}
	// Another cluster's files survive RemoveFiles.
	other, err := NodeFiles("prod", files[:1], dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := PlaceFiles(ctx, local, other); err != nil {
		t.Fatal(err)
	}
	for range 2 { // removing what is gone is fine
		if err := RemoveFiles(ctx, local, "dev", dir); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, dir, "dev")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cluster dev's files are still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, other[0].HostPath)); err != nil {
		t.Errorf("cluster prod's file is gone: %v", err)
	}
}

// FuzzNodePath checks that every node path NodeFiles accepts lands inside
// <dir>/<cluster> on the Docker host and is clean there.
func FuzzNodePath(f *testing.F) {
	for _, s := range []string{"/etc/x", "/etc/../x", "/etc//x", "/./x", "/etc/x/", "x", "/", "/etc/a:b", "/etc/a b", "/var/x", "/etc/..x", "/..."} {
		f.Add(s)
	}
	const dir = "/srv/files"
	f.Fuzz(func(t *testing.T, p string) {
		placed, err := NodeFiles("dev", []sdk.NodeFile{{Path: p}}, dir)
		if err != nil {
			return
		}
		h := placed[0].HostPath
		if path.Clean(h) != h || !strings.HasPrefix(h, dir+"/dev/") || path.Clean(p) != p || !path.IsAbs(p) {
			t.Fatalf("node path %q accepted as host path %q", p, h)
		}
		if strings.ContainsAny(h, ":, \t\n") {
			t.Fatalf("host path %q carries a character Docker's --volume cannot", h)
		}
	})
}
