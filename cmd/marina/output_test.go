package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPrintStructuredYAML: YAML has the JSON keys in the JSON order, block
// style, and strings that would read as other types stay quoted.
func TestPrintStructuredYAML(t *testing.T) {
	type item struct {
		Name    string   `json:"name"`
		Enabled bool     `json:"enabled"`
		Version string   `json:"version"`
		Hooks   []string `json:"hooks"`
		Note    string   `json:"note,omitempty"`
	}
	var b bytes.Buffer
	err := PrintStructured(&b, "yaml", []item{{Name: "true", Enabled: true, Version: "1.0", Hooks: []string{"PostUp"}, Note: "two\nlines"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `- name: "true"
  enabled: true
  version: "1.0"
  hooks:
    - PostUp
  note: |-
    two
    lines
`
	if b.String() != want {
		t.Fatalf("yaml:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPrintStructuredYAMLReadsBack: -o yaml reads back as -o json for
// strings that span lines and begin with a blank or a line break (a
// plugin's message, a note); "\t\nx" is written as a block yaml.v3 cannot
// parse without GuardYAML.
func TestPrintStructuredYAMLReadsBack(t *testing.T) {
	type item struct {
		Name string   `json:"name"`
		Note string   `json:"note"`
		List []string `json:"list"`
	}
	for _, s := range []string{"\n#0", " indented\nline", "\t\nx", "\n\nb", "plain", "two\nlines"} {
		items := map[string]any{"top": []item{{Name: "a", Note: s, List: []string{s}}}}
		var y, j bytes.Buffer
		if err := PrintStructured(&y, "yaml", items); err != nil {
			t.Fatal(err)
		}
		if err := PrintStructured(&j, "json", items); err != nil {
			t.Fatal(err)
		}
		var fromYAML, fromJSON any
		if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
			t.Fatalf("%q: -o yaml does not parse: %v\n%s", s, err, y.String())
		}
		if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromYAML, fromJSON) {
			t.Errorf("%q: -o yaml reads back %#v, -o json %#v\n%s", s, fromYAML, fromJSON, y.String())
		}
	}
}
