package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Environment variables read by this package; see the package documentation.
const (
	// AssetsEnv names a directory holding kube-apiserver, etcd and kubectl.
	AssetsEnv = "MARINA_KUBE_ASSETS"
	// EnvtestAssetsEnv is controller-runtime envtest's variable for the same
	// directory (what `setup-envtest use -p path` prints), read when
	// AssetsEnv is not set: a plugin author's machine may have it already.
	EnvtestAssetsEnv = "KUBEBUILDER_ASSETS"
	// CacheEnv is the test cache directory; the binaries are in <cache>/kube/bin.
	CacheEnv = "MARINA_TEST_CACHE"
	// SkipEnv turns missing binaries into a skip, unless CI is set.
	SkipEnv = "MARINA_SKIP_KUBE"
)

// Version is the Kubernetes release test/tools/build.sh builds (k8s.io/kubernetes
// in test/tools/go.mod; TestVersionMatchesToolsGoMod keeps them in step).
const Version = "v1.37.2"

// MetalLBVersion, ExternalDNSVersion and CertManagerVersion are the releases of
// MetalLB's controller (go.universe.tf/metallb in test/tools/metallb/go.mod),
// of ExternalDNS (sigs.k8s.io/external-dns in test/tools/externaldns/go.mod) and
// of cert-manager's controller (github.com/cert-manager/cert-manager in
// test/tools/certmanager/go.mod) that test/tools/build.sh builds;
// TestVersionMatchesToolsGoMod keeps them in step.
const (
	MetalLBVersion     = "v0.16.2"
	ExternalDNSVersion = "v0.23.0"
	CertManagerVersion = "v1.21.1"
)

// BuildCommand is the command that builds the binaries into the cache.
const BuildCommand = "bash test/tools/build.sh"

// Names of the binaries in the assets directory.
const (
	// MetalLBControllerName is MetalLB's controller (go.universe.tf/metallb/controller).
	MetalLBControllerName = "metallb-controller"
	// ExternalDNSName is ExternalDNS (sigs.k8s.io/external-dns).
	ExternalDNSName = "external-dns"
	// CertManagerControllerName is cert-manager's controller
	// (github.com/cert-manager/cert-manager, cmd/controller).
	CertManagerControllerName = "cert-manager-controller"
)

// Assets are the paths of the binaries a cluster runs, and of the controllers
// tests may run against it.
type Assets struct {
	// Dir is the directory the binaries were found in.
	Dir string
	// KubeAPIServer, Etcd and Kubectl are the binaries' paths in Dir.
	KubeAPIServer, Etcd, Kubectl string
	// MetalLBController, ExternalDNS and CertManagerController are the paths of
	// metallb-controller, external-dns and cert-manager-controller in Dir, or ""
	// when Dir lacks them: build.sh always builds them, but a
	// $MARINA_KUBE_ASSETS directory (e.g. controller-runtime's assets) need not
	// hold them. MetalLBControllerPath, ExternalDNSPath and
	// CertManagerControllerPath require them.
	MetalLBController, ExternalDNS, CertManagerController string
}

// assetNames are the binaries that must be in the assets directory.
var assetNames = []string{"kube-apiserver", "etcd", "kubectl"}

// executable reports whether path is a regular file with an execute bit.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// buildFix says how to get binaries missing from a directory found through from
// ("the test cache", "$MARINA_KUBE_ASSETS" or "$KUBEBUILDER_ASSETS").
func buildFix(from string) string {
	fix := "in marina's repository, run " + BuildCommand + " (builds them into $" + CacheEnv + "/kube/bin; minutes when cold); " +
		"elsewhere, set " + EnvtestAssetsEnv + " to a directory holding them, e.g. the one `go run sigs.k8s.io/controller-runtime/tools/setup-envtest@latest use -p path` prints"
	switch from {
	case "$" + AssetsEnv:
		fix = "put them there, or unset " + AssetsEnv + "; " + fix
	case "$" + EnvtestAssetsEnv:
		fix = "put them there, or unset " + EnvtestAssetsEnv + "; " + fix
	}
	return fix
}

// FindAssets looks the binaries up: in $MARINA_KUBE_ASSETS when set, else
// in $KUBEBUILDER_ASSETS when set, else in $MARINA_TEST_CACHE/kube/bin (default $HOME/.cache/marina-test/kube/bin). The
// error names the missing binaries and the command that builds them.
func FindAssets() (Assets, error) {
	return findAssets(os.Getenv)
}

