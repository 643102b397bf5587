package metallb

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/plugintest"
	"github.com/bcollard/marina/test/golden"
)

func renderYAML(t *testing.T, objs ...*unstructured.Unstructured) []byte {
	t.Helper()
	var out bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	return out.Bytes()
}

func TestManifestDigest(t *testing.T) {
	if err := manifestErr(); err != nil {
		t.Fatal(err)
	}
	tampered := append(bytes.Clone(nativeManifest), '\n')
	err := verifyManifest(tampered)
	if err == nil || !strings.Contains(err.Error(), "want "+ManifestSHA256) || !strings.Contains(err.Error(), "go.universe.tf/metallb@"+MetalLBVersion) {
		t.Errorf("a tampered manifest gives %v", err)
	}
}

// TestManifestIsUpstream compares the embedded manifest with the one in the
// Go module go.universe.tf/metallb at the pinned version (fetched through
// the module proxy when it is not in the module cache yet).
func TestManifestIsUpstream(t *testing.T) {
	cmd := exec.Command("go", "mod", "download", "-json", "go.universe.tf/metallb@"+MetalLBVersion)
	cmd.Dir = t.TempDir() // outside marina's module: no go.mod is read or written
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		msg := "go mod download go.universe.tf/metallb@" + MetalLBVersion + ": " + err.Error()
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
	upstream, err := os.ReadFile(filepath.Join(mod.Dir, "config", "manifests", "metallb-native.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(upstream, nativeManifest) {
		t.Errorf("manifests/metallb-native-%s.yaml differs from %s/config/manifests/metallb-native.yaml: copy it again and update ManifestSHA256", MetalLBVersion, mod.Dir)
	}
}

func TestManifestPinsDefaultImages(t *testing.T) {
	objs, err := manifestObjects("", "")
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	for _, o := range objs {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			images[o.GetKind()+"/"+c.(map[string]any)["name"].(string)] = c.(map[string]any)["image"].(string)
		}
	}
	want := map[string]string{"Deployment/controller": DefaultControllerImage, "DaemonSet/speaker": DefaultSpeakerImage}
	if !reflect.DeepEqual(images, want) {
		t.Errorf("images = %v, want %v", images, want)
	}
}

// workloads returns the controller Deployment and the speaker DaemonSet.
func workloads(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if (o.GetKind() == "Deployment" && o.GetName() == ControllerDeployment) || (o.GetKind() == "DaemonSet" && o.GetName() == SpeakerDaemonSet) {
			out = append(out, o)
		}
	}
	if len(out) != 2 {
		t.Fatalf("found %d of the controller and speaker objects", len(out))
	}
	return out
}

var imageCases = []struct {
	name                 string
	controller, speaker  string
	wantCtrl, wantSpeakr string
}{
	{name: "default", wantCtrl: DefaultControllerImage, wantSpeakr: DefaultSpeakerImage},
	{name: "overridden", controller: "127.0.0.1:5001/metallb/controller:v0.16.2", speaker: "127.0.0.1:5001/metallb/speaker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		wantCtrl: "127.0.0.1:5001/metallb/controller:v0.16.2", wantSpeakr: "127.0.0.1:5001/metallb/speaker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	{name: "controller-only", controller: "mirror.local/metallb/controller:dev", wantCtrl: "mirror.local/metallb/controller:dev", wantSpeakr: DefaultSpeakerImage},
}

// TestWorkloadsGolden renders the controller Deployment and the speaker
// DaemonSet as they are applied, per image setting.
func TestWorkloadsGolden(t *testing.T) {
	for _, tc := range imageCases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifestObjects(tc.controller, tc.speaker)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/workloads-"+tc.name+".golden", renderYAML(t, workloads(t, objs)...))
		})
	}
}

// TestImageOverrideChangesOnlyImages: every object is the upstream one
// except the image of the container concerned, the controller's readiness
// timing (controllerReadiness) and marina's labels; no field is added,
// dropped or reordered by the typed edit.
func TestImageOverrideChangesOnlyImages(t *testing.T) {
	upstream, err := kube.DecodeManifests(nativeManifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range imageCases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifestObjects(tc.controller, tc.speaker)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != len(upstream) {
				t.Fatalf("%d objects, upstream has %d", len(objs), len(upstream))
			}
			for i, o := range objs {
				o = o.DeepCopy()
				cs, found, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				if found && (o.GetKind() == "Deployment" || o.GetKind() == "DaemonSet") {
					c := cs[0].(map[string]any)
					want := map[string]string{"Deployment": tc.wantCtrl, "DaemonSet": tc.wantSpeakr}[o.GetKind()]
					if c["image"] != want {
						t.Errorf("%s image = %v, want %s", kube.Describe(o), c["image"], want)
					}
					c["image"] = map[string]string{"Deployment": DefaultControllerImage, "DaemonSet": DefaultSpeakerImage}[o.GetKind()]
					if o.GetKind() == "Deployment" {
						ucs, _, _ := unstructured.NestedSlice(upstream[i].Object, "spec", "template", "spec", "containers")
						probe, up := c["readinessProbe"].(map[string]any), ucs[0].(map[string]any)["readinessProbe"].(map[string]any)
						for k, v := range controllerReadiness {
							if probe[k] != v {
								t.Errorf("%s readinessProbe.%s = %v, want %d", kube.Describe(o), k, probe[k], v)
							}
							probe[k] = up[k]
						}
					}
					if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", "containers"); err != nil {
						t.Fatal(err)
					}
				}
				labels := o.GetLabels()
				if labels[LabelManagedBy] != "marina" || labels[LabelPlugin] != Name {
					t.Errorf("%s labels = %v", kube.Describe(o), labels)
				}
				delete(labels, LabelManagedBy)
				delete(labels, LabelPlugin)
				if len(labels) == 0 {
					labels = nil // upstream has no metadata.labels here
				}
				o.SetLabels(labels)
				if !reflect.DeepEqual(o.Object, upstream[i].Object) {
					a, _ := yaml.Marshal(o.Object)
					b, _ := yaml.Marshal(upstream[i].Object)
					t.Errorf("%s differs from upstream beyond its image:\n%s\nupstream:\n%s", kube.Describe(o), a, b)
				}
			}
		})
	}
	if _, err := setDeploymentImage(upstream[0], "controller", "x"); err == nil {
		t.Errorf("setting an image on %s did not fail", kube.Describe(upstream[0]))
	}
}

