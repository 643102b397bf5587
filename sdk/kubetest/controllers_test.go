package kubetest

import (
	"context"
	"debug/buildinfo"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestControllerBinaries runs metallb-controller, external-dns and
// cert-manager-controller, found through MetalLBControllerPath, ExternalDNSPath
// and CertManagerControllerPath, and checks that each runs, is static
// and was built from the module version kubetest names.
func TestControllerBinaries(t *testing.T) {
	tests := []struct {
		name       string
		path       func(testing.TB) string
		args       []string
		wantOutput string // a line of the combined output
		module     string // the module of the main package, per the build info
		version    string
	}{
		{
			name: MetalLBControllerName, path: MetalLBControllerPath, args: []string{"--help"},
			// metallb-controller has no --version; its usage lists its flags.
			wantOutput: "  -lb-class string",
			module:     "go.universe.tf/metallb", version: MetalLBVersion,
		},
		{
			name: ExternalDNSName, path: ExternalDNSPath, args: []string{"--version"},
			wantOutput: ExternalDNSVersion, // stamped by build.sh with -ldflags -X
			module:     "sigs.k8s.io/external-dns", version: ExternalDNSVersion,
		},
		{
			name: CertManagerControllerName, path: CertManagerControllerPath, args: []string{"--help"},
			// no --version; its usage lists its flags.
			wantOutput: "      --cluster-resource-namespace string                       Namespace to store resources owned by cluster scoped resources such as ClusterIssuer in. This must be specified if ClusterIssuers are enabled. (default \"kube-system\")",
			// build.sh builds in a copy of cert-manager's module (the main
			// module, so Go records no version: "(devel)"); the version is
			// the one test/tools/certmanager/go.mod pins and
			// TestVersionMatchesToolsGoMod checks.
			module: "github.com/cert-manager/cert-manager", version: "(devel)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, path, tt.args...)
			cmd.WaitDelay = 5 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v (want exit 0)\n%s", path, strings.Join(tt.args, " "), err, out)
			}
			if !contains(strings.Split(string(out), "\n"), tt.wantOutput) {
				t.Errorf("%s %s printed no line %q:\n%s", tt.name, strings.Join(tt.args, " "), tt.wantOutput, out)
			}
			info, err := buildinfo.ReadFile(path)
			if err != nil {
				t.Fatalf("read build info of %s: %v", path, err)
			}
			if info.Main.Path != tt.module || info.Main.Version != tt.version {
				t.Errorf("%s built from %s %s, want %s %s", tt.name, info.Main.Path, info.Main.Version, tt.module, tt.version)
			}
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			if settings["CGO_ENABLED"] != "0" {
				t.Errorf("%s built with CGO_ENABLED=%q, want 0 (static)", tt.name, settings["CGO_ENABLED"])
			}
		})
	}
}
