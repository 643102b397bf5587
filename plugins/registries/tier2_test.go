package registries_test

// Tier-2 tests: the plugin against the real Docker engine, with the
// registry image built from distribution's module (test/images). Every
// mirror proxies a second registry container the test starts, so nothing
// leaves the machine.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/plugins/registries"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// subnet is this package's test network (other packages use 172.27-172.31).
const subnet = "172.26.0.0/16"

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// buildImage builds a one-layer FROM scratch image unique to this run,
// tagged ref, and returns its id. A unique image is needed: a pull of an
// image whose layers Docker already has transfers no layer, so nothing
// would reach the mirror's cache.
func buildImage(t *testing.T, ref string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nonce"), []byte(randHex(32)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY nonce /nonce\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"build", "-q", "-t", ref}
	for k, v := range dockertest.Labels(t) {
		args = append(args, "--label", k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dockertest.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append(args, dir)...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker build %s: %v\n%s", ref, err, stderr.String())
	}
	id := strings.TrimSpace(string(out))
	if !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("docker build -q printed %q, want an image id", id)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", id).Run() })
	return id
}

// removeImage removes image id with all its tags, so the next pull transfers it.
func removeImage(t *testing.T, id string) {
	t.Helper()
	dockertest.Docker(t, "image", "rm", "-f", id)
	if err := exec.Command("docker", "image", "inspect", id).Run(); err == nil {
		t.Fatalf("image %s still present after docker image rm", id)
	}
}

// lab is a test network with upstream registries, and the plugin under test.
type lab struct {
	net      *dockertest.Net
	regImg   string
	h        *plugintest.Harness
	stateDir string
	storage  string
	cacheDir string
}

func newLab(t *testing.T, storage string) *lab {
	t.Helper()
	l := &lab{regImg: dockertest.Image(t, "registry"), storage: storage, stateDir: t.TempDir()}
	l.net = dockertest.Network(t, subnet)
	if storage == "host" {
		l.cacheDir = t.TempDir()
	}
	l.h = plugintest.New(t, registries.New())
	return l
}

// upstream starts a registry on the test network at ip (published on a
// loopback port) and returns its id and loopback address.
func (l *lab) upstream(t *testing.T, ip string, extra ...string) (string, string) {
	t.Helper()
	args := append([]string{"--network", l.net.ID, "--ip", ip, "-p", "127.0.0.1::5000"}, extra...)
	id := dockertest.Run(t, append(args, l.regImg)...)
	addr := dockertest.HostPort(t, id, "5000/tcp").String()
	dockertest.WaitRegistry(t, "upstream registry "+ip, addr, 60*time.Second)
	return id, addr
}

// env sets the lab's environment on a hook run.
func (l *lab) env(ms []sdk.Mirror, edit ...func(*sdk.Env)) plugintest.Option {
	return plugintest.WithEnv(func(e *sdk.Env) {
		e.DockerHost = dockertest.Host()
		e.NetworkName = l.net.Name
		e.StateDir = l.stateDir
		e.Mirrors = ms
		e.Images = map[string]string{"registry": l.regImg}
		e.RegistryCacheStorage = l.storage
		e.RegistryCacheDir = l.cacheDir
		for _, f := range edit {
			f(e)
		}
	})
}

// mirror returns a uniquely named mirror of upstream on a free port, and
// registers its container and cache volume for removal.
func mirror(t *testing.T, upstream string) sdk.Mirror {
	t.Helper()
	m := sdk.Mirror{Name: "marina-test-mirror-" + randHex(4), Port: freePort(t), RemoteURL: upstream}
	dockertest.Cleanup(t, []string{m.Name}, []string{registries.VolumePrefix + m.Name})
	return m
}

func connect(t *testing.T) *container.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := container.Connect(ctx, container.HostFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func state(t *testing.T, c *container.Client, name string) *container.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPullThroughMirror is the mirror's job, end to end, for both cache
// storages: an image pushed to an upstream registry is pulled through the
// mirror the plugin started, then pulled again from the mirror's cache
// alone once the upstream is stopped.
func TestPullThroughMirror(t *testing.T) {
	for _, storage := range []string{"guest", "host"} {
		t.Run(storage, func(t *testing.T) {
			start := time.Now()
			l := newLab(t, storage)
			upID, upAddr := l.upstream(t, "172.26.0.10")
			ref := upAddr + "/marina/smoke:" + randHex(4)
			id := buildImage(t, ref)
			dockertest.Docker(t, "push", ref)

			m := mirror(t, "http://172.26.0.10:5000")
			if _, err := l.h.Run(sdk.PostUp, l.env([]sdk.Mirror{m})); err != nil {
				t.Fatal(err)
			}
			mirrorAddr := fmt.Sprintf("127.0.0.1:%d", m.Port)
			dockertest.WaitRegistry(t, "mirror", mirrorAddr, 60*time.Second)
			viaMirror := mirrorAddr + strings.TrimPrefix(ref, upAddr)
			t.Logf("upstream, image and mirror ready after %s", time.Since(start).Round(time.Millisecond))

			removeImage(t, id)
			dockertest.Docker(t, "pull", viaMirror)
			if got := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", viaMirror); got != id {
				t.Fatalf("pulled through the mirror: id %s, want %s", got, id)
			}

			c := connect(t)
			st := state(t, c, m.Name)
			wantCache := registries.VolumePrefix + m.Name
			if storage == "host" {
				wantCache = filepath.Join(l.cacheDir, m.Name)
				blobs, err := os.ReadDir(filepath.Join(wantCache, "docker", "registry", "v2", "blobs", "sha256"))
				if err != nil || len(blobs) == 0 {
					t.Fatalf("host cache %s holds no blobs after a pull: %v", wantCache, err)
				}
			} else {
				dockertest.Docker(t, "volume", "inspect", wantCache)
			}
			if st.Labels[registries.LabelCache] != wantCache {
				t.Fatalf("cache label %q, want %q", st.Labels[registries.LabelCache], wantCache)
			}

			// The upstream goes away. "guest" stops it: its address stops
			// answering, and the registry's lookup of the tag upstream waits
			// for its connect timeout (30s) before it serves from the cache.
			// "host" puts a container that refuses connections at its
			// address instead: the lookup fails at once.
			dockertest.Docker(t, "stop", "-t", "1", upID)
			if storage == "host" {
				dockertest.Docker(t, "rm", "-f", upID)
				dockertest.Run(t, "--network", l.net.ID, "--ip", "172.26.0.10", "-e", "REGISTRY_HTTP_ADDR=:5999", l.regImg)
			}
			removeImage(t, id)
			t0 := time.Now()
			dockertest.Docker(t, "pull", viaMirror)
			if got := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", viaMirror); got != id {
				t.Fatalf("pulled from the mirror's cache alone: id %s, want %s", got, id)
			}
			t.Logf("pull from the cache without the upstream took %s", time.Since(t0).Round(time.Millisecond))
		})
	}
}

