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
	// CacheEnv is the test cache directory; the binaries are in <cache>/kube/bin.
	CacheEnv = "MARINA_TEST_CACHE"
	// SkipEnv turns missing binaries into a skip, unless CI is set.
	SkipEnv = "MARINA_SKIP_KUBE"
)

// Version is the Kubernetes release test/tools/build.sh builds (k8s.io/kubernetes
// in test/tools/go.mod; TestVersionMatchesToolsGoMod keeps them in step).
const Version = "v1.37.2"

// BuildCommand is the command that builds the binaries into the cache.
const BuildCommand = "bash test/tools/build.sh"

// Assets are the paths of the binaries a cluster runs.
type Assets struct {
	// Dir is the directory the binaries were found in.
	Dir string
	// KubeAPIServer, Etcd and Kubectl are the binaries' paths in Dir.
	KubeAPIServer, Etcd, Kubectl string
}

// assetNames are the binaries that must be in the assets directory.
var assetNames = []string{"kube-apiserver", "etcd", "kubectl"}

// FindAssets looks the binaries up: in $MARINA_KUBE_ASSETS when set, else in
// $MARINA_TEST_CACHE/kube/bin (default $HOME/.cache/marina-test/kube/bin). The
// error names the missing binaries and the command that builds them.
func FindAssets() (Assets, error) {
	return findAssets(os.Getenv)
}

func findAssets(getenv func(string) string) (Assets, error) {
	dir, from := getenv(AssetsEnv), "$"+AssetsEnv
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
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		fix := "run " + BuildCommand + " (builds them into $" + CacheEnv + "/kube/bin, ~7 min cold)"
		if from != "the test cache" {
			fix = "put them there, or unset " + AssetsEnv + " and " + fix
		}
		return Assets{}, fmt.Errorf("%s missing from %s (%s); fix: %s",
			strings.Join(missing, ", "), dir, from, fix)
	}
	return Assets{
		Dir:           dir,
		KubeAPIServer: filepath.Join(dir, "kube-apiserver"),
		Etcd:          filepath.Join(dir, "etcd"),
		Kubectl:       filepath.Join(dir, "kubectl"),
	}, nil
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
		t.Skipf("kube-apiserver binaries not available (%v); skipping because %s=1", err, SkipEnv)
		return Assets{}
	}
	t.Fatalf("kube-apiserver binaries not available: %v\n"+
		"Without them, set %s=1 to skip tier-3 tests (ignored when CI is set).", err, SkipEnv)
	return Assets{}
}

// KubectlPath returns the path of the kubectl binary built with the API server
// (same release), for tests that cross-check with it.
func KubectlPath(t testing.TB) string {
	t.Helper()
	return RequireAssets(t).Kubectl
}
