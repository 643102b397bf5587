package container_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/dockertest"
)

// subnet is this package's test network; other packages use other subnets.
const subnet = "172.27.0.0/16"

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func connect(t *testing.T, opts ...container.Option) *container.Client {
	t.Helper()
	dockertest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := container.Connect(ctx, container.HostFromEnv(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readFile reads path out of container id (Client.ReadFile), failing t
// when it is not there.
func readFile(t *testing.T, c *container.Client, id, path string) container.File {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, found, err := c.ReadFile(ctx, id, path, 1<<20)
	if err != nil || !found {
		t.Fatalf("read %s in %.12s: found %v, %v", path, id, found, err)
	}
	return f
}

// TestEnsureConverges drives one container through every path of Ensure
// against the real engine: create (with a static IP and a 0600 file), re-run
// with nothing changed (same id), stopped (started, same id), spec changed
// (recreated, new id, new file content), and removal.
func TestEnsureConverges(t *testing.T) {
	img := dockertest.Image(t, "etcd")
	n := dockertest.Network(t, subnet)
	c := connect(t, container.WithHashKey([]byte("test-key")))
	name := uniqueName("marina-ct")
	dockertest.Cleanup(t, []string{name}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	spec := container.Spec{
		Name:    name,
		Image:   img,
		Cmd:     []string{"--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://172.27.0.10:2379", "--data-dir", "/data", "--unsafe-no-fsync"},
		Labels:  dockertest.Labels(t),
		Network: n.Name,
		IP:      "172.27.0.10",
		Files:   []container.File{{Path: "/etc/marina/secret.yml", Content: []byte("password: one\n"), Mode: 0o600}},
	}
	first, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if first.Action != container.Created || first.ID == "" {
		t.Fatalf("first Ensure = %+v, want created", first)
	}
	st, err := c.Get(ctx, name)
	if err != nil || st == nil {
		t.Fatalf("Get after create: %v, %v", st, err)
	}
	if !st.Running || st.IPs[n.Name] != "172.27.0.10" {
		t.Fatalf("state after create = %+v, want running at 172.27.0.10", st)
	}
	if got := dockertest.Docker(t, "inspect", "--format", "{{.HostConfig.RestartPolicy.Name}}", name); got != "always" {
		t.Fatalf("restart policy = %q, want always", got)
	}
	f := readFile(t, c, first.ID, "/etc/marina/secret.yml")
	if string(f.Content) != "password: one\n" || f.Mode != 0o600 {
		t.Fatalf("file in container: mode %o content %q, want 0600 %q", f.Mode, f.Content, "password: one\n")
	}
	if inspect := dockertest.Docker(t, "inspect", name); strings.Contains(inspect, "password") {
		t.Fatalf("docker inspect shows the file's content:\n%s", inspect)
	}

	again, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if again.Action != container.Unchanged || again.ID != first.ID {
		t.Fatalf("second Ensure = %+v, want unchanged %s", again, first.ID)
	}
	// Steady names the container as marina checks it: its ID and its spec
	// label, the same whether Ensure created or found it.
	label := dockertest.Docker(t, "inspect", "--format", `{{index .Config.Labels "`+container.LabelSpec+`"}}`, name)
	if s := again.Steady(); s.ID != first.ID || s.Spec == "" || s.Spec != label || first.Steady() != s {
		t.Fatalf("Steady = %+v (first %+v), want ID %s and the spec label %q", s, first.Steady(), first.ID, label)
	}

	dockertest.Docker(t, "stop", "-t", "1", name)
	started, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if started.Action != container.Started || started.ID != first.ID {
		t.Fatalf("Ensure of a stopped container = %+v, want started %s", started, first.ID)
	}

	spec.Files[0].Content = []byte("password: two\n")
	changed, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Action != container.Recreated || changed.ID == first.ID {
		t.Fatalf("Ensure after a file change = %+v, want recreated with a new id", changed)
	}
	if changed.Spec == again.Spec || changed.Spec != dockertest.Docker(t, "inspect", "--format", `{{index .Config.Labels "`+container.LabelSpec+`"}}`, name) {
		t.Fatalf("Spec after a file change = %q (was %q), want the new container's spec label", changed.Spec, again.Spec)
	}
	if content := string(readFile(t, c, changed.ID, "/etc/marina/secret.yml").Content); content != "password: two\n" {
		t.Fatalf("file after recreate = %q", content)
	}

	// A registry on 127.0.0.1 that refuses connections: a missing image
	// whose pull goes nowhere off this machine (marina-test/... would ask
	// Docker Hub).
	spec.Image = "127.0.0.1:1/marina-test/does-not-exist:v0"
	if _, err := c.Ensure(ctx, spec); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/marina-test/does-not-exist:v0") {
		t.Fatalf("Ensure with a missing image: %v, want an error naming the image", err)
	}
	if st, err := c.Get(ctx, name); err != nil || st == nil || st.ID != changed.ID || !st.Running {
		t.Fatalf("after a failed pull the old container must still serve: %+v, %v", st, err)
	}

	removed, err := c.Remove(ctx, name)
	if err != nil || !removed {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	if st, err := c.Get(ctx, name); err != nil || st != nil {
		t.Fatalf("Get after Remove = %+v, %v, want nothing", st, err)
	}
	if removed, err := c.Remove(ctx, name); err != nil || removed {
		t.Fatalf("second Remove = %v, %v, want false, nil", removed, err)
	}
}

// TestEnsureRefusesForeignContainer: a container of the same name that marina
// did not create is neither replaced nor removed.
func TestEnsureRefusesForeignContainer(t *testing.T) {
	img := dockertest.Image(t, "etcd")
	c := connect(t)
	name := uniqueName("marina-ct-foreign")
	id := dockertest.Run(t, "--name", name, img, "--data-dir", "/data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Ensure(ctx, container.Spec{Name: name, Image: img})
	if err == nil || !strings.Contains(err.Error(), "not created by marina") {
		t.Fatalf("Ensure over a foreign container: %v, want a refusal", err)
	}
	if _, err := c.Remove(ctx, name); err == nil {
		t.Fatal("Remove of a foreign container succeeded")
	}
	if got := dockertest.Docker(t, "inspect", "--format", "{{.Id}}", name); got != id {
		t.Fatalf("foreign container changed: %s, want %s", got, id)
	}
}

// TestList finds containers by label.
func TestList(t *testing.T) {
	img := dockertest.Image(t, "etcd")
	c := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tag := uniqueName("list")
	names := map[string]bool{}
	for i := 0; i < 2; i++ {
		name := uniqueName("marina-ct-list")
		names[name] = true
		dockertest.Cleanup(t, []string{name}, nil)
		labels := dockertest.Labels(t)
		labels["marina.test.group"] = tag
		if _, err := c.Ensure(ctx, container.Spec{Name: name, Image: img, Labels: labels, Cmd: []string{"--data-dir", "/data"}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.List(ctx, map[string]string{"marina.test.group": tag})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("List = %d containers, want 2: %+v", len(got), got)
	}
	for _, st := range got {
		if !names[st.Name] || st.Labels[container.LabelManagedBy] != container.ManagedBy {
			t.Fatalf("List item %+v", st)
		}
	}
}

func TestConnectUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := container.Connect(ctx, "unix:///nonexistent/docker.sock")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/docker.sock") {
		t.Fatalf("Connect to a missing socket: %v, want an error naming it", err)
	}
}

// TestReadFile: a file's content, mode and owner; a missing path is not
// found (no error); a directory or a file above the bound is an error.
func TestReadFile(t *testing.T) {
	img := dockertest.Image(t, "etcd")
	c := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := uniqueName("marina-ct-read")
	dockertest.Cleanup(t, []string{name}, nil)
	spec := container.Spec{Name: name, Image: img, Labels: dockertest.Labels(t), Cmd: []string{"--data-dir", "/data"},
		Files: []container.File{{Path: "/etc/marina/a.pem", Content: []byte("0123456789"), Mode: 0o640, UID: 7, GID: 8}}}
	if _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	f, found, err := c.ReadFile(ctx, name, "/etc/marina/a.pem", 10)
	if err != nil || !found || string(f.Content) != "0123456789" || f.Mode != 0o640 || f.UID != 7 || f.GID != 8 || f.Path != "/etc/marina/a.pem" {
		t.Errorf("ReadFile = %+v, %v, %v", f, found, err)
	}
	if _, found, err := c.ReadFile(ctx, name, "/etc/marina/none.pem", 10); err != nil || found {
		t.Errorf("a missing file: found %v, %v; want not found, no error", found, err)
	}
	if _, _, err := c.ReadFile(ctx, name, "/etc/marina/a.pem", 9); err == nil || !strings.Contains(err.Error(), "has 10 bytes, more than the 9 read") {
		t.Errorf("a file above the bound = %v", err)
	}
	if _, _, err := c.ReadFile(ctx, name, "/etc/marina", 1<<20); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a directory = %v", err)
	}
}
