package cli

import (
	"bytes"
	"testing"
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
