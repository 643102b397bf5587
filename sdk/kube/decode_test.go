package kube_test

import (
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk/kube"
)

func TestDecodeManifests(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // Describe of each object
		wantErr []string // substrings of the error
	}{
		{
			name: "documents with empty ones and comments between",
			in: `# leading comment
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: demo
data:
  replicas: "2"
`,
			want: []string{"Namespace demo", "ConfigMap demo/settings"},
		},
		{name: "empty input", in: "", want: nil},
		{name: "only separators", in: "---\n---\n", want: nil},
		{
			name:    "missing kind names the document",
			in:      "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
			wantErr: []string{"document 2", "missing kind"},
		},
		{
			name:    "missing name names the kind",
			in:      "apiVersion: v1\nkind: Secret\nmetadata:\n  namespace: x\n",
			wantErr: []string{"document 1 (Secret)", "metadata.name"},
		},
		{
			name:    "duplicate key",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
			wantErr: []string{"document 1 (ConfigMap", `key "name" already set`},
		},
		{
			name:    "a list is not an object",
			in:      "- apiVersion: v1\n  kind: ConfigMap\n",
			wantErr: []string{"document 1", "not an object"},
		},
		{
			name:    "metadata that is not a mapping",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: cm\n",
			wantErr: []string{"document 1 (ConfigMap)", "metadata must be a mapping"},
		},
		{
			name:    "invalid YAML",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n",
			wantErr: []string{"document 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := kube.DecodeManifests([]byte(tt.in))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; decoded %d objects", len(objs))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, kube.Describe(o))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("objects = %q, want %q", got, tt.want)
			}
		})
	}
}

// Whole numbers decode as int64, as client-go's unstructured helpers
// (NestedInt64, DeepCopy) expect.
func TestDecodeManifestsKeepsIntegers(t *testing.T) {
	objs, err := kube.DecodeManifests([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: n}\nspec:\n  replicas: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := objs[0].Object["spec"].(map[string]any)["replicas"].(int64); !ok || got != 3 {
		t.Errorf("spec.replicas = %#v, want int64(3)", objs[0].Object["spec"].(map[string]any)["replicas"])
	}
	_ = objs[0].DeepCopy()
}

// FuzzDecodeManifests: any input either fails or yields objects that
// carry what Apply needs.
func FuzzDecodeManifests(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"))
	f.Add([]byte("---\n# c\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: c}\ndata: {k: v}\n"))
	f.Add([]byte("- 1\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := kube.DecodeManifests(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
				t.Fatalf("decoded an incomplete object: %v", o.Object)
			}
			_ = o.DeepCopy()
		}
	})
}
