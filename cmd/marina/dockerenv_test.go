package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk/dockertest"
)

// TestDockerEnvContextShell runs docker-env, docker-context and shell on the
// host driver against the real engine.
func TestDockerEnvContextShell(t *testing.T) {
	dockertest.Require(t)
	home := t.TempDir()
	dockerCfg := filepath.Join(home, "docker-config")
	env := []string{"DOCKER_CONFIG=" + dockerCfg, "MARINA_VM_DRIVER=host", "MARINA_VM_NAME=envtest"}

	r := marina(t, home, env, "docker-env")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "export DOCKER_HOST=unix://") {
		t.Fatalf("docker-env: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, env, "docker-env", "--unset"); r.code != 0 || !strings.Contains(r.stdout, "unset DOCKER_HOST") {
		t.Fatalf("docker-env --unset: exit %d\n%s", r.code, r.stdout)
	}

	r = marina(t, home, env, "docker-context")
	if r.code != 0 || !strings.Contains(r.stdout, "docker context envtest") {
		t.Fatalf("docker-context: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dockerCfg, "config.json"))
	if err != nil || !strings.Contains(string(b), `"currentContext": "envtest"`) {
		t.Fatalf("config.json after docker-context: %s %v", b, err)
	}
	if r := marina(t, home, env, "docker-context", "--unset"); r.code != 0 {
		t.Fatalf("docker-context --unset: exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dockerCfg, "config.json")); strings.Contains(string(b), "currentContext") {
		t.Fatalf("docker-context --unset left currentContext:\n%s", b)
	}

	r = marina(t, home, env, "shell", "--", "sh", "-c", "echo $((40+2))")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "42" {
		t.Fatalf("shell -- sh -c: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}
