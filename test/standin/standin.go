// Package standin stands in for the kind CLI in marina's end-to-end tests,
// at the one boundary that cannot run on these CI machines: kind nodes need
// systemd and containerd in privileged containers, which they refuse.
//
// # What it is
//
// A program speaking marina's kind helper protocol (core/kind.HelperBackend,
// `kind-standin kind-helper`), which marina's KindProvider runs in place of
// kind (KindProvider.Executable, or MARINA_KIND_HELPER for the marina
// binary). Given the kind config marina rendered — loaded with kind's own
// types, strictly, defaulted and validated as kind does, so an invalid
// config fails as it would in kind — it "creates" the cluster:
//
//   - one Docker container per config node, exactly where kind puts them:
//     named NAME-control-plane, NAME-worker, NAME-worker2, ..., hostname =
//     name, labels io.x-k8s.kind.cluster=NAME and io.x-k8s.kind.role (plus
//     dev.marina.standin=1), on the network of
//     KIND_EXPERIMENTAL_DOCKER_NETWORK (default kind), the control plane
//     publishing networking.apiServerAddress:apiServerPort -> 6443/tcp and
//     its extraPortMappings, every node bind-mounting its extraMounts, an
//     anonymous /var volume and restart policy on-failure:1 — so everything
//     marina reads from Docker (slots from the API port binding, node
//     counts, `docker ps --filter label=io.x-k8s.kind.cluster=NAME`) is
//     real;
//   - on the control plane, a real etcd and kube-apiserver (the test
//     binaries of test/tools, Kubernetes v1.37) listening on 6443 with a
//     PKI generated for the cluster (the certificate SANs kubeadm would
//     use, including the config's apiServer.certSANs patches), client
//     certificate auth, Node,RBAC authorization and service-account tokens;
//   - the objects kubeadm and kind create that marina touches: ConfigMap
//     kube-system/coredns with kubeadm's default Corefile, the coredns
//     Deployment, Service and RBAC (from kubeadm's own manifests), the
//     kubeadm:cluster-admins binding, and a Node per node labelled and
//     tainted as the kubelet, kubeadm and kind would (node labels from the
//     config and from the kubeadm patches' kubeletExtraArgs node-labels);
//   - /etc/kubernetes/admin.conf, which Kubeconfig reads back as kind does
//     (entries renamed kind-NAME, server from Docker's port binding, or
//     https://NAME-control-plane:6443 for the internal one).
//
// Delete removes the node containers (force, with volumes), List and Nodes
// read them back from Docker.
//
// # What it is not
//
// NODES AND PODS DO NOT RUN. There is no kubelet, no container runtime, no
// CNI, no kube-proxy, no scheduler and no controller-manager: the Node
// objects are reported Ready but nothing runs on them, and no Pod or
// ReplicaSet is ever created. Instead the control plane's init program
// reports every Deployment, DaemonSet and StatefulSet as rolled out (its
// desired replicas ready, available and updated, observedGeneration =
// generation, Available=True), so code that waits for a rollout proceeds,
// and creates each namespace's "default" ServiceAccount. Anything that needs
// a running pod (a webhook server, a controller, DNS answers from CoreDNS)
// must be run by the test itself, as a process against the API server.
//
// # Use in tests
//
//	p := standin.Build(t)                       // once per test process; cached across processes
//	prov := &kind.KindProvider{Executable: p.Helper, Network: net.Name}
//	t.Setenv(standin.ImageEnv, p.Image)          // the helper inherits the environment
//	cmd.Env = append(os.Environ(), p.Env()...)   // or: for a marina process
//
// Build compiles the helper and the node's init program (CGO_ENABLED=0) and
// builds the node image FROM scratch with the init, etcd, kube-apiserver
// and kubectl (found by kubetest.RequireAssets). Both are cached under
// $MARINA_TEST_CACHE/standin (default <user cache dir>/marina-test/standin)
// and tagged marina-test/kind-node:<key>, keyed by a hash of the sources,
// go.mod, go.sum, the Go version and those binaries, so another test binary
// reuses them.
package standin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/test/standin/internal/helper"
)

// Environment variables a process needs to use the stand-in.
const (
	// HelperEnv names the kind helper program marina runs instead of
	// itself (cmd/marina's KindHelperEnv).
	HelperEnv = "MARINA_KIND_HELPER"
	// ImageEnv names the node image the helper runs.
	ImageEnv = helper.ImageEnv
)

// ImageRepository is the repository of the node image's tags.
const ImageRepository = "marina-test/kind-node"

// Labels of the node image.
const (
	labelImage   = "marina.test.image"
	labelInputs  = "marina.test.inputs"
	imageName    = "kind-node"
	buildTimeout = 20 * time.Minute
	// pruneAge is how old another build must be before Build removes it
	// (a concurrent test binary may still use a recent one; an image a
	// container uses is never removed).
	pruneAge = time.Hour
)