// TestPostUpConverges drives the mirrors through re-runs and config
// changes and checks, by container id, that exactly the changed ones are
// recreated; it also checks where the credentials end up (and do not).
func TestPostUpConverges(t *testing.T) {
	l := newLab(t, "guest")
	l.upstream(t, "172.26.0.10", "--network-alias", "upstream-one")
	l.upstream(t, "172.26.0.11")
	a := mirror(t, "http://172.26.0.10:5000")
	b := mirror(t, "http://172.26.0.11:5000")
	c := connect(t)

	run := func(ms []sdk.Mirror, edit ...func(*sdk.Env)) *sdk.Result {
		t.Helper()
		res, err := l.h.Run(sdk.PostUp, l.env(ms, edit...))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ids := func() (string, string) {
		t.Helper()
		sa, sb := state(t, c, a.Name), state(t, c, b.Name)
		if sa == nil || sb == nil || !sa.Running || !sb.Running {
			t.Fatalf("mirrors not both running: %+v %+v", sa, sb)
		}
		return sa.ID, sb.ID
	}

	t0 := time.Now()
	run([]sdk.Mirror{a, b})
	t.Logf("two mirrors created in %s", time.Since(t0).Round(time.Millisecond))
	a1, b1 := ids()
	st := state(t, c, a.Name)
	for k, want := range map[string]string{
		registries.LabelComponent: registries.ComponentMirror,
		registries.LabelMirror:    a.Name,
		registries.LabelUpstream:  a.RemoteURL,
		registries.LabelPort:      fmt.Sprint(a.Port),
		registries.LabelCache:     registries.VolumePrefix + a.Name,
		registries.LabelNetwork:   l.net.Name,
	} {
		if st.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, st.Labels[k], want)
		}
	}
	if got := dockertest.Docker(t, "inspect", "--format", "{{.HostConfig.RestartPolicy.Name}}", a.Name); got != "always" {
		t.Errorf("restart policy %q, want always", got)
	}
	if st.IPs[l.net.Name] == "" {
		t.Errorf("mirror %s is not on network %s: %+v", a.Name, l.net.Name, st.IPs)
	}

	t0 = time.Now()
	run([]sdk.Mirror{a, b})
	t.Logf("re-run with nothing changed in %s", time.Since(t0).Round(time.Millisecond))
	if a2, b2 := ids(); a2 != a1 || b2 != b1 {
		t.Fatalf("re-run with nothing changed recreated a mirror: %.12s->%.12s, %.12s->%.12s", a1, a2, b1, b2)
	}
	for _, p := range l.h.Progress() {
		if !strings.HasSuffix(p, ": unchanged") {
			t.Errorf("progress %q on a re-run, want unchanged", p)
		}
	}
	// The same upstream written differently is the same config.
	b.RemoteURL = "http://172.26.0.11:5000/"
	run([]sdk.Mirror{a, b})
	if a2, b2 := ids(); a2 != a1 || b2 != b1 {
		t.Fatal("a trailing slash on an upstream URL recreated a mirror")
	}

	t.Run("credentials", func(t *testing.T) {
		const password = "Pa55-" + "w0rd-not-in-logs"
		a.Username, a.Password = "mirror-user", password
		var logs bytes.Buffer
		var progress []string
		p := registries.New()
		env := plugintest.DefaultEnv(l.stateDir)
		env.DockerHost = dockertest.Host()
		env.NetworkName, env.Mirrors = l.net.Name, []sdk.Mirror{a, b}
		env.Images = map[string]string{"registry": l.regImg}
		env.RegistryCacheStorage = "guest"
		req := sdk.NewRequest(sdk.PostUp, env, nil, nil, nil, p.Info().Config,
			func(s string) { progress = append(progress, s) },
			slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := p.(sdk.PostUpHook).PostUp(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		a3, b3 := ids()
		if a3 == a1 || b3 != b1 {
			t.Fatalf("after a credential change: a %.12s->%.12s (want new), b %.12s->%.12s (want same)", a1, a3, b1, b3)
		}
		a1 = a3
		if !strings.Contains(logs.String(), `"mirror converged"`) {
			t.Fatalf("no log lines captured: %s", logs.String())
		}
		seen := logs.String() + strings.Join(progress, "\n") + fmt.Sprintf("%+v", res)
		seen += dockertest.Docker(t, "inspect", a.Name)
		logsOut, _ := exec.Command("docker", "logs", a.Name).CombinedOutput()
		seen += string(logsOut)
		if strings.Contains(seen, password) {
			t.Fatalf("the password shows in the plugin's logs, progress, result, docker inspect or the mirror's own log:\n%s", seen)
		}
		if spec := state(t, c, a.Name).Labels[container.LabelSpec]; !strings.HasPrefix(spec, "hmac-sha256-") {
			t.Errorf("spec label %q, want a keyed hash", spec)
		}
		// The config file in the container holds the credentials, 0600.
		cfgFile, found, err := c.ReadFile(context.Background(), a1, "/etc/distribution/config.yml", 1<<20)
		if err != nil || !found {
			t.Fatalf("config in the container: found %v, %v", found, err)
		}
		if content := string(cfgFile.Content); cfgFile.Mode != 0o600 || !strings.Contains(content, password) || !strings.Contains(content, "username: mirror-user") {
			t.Fatalf("config in the container: mode %o, content:\n%s", cfgFile.Mode, content)
		}
		if key, err := os.Stat(filepath.Join(l.stateDir, "spec-hash.key")); err != nil || key.Mode().Perm() != 0o600 {
			t.Fatalf("hash key file: %v, %v; want mode 0600", key, err)
		}
	})

	t.Run("upstream", func(t *testing.T) {
		a.RemoteURL = "http://upstream-one:5000"
		run([]sdk.Mirror{a, b})
		a4, b4 := ids()
		if a4 == a1 || b4 != b1 {
			t.Fatalf("after an upstream change: a %.12s->%.12s (want new), b %.12s->%.12s (want same)", a1, a4, b1, b4)
		}
		a1 = a4
		if got := state(t, c, a.Name).Labels[registries.LabelUpstream]; got != a.RemoteURL {
			t.Fatalf("upstream label %q, want %q", got, a.RemoteURL)
		}
	})

	t.Run("port", func(t *testing.T) {
		b.Port = freePort(t)
		run([]sdk.Mirror{a, b})
		a5, b5 := ids()
		if a5 != a1 || b5 == b1 {
			t.Fatalf("after a port change of b: a %.12s->%.12s (want same), b %.12s->%.12s (want new)", a1, a5, b1, b5)
		}
		b1 = b5
		dockertest.WaitRegistry(t, "mirror b on its new port", fmt.Sprintf("127.0.0.1:%d", b.Port), 60*time.Second)
	})

	t.Run("image", func(t *testing.T) {
		tag := "marina-test/registry:drift-" + randHex(4)
		dockertest.Docker(t, "tag", l.regImg, tag)
		t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", tag).Run() })
		run([]sdk.Mirror{a, b}, func(e *sdk.Env) { e.Images["registry"] = tag })
		a6, b6 := ids()
		if a6 == a1 || b6 == b1 {
			t.Fatalf("after an image change both mirrors must be new: a %.12s->%.12s, b %.12s->%.12s", a1, a6, b1, b6)
		}
		if img := state(t, c, a.Name).Image; img != tag {
			t.Fatalf("mirror image %s, want %s", img, tag)
		}
		run([]sdk.Mirror{a, b}) // back to the test image
		a1, b1 = ids()
	})

	t.Run("removed from the list", func(t *testing.T) {
		res := run([]sdk.Mirror{a})
		if st := state(t, c, b.Name); st != nil {
			t.Fatalf("mirror %s still exists after it left the list: %+v", b.Name, st)
		}
		if a7 := state(t, c, a.Name).ID; a7 != a1 {
			t.Fatalf("mirror a recreated when b was removed: %.12s->%.12s", a1, a7)
		}
		if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Summary, b.Name) || !strings.Contains(res.Warnings[0].Summary, "kept") {
			t.Fatalf("warnings %+v, want one about %s and its kept cache", res.Warnings, b.Name)
		}
		dockertest.Docker(t, "volume", "inspect", registries.VolumePrefix+b.Name) // the cache stays
	})

	t.Run("PreDestroy", func(t *testing.T) {
		if _, err := l.h.Run(sdk.PreDestroy, l.env([]sdk.Mirror{a})); err != nil {
			t.Fatal(err)
		}
		if st := state(t, c, a.Name); st != nil {
			t.Fatalf("mirror %s still exists after PreDestroy: %+v", a.Name, st)
		}
		dockertest.Docker(t, "volume", "inspect", registries.VolumePrefix+a.Name)
	})
}

