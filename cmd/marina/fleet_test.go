package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetCreateDryRun: the plan of a manifest, and a manifest with a
// dependency cycle refused with the cycle named (exit 2), nothing created.
func TestFleetCreateDryRun(t *testing.T) {
	home := t.TempDir()
	env := []string{"MARINA_VM_DRIVER=host", "MARINA_PLUGINS_METALLB_ENABLED=false"}
	write := func(name, content string) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("fleet.yaml", `apiVersion: marina.dev/v1alpha1
kind: Fleet
metadata:
  name: demo
spec:
  maxParallel: 2
  clusters:
    - mgmt
    - name: east
      dependsOn: [mgmt]
      region: us-east1
    - name: west
      num: 5
      dependsOn: [mgmt]
      registries: none
`)
	r := marina(t, home, env, "fleet", "create", "--dry-run", "-f", ok)
	if r.code != 0 {
		t.Fatalf("fleet create --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"mgmt", "east", "west", "create", "5"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}

	cycle := write("cycle.yaml", `apiVersion: marina.dev/v1alpha1
kind: Fleet
metadata:
  name: loop
spec:
  clusters:
    - name: a
      dependsOn: [c]
    - name: b
      dependsOn: [a]
    - name: c
      dependsOn: [b]
`)
	r = marina(t, home, env, "fleet", "create", "--dry-run", "-f", cycle)
	if r.code != 2 || !strings.Contains(r.stderr, "dependency cycle") || !strings.Contains(r.stderr, "a -> c -> b -> a") {
		t.Fatalf("cycle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	bad := write("bad.yaml", "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: x}\nspec:\n  clusterz: [a]\n")
	r = marina(t, home, env, "fleet", "create", "-f", bad)
	if r.code != 2 || !strings.Contains(r.stderr, "clusterz") || !strings.Contains(r.stderr, "clusters") {
		t.Fatalf("unknown key: exit %d\n%s", r.code, r.stderr)
	}
}

// TestFleetCreateRefusals: --max-parallel follows spec.maxParallel's rule,
// and a written num: 0 is refused at its line instead of taken as unset;
// exit 2 either way, --dry-run included.
func TestFleetCreateRefusals(t *testing.T) {
	home := t.TempDir()
	env := []string{"MARINA_VM_DRIVER=host", "DOCKER_HOST=unix:///nonexistent/docker.sock"}
	write := func(name, content string) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m := write("m.yaml", "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\nspec:\n  clusters: [a]\n")
	r := marina(t, home, env, "fleet", "create", "-f", m, "--max-parallel", "-5", "--dry-run")
	if want := "Error: --max-parallel: must be 0 (the default, 4 at once) or more, got -5"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("--max-parallel -5: exit %d, want 2 with %q\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
	if r := marina(t, home, env, "fleet", "create", "-f", m, "--max-parallel", "0", "--dry-run"); r.code != 0 {
		t.Errorf("--max-parallel 0: exit %d\n%s", r.code, r.stderr)
	}

	zero := write("zero.yaml", "apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata: {name: demo}\nspec:\n  clusters:\n  - a\n  - name: b\n    num: 0\n")
	r = marina(t, home, env, "fleet", "create", "-f", zero, "--dry-run")
	if want := "zero.yaml:8:10: spec.clusters[1].num: must be between 1 and 99, got 0"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("num: 0: exit %d, want 2 with %q\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
}
