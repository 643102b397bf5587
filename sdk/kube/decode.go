package kube

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// DecodeManifests splits multi-document YAML ("---" separated, as release
// manifests are published) into objects, in document order. Empty
// documents (only comments or whitespace) are skipped. Every object needs
// apiVersion, kind and metadata.name; a document that is not a single
// object, has a duplicate key or lacks one of those is an error naming the
// document's 1-based index and its kind.
//
// The objects are exactly what the YAML says: nothing is defaulted.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kube: manifest document %d: %w", doc, err)
		}
		o, err := decodeDocument(raw)
		if err != nil {
			return nil, fmt.Errorf("kube: manifest document %d%s: %w", doc, kindHint(raw), err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
}

// decodeDocument returns nil for an empty document.
func decodeDocument(raw []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, err
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || bytes.Equal(js, []byte("null")) {
		return nil, nil
	}
	if js[0] != '{' {
		return nil, errors.New("is not an object (a mapping with apiVersion, kind and metadata)")
	}
	// utiljson keeps whole numbers int64, as client-go's unstructured
	// helpers expect (encoding/json would make them float64).
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		return nil, err
	}
	o := &unstructured.Unstructured{Object: m}
	var missing []string
	if v, ok := m["apiVersion"].(string); !ok || v == "" {
		missing = append(missing, "apiVersion")
	}
	if v, ok := m["kind"].(string); !ok || v == "" {
		missing = append(missing, "kind")
	}
	if _, ok := m["metadata"]; ok {
		if _, isMap := m["metadata"].(map[string]any); !isMap {
			return nil, errors.New("metadata must be a mapping")
		}
	}
	if o.GetName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return o, nil
}

// kindHint returns " (Kind name)" for a document whose kind can be read,
// so errors point at the object even when the rest does not parse.
func kindHint(raw []byte) string {
	var head map[string]any
	if err := yaml.Unmarshal(raw, &head); err != nil {
		return ""
	}
	kind, _ := head["kind"].(string)
	if kind == "" {
		return ""
	}
	md, _ := head["metadata"].(map[string]any)
	if name, _ := md["name"].(string); name != "" {
		return " (" + kind + " " + name + ")"
	}
	return " (" + kind + ")"
}