// TestForeignContainerRefused: a container with a mirror's name that marina
// did not create is neither replaced nor removed.
func TestForeignContainerRefused(t *testing.T) {
	l := newLab(t, "guest")
	m := mirror(t, "http://172.26.0.10:5000")
	id := dockertest.Run(t, "--name", m.Name, "--network", l.net.ID, l.regImg)
	_, err := l.h.Run(sdk.PostUp, l.env([]sdk.Mirror{m}))
	if err == nil || !strings.Contains(err.Error(), "not created by marina") || !strings.Contains(err.Error(), m.Name) {
		t.Fatalf("PostUp over a foreign container = %v, want a refusal naming it", err)
	}
	if got := dockertest.Docker(t, "inspect", "--format", "{{.Id}}", m.Name); got != id {
		t.Fatalf("foreign container replaced: %s, want %s", got, id)
	}
}

// TestOutOfProcess runs the plugin as a real child process (go-plugin,
// gRPC, mTLS) and checks that PostUp converges, that its log on stderr
// never shows the password, and that PreDestroy removes the mirror.
func TestOutOfProcess(t *testing.T) {
	l := newLab(t, "guest")
	l.upstream(t, "172.26.0.10")
	h := plugintest.Start(t, plugintest.Build(t, "./testdata/plugin"))
	if d := h.Describe(); d.Name != "registries" || !d.Has(sdk.PostUp) || !d.Has(sdk.PreCluster) || !d.Has(sdk.PreDestroy) {
		t.Fatalf("Describe = %+v", d)
	}
	const password = "0ut-of-" + "process-secret"
	m := mirror(t, "http://172.26.0.10:5000")
	m.Username, m.Password = "u", password
	c := connect(t)

	res := h.RequireIdempotent(t, sdk.PostUp, l.env([]sdk.Mirror{m}))
	if len(res.Warnings) != 0 {
		t.Fatalf("warnings %+v", res.Warnings)
	}
	st := state(t, c, m.Name)
	if st == nil || !st.Running {
		t.Fatalf("mirror %s not running: %+v", m.Name, st)
	}
	dockertest.WaitRegistry(t, "mirror", fmt.Sprintf("127.0.0.1:%d", m.Port), 60*time.Second)
	if s := h.Stderr(); !strings.Contains(s, "mirror converged") || strings.Contains(s, password) {
		t.Fatalf("plugin stderr lacks its log line or shows the password:\n%s", s)
	}
	pre, err := h.Run(sdk.PreCluster, l.env([]sdk.Mirror{m}))
	if err != nil || pre.Kind == nil || len(pre.Kind.NodeFiles) != 1 || pre.Kind.NodeFiles[0].Path != "/etc/containerd/certs.d/172.26.0.10_5000_/hosts.toml" {
		t.Fatalf("PreCluster = %+v, %v", pre, err)
	}
	if _, err := h.Run(sdk.PreDestroy, l.env([]sdk.Mirror{m})); err != nil {
		t.Fatal(err)
	}
	if st := state(t, c, m.Name); st != nil {
		t.Fatalf("mirror still exists after PreDestroy: %+v", st)
	}
}