// The packages Build compiles, relative to the module root.
const (
	helperPkg = "./test/standin/cmd/kind-standin"
	initPkg   = "./test/standin/cmd/standin-node"
)

// dockerfile is the node image's recipe (every binary is static).
// The Kubernetes binaries come first, in a layer of their own, so that
// builds that differ only in the init share it.
const dockerfile = `FROM scratch
COPY etcd kube-apiserver kubectl /usr/local/bin/
COPY version /kind/version
COPY standin-node /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/standin-node"]
`

// Paths are what Build produced.
type Paths struct {
	// Helper is the kind-standin program: KindProvider.Executable.
	Helper string
	// Image is the node image's tag (marina-test/kind-node:<key>).
	Image string
}

// Env returns MARINA_KIND_HELPER=<Helper> and MARINA_STANDIN_IMAGE=<Image>,
// for the environment of a marina process (or of the test itself).
func (p Paths) Env() []string {
	return []string{HelperEnv + "=" + p.Helper, ImageEnv + "=" + p.Image}
}

var (
	buildOnce sync.Once
	built     Paths
	buildErr  error
)

// Build returns the stand-in's helper and node image, building them on the
// first call of the test process unless a previous process cached the same
// build. It needs Docker and the tier-3 binaries: without them the test
// fails (or skips, under dockertest.Require's and kubetest.RequireAssets'
// policies, never in CI).
func Build(t testing.TB) Paths {
	t.Helper()
	dockertest.Require(t)
	assets := kubetest.RequireAssets(t)
	buildOnce.Do(func() {
		begin := time.Now()
		built, buildErr = buildStandin(assets)
		if buildErr == nil {
			t.Logf("standin: helper %s, node image %s (%s)", built.Helper, built.Image, time.Since(begin).Round(time.Millisecond))
		}
	})
	if buildErr != nil {
		t.Fatalf("standin.Build: %v", buildErr)
	}
	return built
}

// CacheDir is where Build keeps its builds: $MARINA_TEST_CACHE/standin, or
// <user cache dir>/marina-test/standin.
func CacheDir() (string, error) {
	if c := os.Getenv(kubetest.CacheEnv); c != "" {
		return filepath.Join(c, "standin"), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (%v); set %s", err, kubetest.CacheEnv)
	}
	return filepath.Join(base, "marina-test", "standin"), nil
}

func buildStandin(assets kubetest.Assets) (Paths, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	root, err := moduleRoot(ctx)
	if err != nil {
		return Paths{}, err
	}
	cache, err := CacheDir()
	if err != nil {
		return Paths{}, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Paths{}, err
	}
	version, err := apiServerVersion(ctx, assets.KubeAPIServer)
	if err != nil {
		return Paths{}, err
	}
	key, err := inputsKey(ctx, root, assets, version)
	if err != nil {
		return Paths{}, err
	}
	dir := filepath.Join(cache, key)
	p := Paths{Helper: filepath.Join(dir, "kind-standin"), Image: ImageRepository + ":" + key}

	api, err := client.New(client.FromEnv)
	if err != nil {
		return Paths{}, fmt.Errorf("docker endpoint: %w", err)
	}
	defer api.Close()
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return Paths{}, fmt.Errorf("docker engine: %w", err)
	}
	if cached(ctx, api, dir, p.Image, key) {
		return p, nil
	}

	unlock, err := lock(ctx, filepath.Join(cache, ".lock"))
	if err != nil {
		return Paths{}, err
	}
	defer unlock()
	if cached(ctx, api, dir, p.Image, key) { // another process built it meanwhile
		return p, nil
	}
	tmp, err := os.MkdirTemp(cache, key+".tmp-")
	if err != nil {
		return Paths{}, err
	}
	defer os.RemoveAll(tmp)
	if err := goBuild(ctx, root, filepath.Join(tmp, "kind-standin"), helperPkg, runtime.GOOS); err != nil {
		return Paths{}, err
	}
	if err := goBuild(ctx, root, filepath.Join(tmp, "standin-node"), initPkg, "linux"); err != nil {
		return Paths{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "version"), []byte(version+"\n"), 0o644); err != nil {
		return Paths{}, err
	}
	files := map[string]string{
		"standin-node":   filepath.Join(tmp, "standin-node"),
		"etcd":           assets.Etcd,
		"kube-apiserver": assets.KubeAPIServer,
		"kubectl":        assets.Kubectl,
		"version":        filepath.Join(tmp, "version"),
	}
	if err := buildImage(ctx, api, p.Image, key, version, files); err != nil {
		return Paths{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Paths{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Paths{}, fmt.Errorf("move the build into %s: %w", dir, err)
	}
	prune(ctx, api, cache, key)
	return p, nil
}

// cached reports whether the build of key is complete: both binaries and
// the image with key's inputs label.
func cached(ctx context.Context, api *client.Client, dir, image, key string) bool {
	for _, f := range []string{"kind-standin", "standin-node"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	img, err := api.ImageInspect(ctx, image)
	return err == nil && img.Config != nil && img.Config.Labels[labelInputs] == key
}

// moduleRoot is the marina module's directory (the test runs inside it).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := run(ctx, "", nil, "go", "env", "GOMOD")
	gomod := strings.TrimSpace(out)
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("find marina's module (go env GOMOD = %q, %v): run the test inside the marina checkout", gomod, err)
	}
	return filepath.Dir(gomod), nil
}

