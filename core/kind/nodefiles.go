package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/bcollard/marina/sdk"
)

// MaxNodeFileSize bounds one node file's content: node files are small
// configuration files, sent through the Docker host's stdin.
const MaxNodeFileSize = 1 << 20

// DefaultNodeFileMode is the mode of a node file whose Mode is 0.
const DefaultNodeFileMode fs.FileMode = 0o644

// pathRE is the shape of every path this package writes or mounts: absolute,
// segments of letters, digits and . _ + @ - only (so no ':' or ',', which
// Docker's --volume syntax cannot carry, no spaces, no control characters).
var pathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(/[A-Za-z0-9._+@-]+)+$`) })

// deniedNodePaths are owned by kind or Docker in every node: a read-only
// mount there would break node start-up or hide what kind writes.
var deniedNodePaths = []string{
	"/dev", "/proc", "/sys", "/run", "/tmp", "/var", "/kind", "/lib/modules",
	"/etc/kubernetes", "/etc/containerd/config.toml",
	"/etc/hosts", "/etc/hostname", "/etc/resolv.conf",
}

// ExecFunc runs argv (never a shell string) on the Docker host as root, with
// stdin (may be nil), and returns its standard output (vm.Driver.Exec).
type ExecFunc func(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error)

// PlacedFile is a node file at its place on the Docker host.
type PlacedFile struct {
	// NodePath is where every node sees the file (read-only).
	NodePath string
	// HostPath is where the file lives on the Docker host:
	// <NodeFilesDir>/<cluster><NodePath>.
	HostPath string
	Content  []byte
	Mode     fs.FileMode
}

// NodeFiles returns where the files of cluster go on the Docker host, under
// dir. Each path must be absolute and clean, with segments of letters, digits
// and . _ + @ - only, and outside what kind and Docker own in a node (/var,
// /run, /tmp, /etc/kubernetes, ...); a mode may carry permission bits only
// (0 means 0644); content is at most MaxNodeFileSize.
func NodeFiles(cluster string, files []sdk.NodeFile, dir string) ([]PlacedFile, error) {
	if err := ValidateName(cluster); err != nil {
		return nil, err
	}
	if err := checkFilesDir(dir); err != nil {
		return nil, err
	}
	out := make([]PlacedFile, 0, len(files))
	seen := map[string]bool{}
	for i, f := range files {
		if err := checkNodeFile(f); err != nil {
			return nil, fmt.Errorf("node file %d: %w", i, err)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("node file %s is listed twice", f.Path)
		}
		seen[f.Path] = true
		mode := fs.FileMode(f.Mode)
		if mode == 0 {
			mode = DefaultNodeFileMode
		}
		out = append(out, PlacedFile{
			NodePath: f.Path,
			HostPath: dir + "/" + cluster + f.Path,
			Content:  f.Content,
			Mode:     mode,
		})
	}
	return out, nil
}

// PlaceFiles writes each file on the Docker host with
// `install -D -m <mode> /dev/stdin <host path>` (creating parent directories),
// the content fed through stdin. It is idempotent: a re-run rewrites the
// files.
func PlaceFiles(ctx context.Context, exec ExecFunc, files []PlacedFile) error {
	for _, f := range files {
		if err := checkPath(f.HostPath); err != nil {
			return fmt.Errorf("node file %s: host path: %w", f.NodePath, err)
		}
		if f.Mode&^fs.ModePerm != 0 || f.Mode == 0 {
			return fmt.Errorf("node file %s: mode %v is not a permission mode like 0644", f.NodePath, f.Mode)
		}
		argv := []string{"install", "-D", "-m", fmt.Sprintf("%04o", uint32(f.Mode)), "/dev/stdin", f.HostPath}
		if _, err := exec(ctx, argv, bytes.NewReader(f.Content)); err != nil {
			return fmt.Errorf("place node file %s at %s on the Docker host: %w", f.NodePath, f.HostPath, err)
		}
	}
	return nil
}

// RemoveFiles removes every node file of cluster from the Docker host
// (`rm -rf -- <dir>/<cluster>`). Removing files that are not there is fine.
func RemoveFiles(ctx context.Context, exec ExecFunc, cluster, dir string) error {
	if err := ValidateName(cluster); err != nil {
		return err
	}
	if err := checkFilesDir(dir); err != nil {
		return err
	}
	target := dir + "/" + cluster
	if _, err := exec(ctx, []string{"rm", "-rf", "--", target}, nil); err != nil {
		return fmt.Errorf("remove the node files of cluster %s (%s) from the Docker host: %w", cluster, target, err)
	}
	return nil
}

// checkNodeFile checks one plugin node file.
func checkNodeFile(f sdk.NodeFile) error {
	if err := checkNodePath(f.Path); err != nil {
		return err
	}
	if f.Mode&^uint32(fs.ModePerm) != 0 {
		return fmt.Errorf("%s: mode %#o has bits beyond the permission bits (0777)", f.Path, f.Mode)
	}
	if len(f.Content) > MaxNodeFileSize {
		return fmt.Errorf("%s: %d bytes; node files hold at most %d", f.Path, len(f.Content), MaxNodeFileSize)
	}
	return nil
}

// checkNodePath checks a path inside the nodes.
func checkNodePath(p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	for _, d := range deniedNodePaths {
		if p == d || strings.HasPrefix(p, d+"/") {
			return fmt.Errorf("path %s: %s belongs to kind or Docker in every node; use another path", p, d)
		}
	}
	return nil
}

// checkFilesDir checks the node files directory on the Docker host.
func checkFilesDir(dir string) error {
	if dir == "" {
		return errors.New("node files directory is empty; the core must choose one on the Docker host that survives reboots")
	}
	if err := checkPath(dir); err != nil {
		return fmt.Errorf("node files directory: %w", err)
	}
	return nil
}

// checkPath checks that p is absolute, clean, not the root and made of safe
// segments.
func checkPath(p string) error {
	if !pathRE().MatchString(p) {
		return fmt.Errorf("path %q must be absolute, with segments of letters, digits and . _ + @ - only", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("path %q must be clean (no . or .. segments)", p)
		}
	}
	return nil
}
