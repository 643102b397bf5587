package dockerfake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/dockerfake"
)

const img = "quay.io/acme/cache:v1"

func connect(t *testing.T, eng *dockerfake.Engine) *container.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := container.Connect(ctx, eng.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func cacheSpec() container.Spec {
	return container.Spec{
		Name:    "acme-cache",
		Image:   img,
		Cmd:     []string{"serve", "--port", "5000"},
		Env:     []string{"MODE=cache"},
		Labels:  map[string]string{"acme.dev/role": "cache"},
		Network: dockerfake.LabNetwork,
		IP:      "172.30.255.60",
		Aliases: []string{"cache"},
		Ports:   []container.Port{{HostIP: "127.0.0.1", HostPort: 5099, ContainerPort: 5000}},
		Mounts:  []container.Mount{{Type: "volume", Source: "acme-data", Target: "/data"}},
		Files:   []container.File{{Path: "/etc/acme/config.yml", Content: []byte("token: one\n"), Mode: 0o600, UID: 1000, GID: 1000}},
	}
}

// TestEnsureLifecycle drives sdk/container's Ensure through every path on
// the fake: created, unchanged, changed spec (recreated), removed.
func TestEnsureLifecycle(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages(img))
	c := connect(t, eng)
	spec := cacheSpec()

	first, err := c.Ensure(ctx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if first.Action != container.Created || first.ID == "" {
		t.Fatalf("first Ensure = %+v, want created", first)
	}
	got, ok := eng.Container("acme-cache")
	if !ok || !got.Running() || got.ID != first.ID || got.Image != img {
		t.Fatalf("after create: %+v", got)
	}
	if ep := got.Networks["kind"]; ep.IP != "172.30.255.60" || ep.StaticIP != "172.30.255.60" || strings.Join(ep.Aliases, ",") != "cache" {
		t.Fatalf("endpoint on kind = %+v", ep)
	}
	if got.Labels[container.LabelManagedBy] != container.ManagedBy || got.Labels[container.LabelSpec] != first.Spec || got.Labels["acme.dev/role"] != "cache" {
		t.Fatalf("labels = %v", got.Labels)
	}
	if got.Restart != "always" || strings.Join(got.Cmd, " ") != "serve --port 5000" || strings.Join(got.Env, ",") != "MODE=cache" {
		t.Fatalf("restart %q cmd %q env %q", got.Restart, got.Cmd, got.Env)
	}
	if len(got.Ports) != 1 || got.Ports[0] != (dockerfake.Port{HostIP: "127.0.0.1", HostPort: 5099, ContainerPort: 5000, Protocol: "tcp"}) {
		t.Fatalf("ports = %+v", got.Ports)
	}
	if len(got.Mounts) != 1 || got.Mounts[0] != (dockerfake.Mount{Type: "volume", Source: "acme-data", Target: "/data"}) {
		t.Fatalf("mounts = %+v", got.Mounts)
	}
	if f := got.Files["/etc/acme/config.yml"]; string(f.Content) != "token: one\n" || f.Mode != 0o600 || f.UID != 1000 || f.GID != 1000 {
		t.Fatalf("file = %+v (content %q)", f, f.Content)
	}
	if v := eng.Volumes(); len(v) != 1 || v[0] != "acme-data" {
		t.Fatalf("volumes = %v", v)
	}
	st, err := c.Get(ctx(t), "acme-cache")
	if err != nil || st == nil || !st.Running || st.Status != "running" || st.IPs["kind"] != "172.30.255.60" {
		t.Fatalf("Get = %+v, %v", st, err)
	}

	before := len(eng.Requests())
	again, err := c.Ensure(ctx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if again.Action != container.Unchanged || again.ID != first.ID || again.Steady() != first.Steady() {
		t.Fatalf("second Ensure = %+v, want unchanged %s", again, first.ID)
	}
	for _, r := range eng.Requests()[before:] {
		if r.Method != "GET" {
			t.Errorf("an unchanged Ensure sent %s", r)
		}
	}

	spec.Files[0].Content = []byte("token: two\n")
	changed, err := c.Ensure(ctx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Action != container.Recreated || changed.ID == first.ID || changed.Reason != "its configuration changed" {
		t.Fatalf("Ensure after a file change = %+v, want recreated", changed)
	}
	got, _ = eng.Container("acme-cache")
	if got.ID != changed.ID || string(got.Files["/etc/acme/config.yml"].Content) != "token: two\n" || !got.Running() {
		t.Fatalf("after recreate: %+v", got)
	}
	if len(eng.Containers()) != 1 {
		t.Fatalf("containers after recreate: %+v", eng.Containers())
	}

	spec.Image = "quay.io/acme/cache:v2"
	upgraded, err := c.Ensure(ctx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded.Action != container.Recreated || upgraded.Reason != "image quay.io/acme/cache:v1 -> quay.io/acme/cache:v2" {
		t.Fatalf("Ensure with a new image = %+v", upgraded)
	}
	if imgs := strings.Join(eng.Images(), " "); imgs != "quay.io/acme/cache:v1 quay.io/acme/cache:v2" {
		t.Fatalf("images after the pull = %s", imgs)
	}

	if err := c.RemoveVolume(ctx(t), "acme-data"); !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "volume is in use") {
		t.Fatalf("RemoveVolume of a volume in use: %v, want a conflict", err)
	}
	removed, err := c.Remove(ctx(t), "acme-cache")
	if err != nil || !removed {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	if _, ok := eng.Container("acme-cache"); ok {
		t.Fatal("the container is still there after Remove")
	}
	if removed, err := c.Remove(ctx(t), "acme-cache"); err != nil || removed {
		t.Fatalf("second Remove = %v, %v, want false, nil", removed, err)
	}
	if err := c.RemoveVolume(ctx(t), "acme-data"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveVolume(ctx(t), "acme-data"); err != nil {
		t.Fatalf("RemoveVolume of a missing volume: %v", err)
	}
	if v := eng.Volumes(); len(v) != 0 {
		t.Fatalf("volumes = %v", v)
	}
}

// TestPullFailure: a failed pull surfaces the engine's message and leaves
// the old container serving; a pull that works makes the image present.
func TestPullFailure(t *testing.T) {
	eng := dockerfake.Start(t)
	c := connect(t, eng)
	spec := container.Spec{Name: "acme-cache", Image: img}
	out, err := c.Ensure(ctx(t), spec)
	if err != nil || out.Action != container.Created {
		t.Fatalf("Ensure pulling %s: %+v, %v", img, out, err)
	}
	pulled := false
	for _, r := range eng.Requests() {
		pulled = pulled || (r.Method == "POST" && r.Path == "/images/create" && strings.Contains(r.Query, "fromImage=quay.io%2Facme%2Fcache") && strings.Contains(r.Query, "tag=v1"))
	}
	if !pulled {
		t.Fatalf("no pull among %v", eng.Requests())
	}

	const msg = `Get "https://quay.io/v2/": dial tcp: lookup quay.io: no such host`
	eng.FailPull("quay.io/acme/cache:v2", msg)
	spec.Image = "quay.io/acme/cache:v2"
	_, err = c.Ensure(ctx(t), spec)
	if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "pull image quay.io/acme/cache:v2") || !cerrdefs.IsInternal(err) {
		t.Fatalf("Ensure with a failing pull: %v, want the engine's message", err)
	}
	if got, _ := eng.Container("acme-cache"); got.ID != out.ID || !got.Running() {
		t.Fatalf("after a failed pull the old container must still serve: %+v", got)
	}
	for _, im := range eng.Images() {
		if im == "quay.io/acme/cache:v2" {
			t.Fatal("a failed pull made the image present")
		}
	}

	_, err = c.Ensure(ctx(t), container.Spec{Name: "other", Image: "quay.io/acme/cache:v2"})
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Fatalf("Ensure of a new container with a failing pull: %v", err)
	}
	if _, ok := eng.Container("other"); ok {
		t.Fatal("a container was created without its image")
	}
}

// TestCrashAndStop: a crash follows the restart policy as Docker does, and
// Ensure starts what is not running without replacing it.
func TestCrashAndStop(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages(img))
	c := connect(t, eng)

	always, err := c.Ensure(ctx(t), container.Spec{Name: "always", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	eng.Exit("always", 2)
	got, _ := eng.Container("always")
	if !got.Running() || got.RestartCount != 1 {
		t.Fatalf("after a crash with restart always: %+v, want running again, restarted once", got)
	}
	if out, err := c.Ensure(ctx(t), container.Spec{Name: "always", Image: img}); err != nil || out.Action != container.Unchanged || out.ID != always.ID {
		t.Fatalf("Ensure after the engine restarted it: %+v, %v, want unchanged", out, err)
	}

	eng.Stop("always")
	if st, _ := c.Get(ctx(t), "always"); st.Running || st.Status != "exited" {
		t.Fatalf("after Stop: %+v", st)
	}
	out, err := c.Ensure(ctx(t), container.Spec{Name: "always", Image: img})
	if err != nil || out.Action != container.Started || out.ID != always.ID || out.Reason != "it was exited" {
		t.Fatalf("Ensure of a stopped container: %+v, %v, want started", out, err)
	}

	no := container.Spec{Name: "once", Image: img, Restart: "no", Network: dockerfake.LabNetwork, IP: "172.30.255.61"}
	first, err := c.Ensure(ctx(t), no)
	if err != nil {
		t.Fatal(err)
	}
	eng.Exit("once", 137)
	got, _ = eng.Container("once")
	if got.State != "exited" || got.ExitCode != 137 || got.Networks["kind"].IP != "" {
		t.Fatalf("after a crash with restart no: %+v, want exited 137 without an address", got)
	}
	out, err = c.Ensure(ctx(t), no)
	if err != nil || out.Action != container.Started || out.ID != first.ID {
		t.Fatalf("Ensure of a crashed container: %+v, %v, want started", out, err)
	}
	if got, _ = eng.Container("once"); !got.Running() || got.Networks["kind"].IP != "172.30.255.61" {
		t.Fatalf("after the restart: %+v", got)
	}

	onFailure := container.Spec{Name: "on-failure", Image: img, Restart: "on-failure"}
	if _, err := c.Ensure(ctx(t), onFailure); err != nil {
		t.Fatal(err)
	}
	eng.Exit("on-failure", 0)
	if got, _ = eng.Container("on-failure"); got.State != "exited" {
		t.Fatalf("on-failure after exit 0: %+v, want exited", got)
	}
}

// TestEnsureConflicts: what the engine refuses fails Ensure with nothing
// half-made left behind.
func TestEnsureConflicts(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages(img))
	c := connect(t, eng)
	if _, err := c.Ensure(ctx(t), container.Spec{Name: "svc-a", Image: img, Network: "kind", IP: "172.30.0.10",
		Ports: []container.Port{{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80}}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		spec container.Spec
		want string
		kind func(error) bool
	}{
		{container.Spec{Name: "svc-b", Image: img, Network: "kind", IP: "172.30.0.10"}, "Address already in use", cerrdefs.IsPermissionDenied},
		{container.Spec{Name: "svc-b", Image: img, Network: "kind", IP: "10.0.0.10"}, "does not belong to any of this network's subnets", cerrdefs.IsInternal},
		{container.Spec{Name: "svc-b", Image: img, Network: "nope"}, "network nope not found", cerrdefs.IsNotFound},
		{container.Spec{Name: "svc-b", Image: img, Ports: []container.Port{{HostPort: 8080, ContainerPort: 81}}}, "Bind for 0.0.0.0:8080 failed: port is already allocated", cerrdefs.IsInternal},
		{container.Spec{Name: "svc-b", Image: img, Network: "bridge", IP: "172.17.0.10"}, "only when connecting to networks with user configured subnets", cerrdefs.IsInvalidArgument},
	}
	for _, tc := range cases {
		_, err := c.Ensure(ctx(t), tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !tc.kind(err) {
			t.Errorf("Ensure(%+v) = %v, want an error with %q of the right kind", tc.spec, err, tc.want)
		}
		if _, ok := eng.Container("svc-b"); ok {
			t.Errorf("Ensure(%+v) left a container behind", tc.spec)
		}
	}
	// Another host address, or another protocol, is no conflict.
	if _, err := c.Ensure(ctx(t), container.Spec{Name: "svc-c", Image: img, Ports: []container.Port{{HostIP: "127.0.0.2", HostPort: 8080, ContainerPort: 80}, {HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80, Protocol: "udp"}}}); err != nil {
		t.Fatal(err)
	}
	// A dynamic address skips the ones in use.
	if _, err := c.Ensure(ctx(t), container.Spec{Name: "svc-d", Image: img, Network: "kind"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := eng.Container("svc-d"); got.Networks["kind"].IP != "172.30.0.2" {
		t.Fatalf("dynamic address = %+v", got.Networks)
	}
	if got, _ := eng.Container("svc-c"); got.Networks["bridge"].IP != "172.17.0.2" {
		t.Fatalf("address on the default bridge = %+v", got.Networks)
	}
}

// TestForeignAndList: Ensure and Remove refuse a container marina did not
// create; List filters by label.
func TestForeignAndList(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages(img))
	c := connect(t, eng)
	api := c.API()
	if _, err := api.ContainerCreate(ctx(t), clientCreate("foreign", img, map[string]string{"group": "g"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(ctx(t), container.Spec{Name: "foreign", Image: img}); err == nil || !strings.Contains(err.Error(), "not created by marina") {
		t.Fatalf("Ensure over a foreign container: %v", err)
	}
	if _, err := c.Remove(ctx(t), "foreign"); err == nil {
		t.Fatal("Remove of a foreign container succeeded")
	}
	for _, n := range []string{"m1", "m2"} {
		if _, err := c.Ensure(ctx(t), container.Spec{Name: n, Image: img, Labels: map[string]string{"group": "g"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Ensure(ctx(t), container.Spec{Name: "m3", Image: img, Labels: map[string]string{"group": "other"}}); err != nil {
		t.Fatal(err)
	}
	eng.Stop("m2")
	got, err := c.List(ctx(t), map[string]string{"group": "g"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name+":"+s.Status)
	}
	if strings.Join(names, " ") != "foreign:created m1:running m2:exited" {
		t.Fatalf("List(group=g) = %v", names)
	}
	got, err = c.List(ctx(t), map[string]string{"group": "g", container.LabelManagedBy: container.ManagedBy})
	if err != nil || len(got) != 2 {
		t.Fatalf("List(group=g, managed) = %+v, %v", got, err)
	}
	if got, err := c.List(ctx(t), map[string]string{"group": "none"}); err != nil || len(got) != 0 {
		t.Fatalf("List(group=none) = %+v, %v", got, err)
	}
}

// TestReadFileFromTheFake: container.Client.ReadFile reads back the files
// Ensure copied in (content, mode), and a missing path is not found.
func TestReadFileFromTheFake(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("quay.io/acme/cache:v1"))
	ctx := context.Background()
	c, err := container.Connect(ctx, eng.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Ensure(ctx, container.Spec{Name: "cache", Image: "quay.io/acme/cache:v1",
		Files: []container.File{{Path: "/etc/cache/ca.pem", Content: []byte("PEM"), Mode: 0o600}}}); err != nil {
		t.Fatal(err)
	}
	f, found, err := c.ReadFile(ctx, "cache", "/etc/cache/ca.pem", 1<<10)
	if err != nil || !found || string(f.Content) != "PEM" || f.Mode != 0o600 {
		t.Errorf("ReadFile = %+v, %v, %v", f, found, err)
	}
	if _, found, err := c.ReadFile(ctx, "cache", "/etc/cache/none.pem", 1<<10); err != nil || found {
		t.Errorf("a missing file: found %v, %v", found, err)
	}
}
