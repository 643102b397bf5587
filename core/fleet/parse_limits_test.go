package fleet

import (
	"strings"
	"testing"
)

// TestParseRefusesOversizedManifest: Parse itself refuses more than
// MaxManifestSize bytes instead of building a node per item.
func TestParseRefusesOversizedManifest(t *testing.T) {
	data := []byte(head + "spec:\n  clusters: [a]\n# " + strings.Repeat("x", MaxManifestSize) + "\n")
	_, err := Parse(data, "big.yaml")
	checkProblems(t, err, []want{{"(document)", 1, 1, "more than 1 MiB; is it the right file?"}})
}

// TestProblemsDoNotEchoLongValues: keys and values of any size are quoted by
// their start and length, never whole, in parse and validate problems alike.
func TestProblemsDoNotEchoLongValues(t *testing.T) {
	long := strings.Repeat("y", 100000)
	cases := []struct {
		name, yaml string
		validate   bool
	}{
		{"unknown key", head + "spec:\n  clusters: [a]\n  ? " + long + "\n  : 1\n", false},
		{"apiVersion", "apiVersion: " + long + "\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters: [a]\n", false},
		{"kind", "apiVersion: marina.dev/v1alpha1\nkind: " + long + "\nmetadata: {name: f}\nspec:\n  clusters: [a]\n", false},
		{"cluster name", head + "spec:\n  clusters: [" + long + "]\n", true},
		{"dependsOn", head + "spec:\n  clusters:\n    - name: a\n      dependsOn: [" + long + "]\n", true},
		{"label key and value", head + "spec:\n  clusters:\n    - name: a\n      labels:\n        ? " + long + "\n        : v\n        ok: " + long + "\n", true},
		{"plugin", head + "spec:\n  clusters:\n    - name: a\n      plugins:\n        ? " + long + "\n        : {enabled: true}\n", true},
		{"mirror", head + "spec:\n  clusters:\n    - name: a\n      registries: [" + long + "]\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml), "fleet.yaml")
			if tc.validate {
				if err != nil {
					t.Fatalf("parse: %.500v", err)
				}
				err = Validate(f, testCtx)
			}
			if err == nil {
				t.Fatal("no problem reported")
			}
			msg := err.Error()
			if len(msg) > 2000 || strings.Contains(msg, strings.Repeat("y", 300)) {
				t.Fatalf("the error echoes the value (%d bytes): %.400s", len(msg), msg)
			}
			if !strings.Contains(msg, "(100000 bytes)") {
				t.Fatalf("the error does not say the value was cut: %s", msg)
			}
		})
	}
}
