package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SetImage sets the image of the container named container in o's pod
// template (spec.template.spec: a Deployment, DaemonSet, StatefulSet,
// ReplicaSet or Job), in place, and changes nothing else — what a plugin
// does to point an upstream manifest at the image the user configured (a
// mirror, another tag). An object without a pod template, or without that
// container, is an error that names it.
func SetImage(o *unstructured.Unstructured, container, image string) error {
	spec, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "template", "spec")
	podSpec, isMap := spec.(map[string]any)
	if !ok || !isMap {
		return fmt.Errorf("%s has no pod template (spec.template.spec)", Describe(o))
	}
	containers, _ := podSpec["containers"].([]any)
	for _, c := range containers {
		if c, ok := c.(map[string]any); ok && c["name"] == container {
			c["image"] = image
			return nil
		}
	}
	return fmt.Errorf("%s: no container named %q", Describe(o), container)
}
