package dockercontext

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk/dockertest"
)

// dockerCLI runs the real docker CLI with DOCKER_CONFIG=dir.
func dockerCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTheDockerCLIReadsIt: a context written here is listed, inspected,
// selected and used by the real docker CLI; config.json keeps its other keys.
func TestTheDockerCLIReadsIt(t *testing.T) {
	dockertest.Require(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}},"detachKeys":"ctrl-x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Store{Dir: dir}
	host := "unix:///var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		host = h
	}
	changed, err := s.Ensure("marina-test", host, "marina lab marina-test")
	if err != nil || !changed {
		t.Fatalf("Ensure = %v, %v", changed, err)
	}
	if changed, err := s.Ensure("marina-test", host, "marina lab marina-test"); err != nil || changed {
		t.Fatalf("second Ensure = %v, %v; want unchanged", changed, err)
	}
	if got := dockerCLI(t, dir, "context", "inspect", "--format", "{{.Endpoints.docker.Host}}", "marina-test"); got != host {
		t.Fatalf("docker context inspect = %q, want %q", got, host)
	}
	if got := dockerCLI(t, dir, "context", "ls", "--format", "{{.Name}}: {{.Description}}"); !strings.Contains(got, "marina-test: marina lab marina-test") {
		t.Fatalf("docker context ls:\n%s", got)
	}
	if err := s.Use("marina-test"); err != nil {
		t.Fatal(err)
	}
	if got := dockerCLI(t, dir, "context", "show"); got != "marina-test" {
		t.Fatalf("docker context show = %q", got)
	}
	// The CLI talks to the engine through it.
	if got := dockerCLI(t, dir, "version", "--format", "{{.Server.APIVersion}}"); got == "" {
		t.Fatal("docker version through the context printed nothing")
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{`"registry.example"`, `"detachKeys": "ctrl-x"`, `"currentContext": "marina-test"`} {
		if !strings.Contains(string(b), keep) {
			t.Errorf("config.json lost %s:\n%s", keep, b)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "config.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("config.json mode %v, want 0600 kept", fi.Mode().Perm())
	}
	if err := s.Remove("marina-test"); err != nil {
		t.Fatal(err)
	}
	if got := dockerCLI(t, dir, "context", "show"); got != "default" {
		t.Fatalf("after Remove, docker context show = %q", got)
	}
	if out := dockerCLI(t, dir, "context", "ls", "--format", "{{.Name}}"); strings.Contains(out, "marina-test") {
		t.Fatalf("context still listed:\n%s", out)
	}
}

func TestRefusesBadNamesAndConfig(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	for _, name := range []string{"default", "", "a b", "../x"} {
		if _, err := s.Ensure(name, "unix:///x", ""); err == nil {
			t.Errorf("Ensure(%q) accepted", name)
		}
	}
	if err := s.Use("missing"); err == nil {
		t.Error("Use of a missing context accepted")
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "config.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Current(); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("Current with a broken config.json: %v", err)
	}
}
