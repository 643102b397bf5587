package migrate

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A klimax installation on disk, built in a temporary home directory with
// the shapes klimax leaves behind (see the predecessor facts, §1.3).

// newHome returns a new, short home directory: Lima's socket paths under
// ~/.marina/lima/<vm> must stay below the host's limit (104 characters on
// macOS), which a deep temporary directory can exceed.
func newHome(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mgr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	home, err := filepath.EvalSymlinks(dir) // macOS: /tmp is /private/tmp
	if err != nil {
		t.Fatal(err)
	}
	return home
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// klimaxConfigFile installs testdata/klimax/<name>.yaml as ~/.klimax/config.yaml.
func klimaxConfigFile(t *testing.T, home, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "klimax", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, ".klimax", "config.yaml"), string(b), 0o600)
}

// limaInstance makes ~/.klimax/<vm> look like the Lima instance klimax
// creates; state is stopped, stale (ha.pid of a finished process), running
// (ha.pid of this test process) or garbage (an unreadable ha.pid).
func limaInstance(t *testing.T, home, vm, state string, hostCache bool) string {
	t.Helper()
	dir := filepath.Join(home, ".klimax", vm)
	cache := filepath.Join(home, ".klimax", "registry-cache")
	mounts := "mounts: []\n"
	if hostCache {
		mounts = fmt.Sprintf("mounts:\n- location: %s\n  mountPoint: %s\n  writable: true\n", cache, cache)
	}
	write(t, filepath.Join(dir, "lima.yaml"), `vmType: vz
os: Linux
arch: aarch64
images:
- location: https://cloud-images.ubuntu.com/releases/25.04/release/ubuntu-25.04-server-cloudimg-arm64.img
  arch: aarch64
cpus: 4
memory: 10GiB
disk: 40GiB
mountType: virtiofs
`+mounts+`networks:
- vzNAT: true
portForwards:
- guestIP: 0.0.0.0
  guestPortRange: [1, 65535]
  proto: tcp
  ignore: true
- guestSocket: /run/docker.sock
  hostSocket: '{{.Home}}/.`+vm+`.docker.sock'
provision:
- mode: system
  script: |
    #!/bin/bash
    set -eux -o pipefail
    sysctl -w fs.inotify.max_user_watches=524288
user:
  name: lima
`, 0o644)
	write(t, filepath.Join(dir, "lima-version"), "v2.1.4\n", 0o444)
	write(t, filepath.Join(dir, "diffdisk"), strings.Repeat("disk-block\n", 1000), 0o644)
	write(t, filepath.Join(dir, "ha.stderr.log"), "{\"level\":\"info\",\"msg\":\"started\"}\n", 0o644)
	switch state {
	case "running":
		write(t, filepath.Join(dir, "ha.pid"), strconv.Itoa(os.Getpid())+"\n", 0o644)
	case "stale":
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "ha.pid"), strconv.Itoa(cmd.Process.Pid)+"\n", 0o644)
	case "garbage":
		write(t, filepath.Join(dir, "ha.pid"), "not-a-pid\n", 0o644)
	}
	return dir
}

// registryCache fills ~/.klimax/registry-cache/<mirror> like a registry's
// filesystem storage.
func registryCache(t *testing.T, home string, mirrors ...string) {
	t.Helper()
	for _, m := range mirrors {
		root := filepath.Join(home, ".klimax", "registry-cache", m, "docker", "registry", "v2")
		write(t, filepath.Join(root, "blobs", "sha256", "ab", "abcdef", "data"), strings.Repeat(m+" layer\n", 500), 0o644)
		write(t, filepath.Join(root, "repositories", "library", "nginx", "_manifests", "tags", "latest", "current", "link"), "sha256:abcdef", 0o644)
		write(t, filepath.Join(root, "repositories", "library", "nginx", "_layers", "sha256", "abcdef", "link"), "sha256:abcdef", 0o600)
	}
}

// kubeconfigFor is a per-cluster kubeconfig as klimax exports it.
func kubeconfigFor(name string) string {
	return fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Y2VydGlmaWNhdGUtYXV0aG9yaXR5LWRhdGEtZm9yLSVz
    server: https://192.168.64.3:7001
  name: %[1]s
contexts:
- context:
    cluster: %[1]s
    user: %[1]s
  name: %[1]s
current-context: %[1]s
kind: Config
users:
- name: %[1]s
  user:
    client-certificate-data: Y2xpZW50LWNlcnRpZmljYXRlLWRhdGE=
    client-key-data: Y2xpZW50LWtleS1kYXRh
`, name)
}

// kubeconfigs writes ~/.kube/klimax/<name>.kubeconfig (0600) per cluster.
func kubeconfigs(t *testing.T, home string, names ...string) {
	t.Helper()
	for _, n := range names {
		write(t, filepath.Join(home, ".kube", "klimax", n+".kubeconfig"), kubeconfigFor(n), 0o600)
	}
}

// userKubeconfig writes ~/.kube/config holding klimax's merged entries for
// names and one unrelated context.
func userKubeconfig(t *testing.T, home string, names ...string) string {
	t.Helper()
	var clusters, contexts, users strings.Builder
	for _, n := range append([]string{"work"}, names...) {
		fmt.Fprintf(&clusters, "- cluster:\n    server: https://%s.example:6443\n  name: %s\n", n, n)
		fmt.Fprintf(&contexts, "- context:\n    cluster: %s\n    user: %s\n  name: %s\n", n, n, n)
		fmt.Fprintf(&users, "- name: %s\n  user:\n    token: not-a-real-token\n", n)
	}
	path := filepath.Join(home, ".kube", "config")
	write(t, path, "apiVersion: v1\nkind: Config\nclusters:\n"+clusters.String()+"contexts:\n"+contexts.String()+"current-context: work\nusers:\n"+users.String(), 0o600)
	return path
}

// snapshot lists every path under root with its type, mode, size, content
// hash and modification time: two equal snapshots mean nothing changed.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		line := fmt.Sprintf("%s %s %d %d", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// secrets are the credentials in testdata/klimax/*.yaml; no output may
// contain any of them.
var secrets = []string{"Doc-k3r_Hub!pass", "s3cr3t-Harb0r-Passw0rd", "url-Embedded-Pa55", "hunter2-Odd-Secret", "odd-Url-Secret", "odd-Pass-Secret"}
