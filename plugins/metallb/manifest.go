package metallb

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/bcollard/marina/sdk/kube"
)

// MetalLB's pinned release. The manifest is upstream's
// config/manifests/metallb-native.yaml of this tag, byte for byte (the same
// file is in the Go module go.universe.tf/metallb at this version).
const (
	MetalLBVersion = "v0.16.2"
	// ManifestSHA256 is the sha256 of the embedded manifest. Updating
	// MetalLB means replacing the file and this digest together (the
	// package's tests check both against the module's copy).
	ManifestSHA256 = "e5f7c268f114c446dc60aaad71b7cabf861f637743e033e354d7d48592807c6d"
)

// The images the manifest pins, used unless the environment overrides them
// (Env.Images[ImageKeyController] / [ImageKeySpeaker], i.e. marina's
// images.metallbController / images.metallbSpeaker settings).
const (
	DefaultControllerImage = "quay.io/metallb/controller:" + MetalLBVersion
	DefaultSpeakerImage    = "quay.io/metallb/speaker:" + MetalLBVersion

	ImageKeyController = "metallbController"
	ImageKeySpeaker    = "metallbSpeaker"
)

// What the manifest installs, by name.
const (
	// Namespace is where MetalLB runs and where its pools live.
	Namespace = "metallb-system"
	// ControllerDeployment is the controller (IP allocation and the
	// admission webhook); SpeakerDaemonSet announces addresses from every node.
	ControllerDeployment = "controller"
	SpeakerDaemonSet     = "speaker"
	controllerContainer  = "controller"
	speakerContainer     = "speaker"
)

//go:embed manifests/metallb-native-v0.16.2.yaml
var nativeManifest []byte

// manifestErr is not nil when the embedded manifest is not the pinned one;
// PostCluster refuses to install anything then. It is computed on first
// use, not at init: every marina command links this package, and only
// PostCluster needs the digest. (Failing init would take the whole marina
// binary down with it.)
var manifestErr = sync.OnceValue(func() error { return verifyManifest(nativeManifest) })

func verifyManifest(b []byte) error {
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != ManifestSHA256 {
		return fmt.Errorf("the embedded MetalLB %s manifest has sha256 %s, want %s: the build is corrupt or the file was edited; restore manifests/metallb-native-%s.yaml from go.universe.tf/metallb@%s", MetalLBVersion, got, ManifestSHA256, MetalLBVersion, MetalLBVersion)
	}
	return nil
}

// manifestObjects decodes the pinned manifest, points the controller
// Deployment and the speaker DaemonSet at the given images ("" keeps the
// pinned image) and labels every object as marina's (ownershipLabels).
// Only the image of the named container changes in those objects.
func manifestObjects(controllerImage, speakerImage string) ([]*unstructured.Unstructured, error) {
	if err := manifestErr(); err != nil {
		return nil, err
	}
	objs, err := kube.DecodeManifests(nativeManifest)
	if err != nil {
		return nil, fmt.Errorf("decoding the embedded MetalLB manifest: %w", err)
	}
	var sawController, sawSpeaker bool
	for i, o := range objs {
		if o.GetNamespace() != Namespace {
			continue
		}
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == ControllerDeployment:
			sawController = true
			if controllerImage != "" {
				if objs[i], err = setDeploymentImage(o, controllerContainer, controllerImage); err != nil {
					return nil, err
				}
			}
			if err = setReadiness(objs[i], controllerContainer, controllerReadiness); err != nil {
				return nil, err
			}
		case o.GetKind() == "DaemonSet" && o.GetName() == SpeakerDaemonSet:
			sawSpeaker = true
			if speakerImage != "" {
				if objs[i], err = setDaemonSetImage(o, speakerContainer, speakerImage); err != nil {
					return nil, err
				}
			}
		}
	}
	if !sawController || !sawSpeaker {
		return nil, fmt.Errorf("the embedded MetalLB manifest has no Deployment %s/%s or DaemonSet %s/%s", Namespace, ControllerDeployment, Namespace, SpeakerDaemonSet)
	}
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range ownershipLabels {
			labels[k] = v
		}
		o.SetLabels(labels)
	}
	return objs, nil
}

// ownershipLabels are added to every object the plugin applies. They say
// who installed it (kubectl get crd,all -A -l marina.dev/plugin=metallb),
// and they give the plugin a field of its own in objects upstream ships
// with nothing but a name (the Secret metallb-webhook-cert): the API server
// records no managed fields for an apply that sets none, and then writes
// the object once on the next re-apply; with the labels a re-run writes
// nothing.
var ownershipLabels = map[string]string{
	LabelManagedBy: "marina",
	LabelPlugin:    Name,
}

// controllerReadiness is the controller's readiness probe timing. Upstream
// probes first after 10 s, then every 10 s: the controller serves its
// webhook a second or two after it starts, but the API server reaches the
// webhook only through a ready pod, so PostCluster (which configures the
// pool through that webhook) and every cluster create waited those 10 s.
// Probing every 2 s from the start keeps upstream's tolerance (30 s of
// failures, 15 probes) and costs the kubelet one local GET per 2 s.
var controllerReadiness = map[string]int64{"initialDelaySeconds": 1, "periodSeconds": 2, "failureThreshold": 15}

// setReadiness sets fields (initialDelaySeconds, ...) of the readiness
// probe of container name in o's pod template, in place; o must have one.
func setReadiness(o *unstructured.Unstructured, name string, fields map[string]int64) error {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		c, ok := c.(map[string]any)
		if !ok || c["name"] != name {
			continue
		}
		probe, ok := c["readinessProbe"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: container %q has no readiness probe", kube.Describe(o), name)
		}
		for k, v := range fields {
			probe[k] = v
		}
		return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	}
	return fmt.Errorf("%s: no container named %q", kube.Describe(o), name)
}

func setDeploymentImage(o *unstructured.Unstructured, container, image string) (*unstructured.Unstructured, error) {
	return setPodTemplateImage(o, container, image)
}

func setDaemonSetImage(o *unstructured.Unstructured, container, image string) (*unstructured.Unstructured, error) {
	return setPodTemplateImage(o, container, image)
}

// setPodTemplateImage returns a copy of o (a Deployment or DaemonSet) with
// the image of container name in its pod template set to image, and
// nothing else changed.
func setPodTemplateImage(o *unstructured.Unstructured, name, image string) (*unstructured.Unstructured, error) {
	cp := o.DeepCopy()
	if err := kube.SetImage(cp, name, image); err != nil {
		return nil, err
	}
	return cp, nil
}

// convert moves a value between representations through JSON (apply
// configurations have omitempty pointers throughout, so nothing is added).
func convert(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return utiljson.Unmarshal(b, to)
}

func toUnstructured(v any) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := convert(v, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