// apiServerVersion is the Kubernetes version kube-apiserver reports
// ("Kubernetes v1.37.2").
func apiServerVersion(ctx context.Context, path string) (string, error) {
	out, err := run(ctx, "", nil, path, "--version")
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	f := strings.Fields(out)
	if len(f) != 2 || !strings.HasPrefix(f[1], "v") {
		return "", fmt.Errorf("%s --version printed %q, not \"Kubernetes vX.Y.Z\"; rebuild it with %s", path, strings.TrimSpace(out), kubetest.BuildCommand)
	}
	return f[1], nil
}

// inputsKey hashes everything a build depends on: the Go files of every
// package of this module the two programs import, go.mod, go.sum, the Go
// version, the node image's recipe and binaries.
func inputsKey(ctx context.Context, root string, assets kubetest.Assets, version string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "recipe\n%s\nkubernetes %s\n", dockerfile, version)
	goVersion, err := run(ctx, root, nil, "go", "env", "GOVERSION", "GOARCH")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "go %s\n", goVersion)
	out, err := run(ctx, root, []string{"CGO_ENABLED=0", "GOOS=linux"}, "go", "list", "-deps",
		"-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`,
		helperPkg, initPkg)
	if err != nil {
		return "", err
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, name := range f[1:] {
			files = append(files, filepath.Join(f[0], name))
		}
	}
	files = append(files, filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		if err := hashFile(h, rel, f); err != nil {
			return "", err
		}
	}
	for _, f := range []string{assets.Etcd, assets.KubeAPIServer, assets.Kubectl} {
		if err := hashFile(h, filepath.Base(f), f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

func hashFile(h hash.Hash, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "file %s\n", name)
	_, err = io.Copy(h, f)
	return err
}

// goBuild compiles pkg statically for goos into out.
func goBuild(ctx context.Context, root, out, pkg, goos string) error {
	env := []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + runtime.GOARCH,
		"GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false")}
	if _, err := run(ctx, root, env, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}

// run runs argv in dir (with env added) and returns its stdout; the error
// carries stderr.
func run(ctx context.Context, dir string, env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// lock takes an exclusive lock on path, waiting (bounded by ctx) while
// another process holds it.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: another build holds it: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// buildImage builds the node image FROM scratch from files (name in the
// context -> path on disk), streaming the context to the engine.
func buildImage(ctx context.Context, api *client.Client, tag, key, version string, files map[string]string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, files)) }()
	res, err := api.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels: map[string]string{
			labelImage:               imageName,
			labelInputs:              key,
			helper.ImageVersionLabel: version,
		},
	})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("docker build %s: %w", tag, err)
	}
	defer res.Body.Close()
	var out strings.Builder
	dec := json.NewDecoder(bufio.NewReader(res.Body))
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("docker build %s: reading its output: %w", tag, err)
		}
		out.WriteString(msg.Stream)
		if msg.Error != "" {
			return fmt.Errorf("docker build %s: %s\n%s", tag, msg.Error, out.String())
		}
	}
	img, err := api.ImageInspect(ctx, tag)
	if err != nil || img.Config == nil || img.Config.Labels[labelInputs] != key {
		return fmt.Errorf("docker build %s finished but the image is not there (%v):\n%s", tag, err, out.String())
	}
	return nil
}

// writeContext writes the build context: the Dockerfile and files.
func writeContext(w io.Writer, files map[string]string) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, dockerfile); err != nil {
		return err
	}
	for name, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: fi.Size(), Typeflag: tar.TypeReg})
		}
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("build context: %s: %w", path, err)
		}
	}
	return tw.Close()
}

// prune removes other builds older than pruneAge: cached directories and
// images no container uses (best effort).
func prune(ctx context.Context, api *client.Client, cache, key string) {
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if !e.IsDir() || e.Name() == key {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > pruneAge {
			_ = os.RemoveAll(filepath.Join(cache, e.Name()))
		}
	}
	imgs, err := api.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("label", labelImage+"="+imageName)})
	if err != nil {
		return
	}
	for _, img := range imgs.Items {
		if img.Labels[labelInputs] == key || time.Since(time.Unix(img.Created, 0)) < pruneAge {
			continue
		}
		// Not forced: an image a container still uses stays.
		_, _ = api.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{})
	}
}
