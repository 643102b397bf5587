package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/pluginset"
)

// TestPrintConfigFields: `plugin info` shows one line per config field
// (pluginset.ConfigFields) with its type, rules and default, a long default
// cut, the description indented below; plugin text is cleaned.
func TestPrintConfigFields(t *testing.T) {
	long := `"` + strings.Repeat("é", 40) + `"`
	fields := []pluginset.ConfigField{
		{Path: "labels", Type: "map of string", Rules: []string{"keys ≤ 2"}},
		{Path: "namespace", Type: "string", Rules: []string{"required", "length ≤ 20"}, Description: "Namespace to create."},
		{Path: "note", Type: "string", Default: `""`, Description: "A \x1b]0;title\x07note."},
		{Path: "sources", Type: "list of string", Default: `["service"]`, Rules: []string{"items ≥ 1", "each one of service, ingress"}},
		{Path: "word", Type: "string", Default: long},
	}
	var b bytes.Buffer
	printConfigFields(&b, fields)
	want := `  labels (map of string; keys ≤ 2)
  namespace (string; required; length ≤ 20)
      Namespace to create.
  note (string; default "")
      A note.
  sources (list of string; items ≥ 1; each one of service, ingress; default ["service"])
  word (string; default "` + strings.Repeat("é", 29) + `...)
`
	if b.String() != want {
		t.Errorf("fields:\n%s\nwant:\n%s", b.String(), want)
	}
}
