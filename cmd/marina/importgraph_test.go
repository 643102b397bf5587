package main

// TestImportGraph (issue 14): heavy packages stay out of the marina CLI's
// import graph, on Linux and in the macOS build. A package linked into
// marina costs every command its init and its memory (today `marina
// version` spends ~90 ms initialising gopacket/layers, which it never uses),
// so what issue 14 moves out must not creep back through a new import.
// `go list -deps` runs once per platform; it only reads sources, so the
// macOS listing is the cgo one (core/vm/lima/vz_cgo_darwin.go imports
// Lima's vz driver only when cgo is on) even though nothing here can
// compile it.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// forbiddenImport is a package, or with a "/..." suffix a package and
// everything under it, that cmd/marina must not reach.
type forbiddenImport struct {
	pkg    string
	reason string
	// pending: still reachable today; reported (with its chain), not failed.
	// The change that removes the package from marina's graph removes the
	// flag in the same commit: from then on a path back fails the test.
	// The test fails when a pending entry is no longer reachable on any
	// platform, so the flag cannot be forgotten.
	pending bool
}

var forbidden = []forbiddenImport{
	// Absent today; each would be heavy (init, size) and none belongs in a CLI.
	{pkg: "k8s.io/kubernetes/...", reason: "never a dependency of marina: its replace directives break `go install` of marina; test tools build it in test/tools"},
	{pkg: "k8s.io/apiserver/...", reason: "server side of Kubernetes (the test API server lives in test/tools)"},
	{pkg: "k8s.io/apiextensions-apiserver/...", reason: "server side of Kubernetes"},
	{pkg: "k8s.io/kubectl/...", reason: "kubectl's library: huge, and marina writes kubeconfigs, it does not embed kubectl"},
	{pkg: "k8s.io/cli-runtime/...", reason: "kubectl's CLI machinery"},
	{pkg: "sigs.k8s.io/controller-runtime/...", reason: "controller framework (envtest in tests only)"},
	{pkg: "helm.sh/helm/...", reason: "Helm: charts are not how marina installs add-ons"},
	{pkg: "github.com/google/cel-go/...", reason: "CEL, pulled in by API-server libraries; large init"},
	{pkg: "github.com/docker/docker/...", reason: "the deprecated Docker client; marina uses github.com/moby/moby/client"},
	{pkg: "github.com/containerd/containerd/...", reason: "container runtime libraries; marina talks to Docker's API"},
	{pkg: "github.com/google/go-containerregistry/...", reason: "a second registry client beside oras-go"},
	{pkg: "go.etcd.io/etcd/server/...", reason: "etcd's server: marina runs etcd as a container and is only a client"},
	{pkg: "github.com/coredns/coredns/...", reason: "CoreDNS runs as a container image, it is not linked"},
	{pkg: "go.universe.tf/metallb/...", reason: "MetalLB runs in the cluster, it is not linked"},
	{pkg: "sigs.k8s.io/external-dns/...", reason: "ExternalDNS runs in the cluster, it is not linked"},
	{pkg: "github.com/distribution/distribution/...", reason: "the registry runs as a container image (only distribution/reference, a parser, is linked)"},
	{pkg: "github.com/aws/...", reason: "cloud SDK"},
	{pkg: "cloud.google.com/go/...", reason: "cloud SDK"},
	{pkg: "github.com/Azure/...", reason: "cloud SDK"},
	{pkg: "github.com/prometheus/client_golang/...", reason: "metrics registry: init work and no use in a CLI"},
	{pkg: "net/http/pprof", reason: "registers debug handlers on http.DefaultServeMux at init"},
	{pkg: "expvar", reason: "registers /debug/vars on http.DefaultServeMux at init"},
	{pkg: "golang.org/x/tools/...", reason: "Go tooling libraries, large"},
	{pkg: "github.com/stretchr/testify/...", reason: "test library"},
	{pkg: "github.com/onsi/...", reason: "test library"},
	{pkg: "github.com/bcollard/marina/test/...", reason: "the test harness (kind stand-in, Kubernetes helpers) never ships"},
	{pkg: "github.com/bcollard/marina/sdk/plugintest", reason: "the plugin test harness never ships"},
	{pkg: "github.com/bcollard/marina/sdk/kubetest", reason: "the real-API-server test fixture never ships"},
	{pkg: "github.com/bcollard/marina/sdk/dockertest", reason: "the Docker test fixture never ships"},

	// Lima lives in marina-lima, marina's Lima engine (core/vm/lima and
	// core/vm/lima/limaengine): its VM drivers' user-mode networking alone
	// (gopacket/layers via usernet) cost ~92 ms of init per command.
	// client-go's scheme is out too: marina talks to clusters through the
	// dynamic client (sdk/kube's NewTyped and discovery REST mapper).
	{pkg: "github.com/google/gopacket/...", reason: "~92 ms of package init (gopacket/layers) on every marina command; via Lima's usernet (gvisor-tap-vsock)"},
	{pkg: "github.com/containers/gvisor-tap-vsock/...", reason: "Lima's user-mode network (usernet): a VM-side concern: marina-lima only; pulls gvisor and gopacket"},
	{pkg: "gvisor.dev/gvisor/...", reason: "gVisor's network stack, via gvisor-tap-vsock"},
	{pkg: "github.com/lima-vm/...", reason: "Lima lives in marina-lima: marina asks it (the engine protocol, core/vm/limavm) for everything about a Lima VM"},
	{pkg: "k8s.io/client-go/kubernetes/scheme", reason: "~27 ms of package init (every API group's types registered) on every marina command; use the dynamic client with kube.NewTyped (sdk/kube)"},
	{pkg: "k8s.io/client-go/kubernetes", reason: "client-go's typed clientset: it imports kubernetes/scheme; use the dynamic client with kube.NewTyped (sdk/kube)"},
	{pkg: "k8s.io/client-go/discovery", reason: "imports kubernetes/scheme (also via restmapper and applyconfigurations/*); sdk/kube has its own discovery REST mapper"},
	{pkg: "oras.land/oras-go/v2", reason: "oras's root package compiles a regular expression at init (~0.7 ms of every command); marina uses its registry packages, and pluginstore.pushArtifactManifest writes what its PackManifest wrote"},
}

