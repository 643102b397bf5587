package certmanager

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestCRDsAreUpstreams compares the embedded CRDs with deploy/crds of the
// Go module github.com/cert-manager/cert-manager at CertManagerVersion
// (through the module proxy when it is not in the module cache yet), and
// checks that every upstream CRD is embedded.
func TestCRDsAreUpstreams(t *testing.T) {
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/cert-manager/cert-manager@"+CertManagerVersion)
	cmd.Dir = t.TempDir() // outside marina's module: no go.mod is read or written
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		msg := "go mod download github.com/cert-manager/cert-manager@" + CertManagerVersion + ": " + err.Error()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			msg += ": " + string(ee.Stderr)
		}
		if os.Getenv("CI") == "" {
			t.Skip(msg + " (no module proxy here; CI runs this)")
		}
		t.Fatal(msg)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download printed %s (%v)", out, err)
	}
	upstream, err := filepath.Glob(filepath.Join(mod.Dir, "deploy", "crds", "*.yaml"))
	if err != nil || len(upstream) == 0 {
		t.Fatalf("no CRDs in %s/deploy/crds (%v)", mod.Dir, err)
	}
	for _, f := range upstream {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := manifests.ReadFile(path.Join("manifests", "crds", filepath.Base(f)))
		if err != nil {
			t.Errorf("%s is not embedded: copy it to manifests/crds", f)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("manifests/crds/%s differs from %s: copy it again", filepath.Base(f), f)
		}
	}
}

// TestObjects: what PostCluster applies, by kind, with the image override
// and the labels; the controller's image defaults to the pinned release.
func TestObjects(t *testing.T) {
	ca := sdk.LabCA{Cert: "CERT", Key: "KEY"}
	objs, err := objects("mirror.example/cert-manager-controller:v1.21.1", ca)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var names []string
	for _, o := range objs {
		kinds[o.GetKind()]++
		names = append(names, o.GetKind()+" "+o.GetName())
		if o.GetLabels()["marina.dev/plugin"] != Name {
			t.Errorf("%s %s lacks the plugin label: %v", o.GetKind(), o.GetName(), o.GetLabels())
		}
		if o.GetKind() == "Deployment" {
			if img := containerImage(t, o); img != "mirror.example/cert-manager-controller:v1.21.1" {
				t.Errorf("the controller's image is %q, want the override", img)
			}
		}
	}
	want := map[string]int{"CustomResourceDefinition": 6, "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 8, "ClusterRoleBinding": 8,
		"Role": 1, "RoleBinding": 1, "Deployment": 1, "Secret": 1, "ClusterIssuer": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s objects, want %d (all: %v)", kinds[k], k, n, names)
		}
	}
	if last := objs[len(objs)-1]; last.GetKind() != "ClusterIssuer" || last.GetName() != IssuerName {
		t.Errorf("the last object is %s %s, want ClusterIssuer %s", last.GetKind(), last.GetName(), IssuerName)
	}
	if secret := objs[len(objs)-2]; secret.GetNamespace() != Namespace || secret.GetName() != CASecret {
		t.Errorf("the CA Secret is %s/%s", secret.GetNamespace(), secret.GetName())
	}

	objs, err = objects(image(sdk.Env{}), ca)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && containerImage(t, o) != DefaultControllerImage {
			t.Errorf("without an override the image is %q, want %s", containerImage(t, o), DefaultControllerImage)
		}
	}
}

func containerImage(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == controllerContainer {
			img, _ := m["image"].(string)
			return img
		}
	}
	t.Fatalf("no container %s", controllerContainer)
	return ""
}

// TestPostClusterRefusesWithoutTheCA: no CA (before the first up), or a CA
// without its key (a marina that does not know lab.ca), is an error that
// says what to do, before any cluster is contacted (the kubeconfig points
// nowhere).
func TestPostClusterRefusesWithoutTheCA(t *testing.T) {
	h := plugintest.New(t, New())
	nowhere := plugintest.WithKubeconfig([]byte("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: https://127.0.0.1:1}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\nusers: [{name: x, user: {token: t}}]\n"))
	tests := []struct {
		name string
		ca   sdk.LabCA
		want string
	}{
		{"no CA", sdk.LabCA{}, "marina up creates it"},
		{"no key", sdk.LabCA{Cert: "x"}, "capability lab.ca"},
		{"not PEM", sdk.LabCA{Cert: "x", Key: "y"}, "marina trust rotate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Run(sdk.PostCluster, nowhere, plugintest.WithEnv(func(e *sdk.Env) { e.LabCA = tt.ca }))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PostCluster = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestDescribe: the plugin's Info is valid and declares what it needs.
func TestDescribe(t *testing.T) {
	d, err := sdk.Describe(New())
	if err != nil {
		t.Fatal(err)
	}
	if !d.HasCapability(sdk.CapLabCA) || !d.HasCapability(sdk.CapKubeconfig) || d.HasCapability(sdk.CapDocker) {
		t.Errorf("capabilities %v, want lab.ca and kubeconfig only", d.Capabilities)
	}
}