// TestNodeCAsAfterTheListChanged (issue 25): a cluster's nodes keep the
// company CAs they were created with, so PostUp names, on every up, the
// clusters of the lab whose nodes carry another list than trust.extraCAs
// now (or none), with the fix. Nodes are containers with kind's cluster
// label on the lab's network, the file where PreCluster puts it; a node of
// another network (another lab) is not the lab's.
func TestNodeCAsAfterTheListChanged(t *testing.T) {
	l := newLab(t, "guest")
	node := func(cluster, network, cas string) {
		id := dockertest.Run(t, "--label", "io.x-k8s.kind.cluster="+cluster, "--network", network, l.regImg)
		if cas == "" {
			return
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "etc", "marina", "ca", "extra-cas.pem")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(cas), 0o644); err != nil {
			t.Fatal(err)
		}
		dockertest.Docker(t, "cp", filepath.Join(dir, "etc"), id+":/")
	}
	const a, b = "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n", "-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n"
	node("cas-old", l.net.ID, a)
	node("cas-none", l.net.ID, "")
	node("cas-current", l.net.ID, b)
	other := dockertest.Network(t, "10.226.0.0/24") // another lab's network (no other test package uses it)
	node("cas-other-lab", other.ID, a)

	run := func(extraCAs string) (string, *sdk.Result) {
		t.Helper()
		res, err := l.h.Run(sdk.PostUp, l.env(nil, func(e *sdk.Env) { e.ExtraCAs = extraCAs }))
		if err != nil {
			t.Fatal(err)
		}
		var w []string
		for _, d := range res.Warnings {
			w = append(w, d.Summary+" / "+d.Detail)
		}
		return strings.Join(w, "\n"), res
	}
	warned, res := run(b)
	for _, want := range []string{
		"cluster(s) cas-old trust other company CAs than trust.extraCAs lists now",
		"cluster(s) cas-none were created before trust.extraCAs listed company CAs",
		"marina cluster delete NAME && marina cluster create NAME",
	} {
		if !strings.Contains(warned, want) {
			t.Errorf("with the list B, PostUp's warnings lack %q:\n%s", want, warned)
		}
	}
	if strings.Contains(warned, "cas-current") || strings.Contains(warned, "cas-other-lab") {
		t.Errorf("a cluster with the current list, or of another lab, was named:\n%s", warned)
	}
	if res.Steady != nil {
		t.Error("the result is Steady: the next up would skip the hook and not say it again")
	}
	warned, _ = run("")
	if !strings.Contains(warned, "cluster(s) cas-current, cas-old trust other company CAs") || strings.Contains(warned, "cas-none") {
		t.Errorf("with the list emptied, PostUp's warnings are:\n%s", warned)
	}
}
