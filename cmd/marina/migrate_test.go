package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// klimaxHome builds a klimax installation in a new home directory: the
// customised klimax config with mirror credentials (core/migrate's
// testdata), a stopped VM sharing the host registry cache, a cache, and a
// cluster's kubeconfig.
func klimaxHome(t *testing.T) string {
	t.Helper()
	// Short, so that Lima's socket paths under ~/.marina/lima/klimax stay
	// below macOS's limit and the VM can be adopted.
	dir, err := os.MkdirTemp("/tmp", "mgc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	home, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join("..", "..", "core", "migrate", "testdata", "klimax", "custom-mirrors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	put(".klimax/config.yaml", string(cfg), 0o600)
	cache := filepath.Join(home, ".klimax", "registry-cache")
	put(".klimax/klimax/lima.yaml", fmt.Sprintf("vmType: vz\nmounts:\n- location: %s\n  mountPoint: %s\n  writable: true\n", cache, cache), 0o644)
	put(".klimax/klimax/diffdisk", strings.Repeat("block", 100), 0o644)
	put(".klimax/registry-cache/registry-harbor/docker/registry/v2/blobs/sha256/ab/abcd/data", "layer", 0o644)
	put(".kube/klimax/dev.kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n", 0o600)
	return home
}

// tree lists every path under root with mode, size, content hash and
// modification time, leaving out marina's process lock file.
func tree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == filepath.Join(".marina", "marina.lock") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %s %d %d", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(path)
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

var klimaxSecrets = []string{"Doc-k3r_Hub!pass", "s3cr3t-Harb0r-Passw0rd", "url-Embedded-Pa55"}

func noSecrets(t *testing.T, r result) {
	t.Helper()
	for _, s := range klimaxSecrets {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("output shows the secret %q:\n%s\n%s", s, r.stdout, r.stderr)
		}
	}
}

// TestMigrateDryRun: --dry-run shows the whole plan in every format and
// changes nothing on disk.
func TestMigrateDryRun(t *testing.T) {
	home := klimaxHome(t)
	before := tree(t, home)

	r := marina(t, home, nil, "migrate", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"WHAT", "network.kindBridgeCIDR", "network.bridgeCIDR", "password (set)", "registry cache registry-harbor", "VM klimax", "move", "Dry run: nothing was changed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, r.stdout)
		}
	}
	noSecrets(t, r)

	r = marina(t, home, nil, "migrate", "--dry-run", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		DryRun bool `json:"dryRun"`
		Plan   struct {
			ConfigPath string `json:"configPath"`
			Keys       []struct {
				KlimaxKey, MarinaKey, Status, Value string
			} `json:"keys"`
			Steps []struct {
				Kind, Action string
			} `json:"steps"`
		} `json:"plan"`
		Result any `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if !out.DryRun || out.Result != nil || out.Plan.ConfigPath != filepath.Join(home, ".marina", "config.yaml") || len(out.Plan.Keys) == 0 || len(out.Plan.Steps) == 0 {
		t.Errorf("json: %+v", out)
	}
	noSecrets(t, r)
	r = marina(t, home, nil, "migrate", "--dry-run", "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "klimaxKey: network.kindBridgeCIDR") {
		t.Errorf("yaml: exit %d\n%s", r.code, r.stdout)
	}
	noSecrets(t, r)

	if after := tree(t, home); after != before {
		t.Fatalf("--dry-run changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestMigrateApply migrates, checks that marina accepts the result, and
// runs again: everything is reported as already done and nothing changes.
func TestMigrateApply(t *testing.T) {
	home := klimaxHome(t)
	r := marina(t, home, nil, "migrate")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	noSecrets(t, r)
	for _, want := range []string{"done          config: wrote ~/.marina/config.yaml (mode 0600)", "done          VM klimax: moved ~/.klimax/klimax to ~/.marina/lima/klimax", "Left to you:", "marina cluster create dev"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	cfg := filepath.Join(home, ".marina", "config.yaml")
	if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config: %v %v", err, fi)
	}
	if fi, err := os.Stat(filepath.Join(home, ".kube", "marina", "dev.kubeconfig")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".marina", "registry-cache", "registry-harbor", "docker")); err != nil {
		t.Fatalf("cache not moved: %v", err)
	}
	if v := marina(t, home, nil, "config", "validate"); v.code != 0 {
		t.Fatalf("marina rejects the migrated config: %s %s", v.stdout, v.stderr)
	}
	if v := marina(t, home, nil, "config", "view"); v.code != 0 || !strings.Contains(v.stdout, "bridgeCIDR: 10.20.0.0/16 # file") {
		t.Errorf("config view: %s %s", v.stdout, v.stderr)
	}

	before := tree(t, home)
	r = marina(t, home, nil, "migrate")
	if r.code != 0 {
		t.Fatalf("second run: exit %d: %s", r.code, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "done ") {
			t.Errorf("second run did something: %s", line)
		}
	}
	if !strings.Contains(r.stdout, "already done  config") || !strings.Contains(r.stdout, "already done  VM klimax") {
		t.Errorf("second run:\n%s", r.stdout)
	}
	if after := tree(t, home); after != before {
		t.Errorf("the second run changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestMigrateExistingConfig: an existing, different marina config stops
// the migration with exit status 2 and no change; --force replaces it and
// keeps the old one as .bak.
func TestMigrateExistingConfig(t *testing.T) {
	home := klimaxHome(t)
	cfg := filepath.Join(home, ".marina", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("vm:\n  cpus: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := tree(t, home)
	r := marina(t, home, nil, "migrate")
	if r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
	noSecrets(t, r)
	if after := tree(t, home); after != before {
		t.Fatalf("a refused migration changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	r = marina(t, home, nil, "migrate", "-o", "json")
	if r.code != 2 || !strings.Contains(r.stdout, `"error"`) {
		t.Errorf("json refusal: exit %d\n%s", r.code, r.stdout)
	}

	r = marina(t, home, nil, "migrate", "--force")
	if r.code != 0 {
		t.Fatalf("--force: exit %d: %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(cfg + ".bak"); string(b) != "vm:\n  cpus: 2\n" {
		t.Errorf(".bak = %q", b)
	}
}

// TestMigrateNothing: without klimax there is nothing to migrate (exit 2).
func TestMigrateNothing(t *testing.T) {
	r := marina(t, t.TempDir(), nil, "migrate", "--dry-run")
	if r.code != 2 || !strings.Contains(r.stderr, "nothing to migrate") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}