// importPlatforms are the builds checked: Linux as released (no cgo) and
// macOS with cgo, as released (go list does not compile, so it works here).
var importPlatforms = []struct{ name, goos, goarch, cgo string }{
	{"linux-amd64", "linux", "amd64", "0"},
	{"darwin-arm64-cgo", "darwin", "arm64", "1"},
}

const marinaPkg = "github.com/bcollard/marina/cmd/marina"

func TestImportGraph(t *testing.T) {
	// reachable[entry] = platforms where a pending entry was still reachable.
	var mu sync.Mutex
	reachable := map[string][]string{}
	t.Run("platforms", func(t *testing.T) {
		for _, p := range importPlatforms {
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				graph := importGraph(t, p.goos, p.goarch, p.cgo)
				// The listing is the real graph, not an empty or garbled one:
				// packages marina certainly links are found, with their chain.
				for _, must := range []string{"github.com/spf13/cobra", "github.com/hashicorp/go-plugin"} {
					if importChain(graph, marinaPkg, must) == nil {
						t.Fatalf("%s: %s not reachable from %s: the go list output was not read right (%d packages)", p.name, must, marinaPkg, len(graph))
					}
				}
				for _, f := range forbidden {
					chain := importChain(graph, marinaPkg, f.pkg)
					if chain == nil {
						continue
					}
					if f.pending {
						mu.Lock()
						reachable[f.pkg] = append(reachable[f.pkg], p.name)
						mu.Unlock()
						t.Logf("pending: %s still reachable on %s (%s):\n    %s", f.pkg, p.name, f.reason, strings.Join(chain, "\n -> "))
						continue
					}
					t.Errorf("%s is reachable from marina on %s, and must not be: %s.\nImport chain:\n    %s\n"+
						"Cut the chain at the import nearest to cmd/marina that brings it in: move the code that needs it "+
						"into a plugin or a helper binary, or import a lighter package. If marina really needs it, "+
						"argue it in an issue and change the table in cmd/marina/importgraph_test.go.",
						f.pkg, p.name, f.reason, strings.Join(chain, "\n -> "))
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	for _, f := range forbidden {
		if f.pending && len(reachable[f.pkg]) == 0 {
			t.Errorf("%s is marked pending but no longer reachable from marina on any platform checked: "+
				"remove its `pending: true` in cmd/marina/importgraph_test.go so it cannot come back", f.pkg)
		}
	}
}

// importGraph runs `go list -deps` on cmd/marina for one platform and
// returns each package's imports.
func importGraph(t *testing.T, goos, goarch, cgo string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED="+cgo)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("GOOS=%s GOARCH=%s CGO_ENABLED=%s go list -deps: %v\n%s", goos, goarch, cgo, err, errb.String())
	}
	return parseImportGraph(out.String())
}

// parseImportGraph reads lines "PKG IMPORT...".
func parseImportGraph(s string) map[string][]string {
	graph := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			graph[f[0]] = f[1:]
		}
	}
	return graph
}

// matchesImport reports whether pkg is pattern, or under it when pattern
// ends in "/...".
func matchesImport(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// importChain returns a shortest import chain from root to a package that
// matches pattern (breadth-first), or nil if none is reachable.
func importChain(graph map[string][]string, root, pattern string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if matchesImport(pattern, pkg) {
			var chain []string
			for p := pkg; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, imp := range graph[pkg] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = pkg
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

func TestImportChain(t *testing.T) {
	graph := parseImportGraph(`m a b
a c
b c d/e
c
d/e d/e/f
d/e/f
x d/e
`)
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"c", []string{"m", "a", "c"}},
		{"d/e/f", []string{"m", "b", "d/e", "d/e/f"}},
		{"d/...", []string{"m", "b", "d/e"}},
		{"d", nil},
		{"x", nil},
	} {
		if got := importChain(graph, "m", c.pattern); !slices.Equal(got, c.want) {
			t.Errorf("importChain(%q) = %v, want %v", c.pattern, got, c.want)
		}
	}
}