func findAssets(getenv func(string) string) (Assets, error) {
	dir, from := getenv(AssetsEnv), "$"+AssetsEnv
	if dir == "" {
		dir, from = getenv(EnvtestAssetsEnv), "$"+EnvtestAssetsEnv
	}
	if dir == "" {
		cache := getenv(CacheEnv)
		if cache == "" {
			home := getenv("HOME")
			if home == "" {
				return Assets{}, fmt.Errorf("neither $%s, $%s nor $HOME is set; "+
					"set %s to the cache dir and run %s", AssetsEnv, CacheEnv, CacheEnv, BuildCommand)
			}
			cache = filepath.Join(home, ".cache", "marina-test")
		}
		dir, from = filepath.Join(cache, "kube", "bin"), "the test cache"
	}
	var missing []string
	for _, name := range assetNames {
		if !executable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return Assets{}, fmt.Errorf("%s missing from %s (%s); fix: %s",
			strings.Join(missing, ", "), dir, from, buildFix(from))
	}
	a := Assets{
		Dir:           dir,
		KubeAPIServer: filepath.Join(dir, "kube-apiserver"),
		Etcd:          filepath.Join(dir, "etcd"),
		Kubectl:       filepath.Join(dir, "kubectl"),
	}
	if p := filepath.Join(dir, MetalLBControllerName); executable(p) {
		a.MetalLBController = p
	}
	if p := filepath.Join(dir, ExternalDNSName); executable(p) {
		a.ExternalDNS = p
	}
	if p := filepath.Join(dir, CertManagerControllerName); executable(p) {
		a.CertManagerController = p
	}
	return a, nil
}

var (
	assetsOnce sync.Once
	assets     Assets
	assetsErr  error
)

// RequireAssets returns the binaries, failing the test with the command that
// builds them when one is missing. When MARINA_SKIP_KUBE=1 is set (and CI is not)
// it skips instead. The lookup is done once per test process.
func RequireAssets(t testing.TB) Assets {
	t.Helper()
	assetsOnce.Do(func() { assets, assetsErr = FindAssets() })
	return requireAssets(t, assets, assetsErr, os.Getenv)
}

func requireAssets(t testing.TB, a Assets, err error, getenv func(string) string) Assets {
	t.Helper()
	if err == nil {
		return a
	}
	if getenv(SkipEnv) == "1" && getenv("CI") == "" {
		t.Skipf("tier-3 test binaries not available (%v); skipping because %s=1", err, SkipEnv)
		return Assets{}
	}
	t.Fatalf("tier-3 test binaries not available: %v\n"+
		"In marina's repository, make test-setup builds them (make test does it first).\n"+
		"Without them, set %s=1 to skip tier-3 tests (ignored when CI is set).", err, SkipEnv)
	return Assets{}
}

// KubectlPath returns the path of the kubectl binary built with the API server
// (same release), for tests that cross-check with it.
func KubectlPath(t testing.TB) string {
	t.Helper()
	return RequireAssets(t).Kubectl
}

// MetalLBControllerPath returns the path of MetalLB's controller (MetalLBVersion)
// built by test/tools/build.sh. A missing binary fails the test with the command
// that builds it, or skips it, under the policy of RequireAssets.
func MetalLBControllerPath(t testing.TB) string {
	t.Helper()
	a := RequireAssets(t)
	return requireTool(t, a, MetalLBControllerName, a.MetalLBController, os.Getenv)
}

// ExternalDNSPath returns the path of ExternalDNS (ExternalDNSVersion) built by
// test/tools/build.sh, under the same policy as MetalLBControllerPath.
func ExternalDNSPath(t testing.TB) string {
	t.Helper()
	a := RequireAssets(t)
	return requireTool(t, a, ExternalDNSName, a.ExternalDNS, os.Getenv)
}

// CertManagerControllerPath returns the path of cert-manager's controller
// (CertManagerVersion) built by test/tools/build.sh, under the same policy as
// MetalLBControllerPath.
func CertManagerControllerPath(t testing.TB) string {
	t.Helper()
	a := RequireAssets(t)
	return requireTool(t, a, CertManagerControllerName, a.CertManagerController, os.Getenv)
}

// requireTool returns path, or fails or skips (see requireAssets) when it is "".
func requireTool(t testing.TB, a Assets, name, path string, getenv func(string) string) string {
	t.Helper()
	if path != "" || a.Dir == "" {
		// a.Dir is "" only when requireAssets skipped (under a fake TB).
		return path
	}
	from := "the test cache"
	if getenv(AssetsEnv) != "" {
		from = "$" + AssetsEnv
	}
	err := fmt.Errorf("%s missing from %s (%s); fix: %s", name, a.Dir, from, buildFix(from))
	requireAssets(t, Assets{}, err, getenv)
	return ""
}
