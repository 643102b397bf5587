package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// manifestPath is the CNI manifest that deploys nodenet (kind's
// /kind/manifests/default-cni.yaml in marina's test node image).
const manifestPath = "../../../manifests/default-cni.yaml"

// TestManifest checks that the manifest decodes strictly into the expected
// objects and matches what the agent needs.
func TestManifest(t *testing.T) {
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if !strings.Contains(text, "would you kindly patch this file") {
		t.Error("missing kind's patch marker")
	}
	if strings.Contains(text, "would you kindly template this file") {
		t.Error("unexpected template marker: the manifest is not a Go template")
	}

	var kinds []string
	var ds *appsv1.DaemonSet
	var role *rbacv1.ClusterRole
	for doc := range strings.SplitSeq(text, "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, meta.Kind)
		var obj any
		switch meta.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			obj = role
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			obj = ds
		default:
			t.Fatalf("unexpected document kind %q", meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if got := strings.Join(kinds, ","); got != "ServiceAccount,ClusterRole,ClusterRoleBinding,DaemonSet" {
		t.Fatalf("kinds = %s", got)
	}

	if len(role.Rules) != 1 || !slices.Contains(role.Rules[0].Resources, "nodes") ||
		!slices.Contains(role.Rules[0].Verbs, "list") {
		t.Errorf("ClusterRole does not allow listing nodes: %+v", role.Rules)
	}

	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.ServiceAccountName != "nodenet" || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("pod spec: hostNetwork=%v serviceAccount=%q priorityClass=%q",
			spec.HostNetwork, spec.ServiceAccountName, spec.PriorityClassName)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations = %+v, want [{operator: Exists}]", spec.Tolerations)
	}
	// kind patches /spec/template/spec/containers/0/env/-: the first
	// container must be nodenet and already have an env list.
	c := spec.Containers[0]
	if c.Name != "nodenet" || c.Image != "marina-test/nodenet:v1" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("container = %s %s %s", c.Name, c.Image, c.ImagePullPolicy)
	}
	if len(c.Env) == 0 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env = %+v, want NODE_NAME from spec.nodeName", c.Env)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_RAW", "NET_ADMIN"}) {
		t.Errorf("securityContext = %+v", sc)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/cni/net.d" {
		t.Errorf("volumeMounts = %+v", c.VolumeMounts)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].HostPath == nil || spec.Volumes[0].HostPath.Path != "/etc/cni/net.d" ||
		spec.Volumes[0].HostPath.Type == nil || *spec.Volumes[0].HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("volumes = %+v", spec.Volumes)
	}
}
