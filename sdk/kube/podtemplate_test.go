package kube

import (
	"reflect"
	"strings"
	"testing"
)

func TestSetImage(t *testing.T) {
	objs, err := DecodeManifests([]byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  template:
    spec:
      containers:
      - {name: sidecar, image: a:1}
      - {name: web, image: b:1, args: [--port=80]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: shop}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := objs[0].DeepCopy()
	if err := SetImage(objs[0], "web", "mirror.example/b:2"); err != nil {
		t.Fatal(err)
	}
	cs := want.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	cs[1].(map[string]any)["image"] = "mirror.example/b:2"
	if !reflect.DeepEqual(objs[0].Object, want.Object) {
		t.Errorf("SetImage changed more than web's image:\n%v", objs[0].Object)
	}
	if err := SetImage(objs[0], "db", "x"); err == nil || !strings.Contains(err.Error(), `Deployment shop/web: no container named "db"`) {
		t.Errorf("a missing container = %v", err)
	}
	if err := SetImage(objs[1], "web", "x"); err == nil || !strings.Contains(err.Error(), "has no pod template") {
		t.Errorf("a ConfigMap = %v", err)
	}
}
