package kubetest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records Fatalf and Skipf instead of stopping the goroutine, so the
// fail-or-skip policy can be tested directly.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func (f *fakeTB) Skipf(format string, args ...any) { f.skip = fmt.Sprintf(format, args...) }

// writeAssets creates fake binaries named names in dir with mode.
func writeAssets(t *testing.T, dir string, mode os.FileMode, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindAssets(t *testing.T) {
	tmp := t.TempDir()
	full := filepath.Join(tmp, "full")
	writeAssets(t, full, 0o755, "kube-apiserver", "etcd", "kubectl", MetalLBControllerName, ExternalDNSName, CertManagerControllerName)
	noControllers := filepath.Join(tmp, "nocontrollers")
	writeAssets(t, noControllers, 0o755, "kube-apiserver", "etcd", "kubectl")
	writeAssets(t, noControllers, 0o644, MetalLBControllerName)
	noExec := filepath.Join(tmp, "noexec")
	writeAssets(t, noExec, 0o755, "kube-apiserver", "etcd")
	writeAssets(t, noExec, 0o644, "kubectl")
	empty := filepath.Join(tmp, "empty")
	writeAssets(t, empty, 0o755)
	cache := filepath.Join(tmp, "cache")
	writeAssets(t, filepath.Join(cache, "kube", "bin"), 0o755, "kube-apiserver", "etcd", "kubectl")
	home := filepath.Join(tmp, "home")

	tests := []struct {
		name            string
		env             map[string]string
		wantDir         string   // when the lookup succeeds
		wantControllers bool     // metallb-controller and external-dns found too
		wantErr         []string // substrings of the error otherwise
	}{
		{name: "assets dir", env: map[string]string{AssetsEnv: full, CacheEnv: cache}, wantDir: full, wantControllers: true},
		{name: "cache dir", env: map[string]string{CacheEnv: cache, "HOME": home}, wantDir: filepath.Join(cache, "kube", "bin")},
		{name: "envtest's dir", env: map[string]string{EnvtestAssetsEnv: noControllers, CacheEnv: cache}, wantDir: noControllers},
		{name: "marina's dir before envtest's", env: map[string]string{AssetsEnv: full, EnvtestAssetsEnv: noControllers}, wantDir: full, wantControllers: true},
		{
			name:    "empty envtest dir",
			env:     map[string]string{EnvtestAssetsEnv: empty, CacheEnv: cache},
			wantErr: []string{"missing from " + empty + " ($" + EnvtestAssetsEnv + ")", "unset " + EnvtestAssetsEnv, "setup-envtest"},
		},
		{name: "controllers missing or not executable", env: map[string]string{AssetsEnv: noControllers}, wantDir: noControllers},
		{
			name:    "empty assets dir",
			env:     map[string]string{AssetsEnv: empty, CacheEnv: cache},
			wantErr: []string{"kube-apiserver, etcd, kubectl missing from " + empty, "$" + AssetsEnv, "unset " + AssetsEnv, BuildCommand},
		},
		{
			name:    "kubectl not executable",
			env:     map[string]string{AssetsEnv: noExec},
			wantErr: []string{"kubectl missing from " + noExec, BuildCommand},
		},
		{
			name:    "home default, nothing built",
			env:     map[string]string{"HOME": home},
			wantErr: []string{"kube-apiserver, etcd, kubectl missing from " + filepath.Join(home, ".cache", "marina-test", "kube", "bin"), "run " + BuildCommand},
		},
		{
			name:    "no HOME",
			env:     map[string]string{},
			wantErr: []string{CacheEnv, BuildCommand},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := findAssets(func(k string) string { return tt.env[k] })
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("findAssets = %+v, want an error", a)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("findAssets: %v", err)
			}
			want := Assets{
				Dir:           tt.wantDir,
				KubeAPIServer: filepath.Join(tt.wantDir, "kube-apiserver"),
				Etcd:          filepath.Join(tt.wantDir, "etcd"),
				Kubectl:       filepath.Join(tt.wantDir, "kubectl"),
			}
			if tt.wantControllers {
				want.MetalLBController = filepath.Join(tt.wantDir, MetalLBControllerName)
				want.ExternalDNS = filepath.Join(tt.wantDir, ExternalDNSName)
				want.CertManagerController = filepath.Join(tt.wantDir, CertManagerControllerName)
			}
			if a != want {
				t.Errorf("findAssets = %+v, want %+v", a, want)
			}
		})
	}
}