func TestPoolGolden(t *testing.T) {
	tests := []struct {
		name    string
		cluster func(*sdk.Cluster)
	}{
		{name: "slot-1", cluster: func(*sdk.Cluster) {}},
		{name: "slot-42-one-range", cluster: func(c *sdk.Cluster) {
			c.Name, c.Slot = "edge", 42
			c.MetalLBPools = []sdk.AddressRange{{First: "172.30.42.16", Last: "172.30.42.254"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := plugintest.DefaultCluster()
			tt.cluster(c)
			objs, err := poolObjects(c)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/pool-"+tt.name+".golden", renderYAML(t, objs...))
		})
	}
}

func TestPoolAddressesErrors(t *testing.T) {
	r := func(first, last string) sdk.AddressRange { return sdk.AddressRange{First: first, Last: last} }
	tests := []struct {
		name  string
		slot  int
		pools []sdk.AddressRange
		want  string
	}{
		{name: "no slot", slot: 0, pools: []sdk.AddressRange{r("172.30.1.1", "172.30.1.7")}, want: `cluster "dev" has no slot`},
		{name: "no ranges", slot: 1, want: `cluster "dev" has no MetalLB address ranges`},
		{name: "bad address", slot: 1, pools: []sdk.AddressRange{r("172.30.1.1", "172.30.1.300")}, want: `range 1 (172.30.1.1-172.30.1.300)`},
		{name: "ipv6", slot: 1, pools: []sdk.AddressRange{r("fd00::1", "fd00::9")}, want: "must be IPv4"},
		{name: "reversed", slot: 1, pools: []sdk.AddressRange{r("172.30.1.1", "172.30.1.7"), r("172.30.1.20", "172.30.1.16")}, want: "range 2 (172.30.1.20-172.30.1.16): first address is after the last"},
		{name: "overlap", slot: 1, pools: []sdk.AddressRange{r("172.30.1.1", "172.30.1.7"), r("172.30.1.7", "172.30.1.9")}, want: "ranges 1 (172.30.1.1-172.30.1.7) and 2 (172.30.1.7-172.30.1.9) overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := plugintest.DefaultCluster()
			c.Slot, c.MetalLBPools = tt.slot, tt.pools
			_, err := poolAddresses(c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	d := plugintest.New(t, New()).Describe()
	if d.Name != Name || d.Version != Version || !reflect.DeepEqual(d.Hooks, []sdk.Hook{sdk.PostCluster}) {
		t.Errorf("identity = %s %s hooks %v", d.Name, d.Version, d.Hooks)
	}
	if len(d.Dependencies) != 0 || !reflect.DeepEqual(d.Capabilities, []string{sdk.CapKubeconfig}) || d.Timeout(sdk.PostCluster) != 5*time.Minute {
		t.Errorf("deps %v caps %v timeout %v", d.Dependencies, d.Capabilities, d.Timeout(sdk.PostCluster))
	}
	if len(d.ConfigSchema) != 0 && string(d.ConfigSchema) != "null" {
		t.Errorf("the plugin takes no config, schema = %s", d.ConfigSchema)
	}
}

// A cluster whose ranges are wrong fails before anything is contacted
// (the harness's kubeconfig points at a port nothing listens on), and any
// config is refused: the plugin takes none.
func TestPostClusterRefusesBeforeContactingTheCluster(t *testing.T) {
	h := plugintest.New(t, New())
	_, err := h.Run(sdk.PostCluster, plugintest.WithCluster(func(c *sdk.Cluster) { c.MetalLBPools = nil }))
	if err == nil || !strings.Contains(err.Error(), `cluster "dev" has no MetalLB address ranges`) {
		t.Errorf("err = %v", err)
	}
	if p := h.Progress(); len(p) != 0 {
		t.Errorf("progress %q: the hook went on", p)
	}
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"wait": "5m"}`)); err == nil {
		t.Error("a config was accepted")
	}
}
