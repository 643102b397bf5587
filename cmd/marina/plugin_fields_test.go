package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/termsafe"
	"github.com/bcollard/marina/sdk"
)

type fieldsUpstream struct {
	Host string `json:"host" marina:"required" doc:"Upstream host."`
	Port int    `json:"port" marina:"min=1,max=65535"`
}

type fieldsPool struct {
	Name string `json:"name" marina:"pattern=^[a-z]+$"`
}

type fieldsConfig struct {
	Namespace string            `json:"namespace" marina:"required,max=20" doc:"Namespace to create."`
	Mode      string            `json:"mode" marina:"enum=fast|safe"`
	Sources   []string          `json:"sources" marina:"min=1,enum=service|ingress"`
	Labels    map[string]string `json:"labels" marina:"max=2"`
	Timeout   time.Duration     `json:"timeout" marina:"min=1s"`
	Upstream  fieldsUpstream    `json:"upstream"`
	Pools     []fieldsPool      `json:"pools"`
	Note      string            `json:"note" doc:"A \x1b]0;title\x07note."`
}

// TestConfigFields: `plugin info` lists a plugin's config fields from the
// schema the SDK derives (sdk.ConfigSchema), with their rules: required,
// enums, bounds, patterns, list items, nested fields; a required field
// shows no default; plugin text is cleaned.
func TestConfigFields(t *testing.T) {
	schema, err := sdk.ConfigSchema(&fieldsConfig{Mode: "safe", Sources: []string{"service"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fields, err := configFields(schema)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printConfigFields(&b, fields)
	want := `  labels (map of string; keys ≤ 2)
  mode (string; one of fast, safe; default "safe")
  namespace (string; required; length ≤ 20)
      Namespace to create.
  note (string; default "")
      A note.
  pools (list of object)
  pools[].name (string; pattern ^[a-z]+$)
  sources (list of string; items ≥ 1; each one of service, ingress; default ["service"])
  timeout (duration; ≥ 1s; default "1m0s")
  upstream.host (string; required)
      Upstream host.
  upstream.port (integer; 1..65535; default 0)
`
	if b.String() != want {
		t.Errorf("fields:\n%s\nwant:\n%s", b.String(), want)
	}
	if fs, err := configFields([]byte("{not json")); err == nil || fs != nil {
		t.Errorf("a broken schema: %v, %v", fs, err)
	}
	if !strings.Contains(termsafe.Excerpt(strings.Repeat("é", 100), 61), "...") {
		t.Error("excerptLine does not cut")
	}
}