// TestRequireAssetsPolicy checks the missing-binary policy of dockertest.Require:
// fail with the fix, skip only when MARINA_SKIP_KUBE=1 and CI is unset.
func TestRequireAssetsPolicy(t *testing.T) {
	missing, lookupErr := findAssets(func(k string) string {
		if k == CacheEnv {
			return t.TempDir()
		}
		return ""
	})
	if lookupErr == nil {
		t.Fatalf("findAssets in an empty dir = %+v, want an error", missing)
	}
	found := Assets{Dir: "/x", KubeAPIServer: "/x/kube-apiserver", Etcd: "/x/etcd", Kubectl: "/x/kubectl"}

	tests := []struct {
		name      string
		err       error
		env       map[string]string
		wantFatal bool
		wantSkip  bool
	}{
		{name: "found", env: map[string]string{"CI": "true"}},
		{name: "missing", err: lookupErr, env: map[string]string{}, wantFatal: true},
		{name: "missing, skip asked", err: lookupErr, env: map[string]string{SkipEnv: "1"}, wantSkip: true},
		{name: "missing, skip asked in CI", err: lookupErr, env: map[string]string{SkipEnv: "1", "CI": "true"}, wantFatal: true},
		{name: "missing, skip not 1", err: lookupErr, env: map[string]string{SkipEnv: "true"}, wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ftb := &fakeTB{}
			a := requireAssets(ftb, found, tt.err, func(k string) string { return tt.env[k] })
			if got := ftb.fatal != ""; got != tt.wantFatal {
				t.Errorf("fatal = %q, want fatal %v", ftb.fatal, tt.wantFatal)
			}
			if got := ftb.skip != ""; got != tt.wantSkip {
				t.Errorf("skip = %q, want skip %v", ftb.skip, tt.wantSkip)
			}
			if tt.wantFatal {
				for _, want := range []string{"run " + BuildCommand, SkipEnv + "=1", "ignored when CI is set"} {
					if !strings.Contains(ftb.fatal, want) {
						t.Errorf("fatal message %q does not contain %q", ftb.fatal, want)
					}
				}
			}
			if tt.err == nil && a != found {
				t.Errorf("requireAssets = %+v, want %+v", a, found)
			}
		})
	}
}

// TestRequireToolPolicy checks that a missing metallb-controller or external-dns
// gets the policy of missing core binaries, with its own name and the fix.
func TestRequireToolPolicy(t *testing.T) {
	found := Assets{Dir: "/x", KubeAPIServer: "/x/kube-apiserver", Etcd: "/x/etcd", Kubectl: "/x/kubectl"}
	tests := []struct {
		name      string
		path      string
		env       map[string]string
		wantFatal []string // substrings of the failure; nil: no failure
		wantSkip  bool
	}{
		{name: "found", path: "/x/" + MetalLBControllerName, env: map[string]string{"CI": "true"}},
		{
			name:      "missing from the cache",
			env:       map[string]string{},
			wantFatal: []string{MetalLBControllerName + " missing from /x (the test cache)", "run " + BuildCommand, SkipEnv + "=1"},
		},
		{
			name:      "missing from the assets dir",
			env:       map[string]string{AssetsEnv: "/x"},
			wantFatal: []string{MetalLBControllerName + " missing from /x ($" + AssetsEnv + ")", "unset " + AssetsEnv},
		},
		{name: "missing, skip asked", env: map[string]string{SkipEnv: "1"}, wantSkip: true},
		{
			name:      "missing, skip asked in CI",
			env:       map[string]string{SkipEnv: "1", "CI": "1"},
			wantFatal: []string{MetalLBControllerName + " missing", "ignored when CI is set"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ftb := &fakeTB{}
			got := requireTool(ftb, found, MetalLBControllerName, tt.path, func(k string) string { return tt.env[k] })
			if got != tt.path {
				t.Errorf("requireTool = %q, want %q", got, tt.path)
			}
			if (ftb.fatal != "") != (tt.wantFatal != nil) {
				t.Errorf("fatal = %q, want fatal %v", ftb.fatal, tt.wantFatal != nil)
			}
			for _, want := range tt.wantFatal {
				if !strings.Contains(ftb.fatal, want) {
					t.Errorf("fatal message %q does not contain %q", ftb.fatal, want)
				}
			}
			if got := ftb.skip != ""; got != tt.wantSkip {
				t.Errorf("skip = %q, want skip %v", ftb.skip, tt.wantSkip)
			}
		})
	}
}

// TestVersionMatchesToolsGoMod keeps Version in step with the k8s.io/kubernetes
// release test/tools/build.sh builds.
func TestVersionMatchesToolsGoMod(t *testing.T) {
	tests := []struct {
		goMod, module, constant, want string
	}{
		{"go.mod", "k8s.io/kubernetes", "Version", Version},
		{"metallb/go.mod", "go.universe.tf/metallb", "MetalLBVersion", MetalLBVersion},
		{"externaldns/go.mod", "sigs.k8s.io/external-dns", "ExternalDNSVersion", ExternalDNSVersion},
		{"certmanager/go.mod", "github.com/cert-manager/cert-manager", "CertManagerVersion", CertManagerVersion},
	}
	for _, tt := range tests {
		t.Run(tt.module, func(t *testing.T) {
			if got := requiredVersion(t, filepath.Join("..", "..", "test", "tools", tt.goMod), tt.module); got != tt.want {
				t.Errorf("test/tools/%s requires %s %q, kubetest.%s is %q; change %s",
					tt.goMod, tt.module, got, tt.constant, tt.want, tt.constant)
			}
		})
	}
}

// requiredVersion returns the version of module in the require lines of goMod.
func requiredVersion(t *testing.T, goMod, module string) string {
	t.Helper()
	f, err := os.Open(goMod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[0] == "require" && fields[1] == module {
			got = fields[2]
		}
		if len(fields) >= 2 && fields[0] == module {
			got = fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
