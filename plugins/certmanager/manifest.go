package certmanager

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// manifests holds cert-manager's CRDs of CertManagerVersion, upstream's
// files byte for byte (deploy/crds in the module
// github.com/cert-manager/cert-manager; TestCRDsAreUpstreams checks them
// against the module's copy), and the controller's objects
// (controller.yaml: the Helm chart's, rendered with its defaults).
//
//go:embed manifests/crds/*.yaml manifests/controller.yaml
var manifests embed.FS

// labels are set on every object the plugin applies: they say who
// installed it (kubectl get crd,all -A -l marina.dev/plugin=certmanager).
var labels = map[string]string{"marina.dev/managed-by": "marina", "marina.dev/plugin": Name}

func labelsAny() map[string]any {
	out := make(map[string]any, len(labels))
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// objects returns everything PostCluster applies: the CRDs, the controller
// with its image set to img, the lab CA's Secret and the ClusterIssuer.
func objects(img string, ca sdk.LabCA) ([]*unstructured.Unstructured, error) {
	crdFiles, err := fs.Glob(manifests, "manifests/crds/*.yaml")
	if err != nil || len(crdFiles) == 0 {
		return nil, fmt.Errorf("the embedded cert-manager CRDs are missing (%v): the build is corrupt", err)
	}
	slices.Sort(crdFiles)
	var out []*unstructured.Unstructured
	for _, f := range append(crdFiles, "manifests/controller.yaml") {
		b, err := manifests.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := kube.DecodeManifests(b)
		if err != nil {
			return nil, fmt.Errorf("decoding the embedded %s: %w", path.Base(f), err)
		}
		out = append(out, objs...)
	}
	sawController := false
	for _, o := range out {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		o.SetLabels(l)
		if o.GetKind() == "Deployment" && o.GetNamespace() == Namespace && o.GetName() == Deployment {
			if err := kube.SetImage(o, controllerContainer, img); err != nil {
				return nil, err
			}
			sawController = true
		}
	}
	if !sawController {
		return nil, fmt.Errorf("the embedded controller.yaml has no Deployment %s/%s", Namespace, Deployment)
	}
	return append(out, caObjects(ca)...), nil
}
