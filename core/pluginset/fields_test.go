package pluginset

import (
	"reflect"
	"testing"
	"time"

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
// has no default; plugin text is kept as sent (the renderer cleans it).
func TestConfigFields(t *testing.T) {
	schema, err := sdk.ConfigSchema(&fieldsConfig{Mode: "safe", Sources: []string{"service"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fields, err := ConfigFields(schema)
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigField{
		{Path: "labels", Type: "map of string", Rules: []string{"keys ≤ 2"}},
		{Path: "mode", Type: "string", Default: `"safe"`, Rules: []string{"one of fast, safe"}},
		{Path: "namespace", Type: "string", Rules: []string{"required", "length ≤ 20"}, Description: "Namespace to create."},
		{Path: "note", Type: "string", Default: `""`, Description: "A \x1b]0;title\x07note."},
		{Path: "pools", Type: "list of object"},
		{Path: "pools[].name", Type: "string", Rules: []string{"pattern ^[a-z]+$"}},
		{Path: "sources", Type: "list of string", Default: `["service"]`, Rules: []string{"items ≥ 1", "each one of service, ingress"}},
		{Path: "timeout", Type: "duration", Default: `"1m0s"`, Rules: []string{"≥ 1s"}},
		{Path: "upstream.host", Type: "string", Rules: []string{"required"}, Description: "Upstream host."},
		{Path: "upstream.port", Type: "integer", Default: "0", Rules: []string{"1..65535"}},
	}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields:\n%#v\nwant:\n%#v", fields, want)
	}
	if fs, err := ConfigFields([]byte("{not json")); err == nil || fs != nil {
		t.Errorf("a broken schema: %v, %v", fs, err)
	}
	if fs, err := ConfigFields([]byte(" \n")); err != nil || fs != nil {
		t.Errorf("no schema: %v, %v", fs, err)
	}
}

// TestSchemaType: the type names a reader sees for the schema types.
func TestSchemaType(t *testing.T) {
	for _, tc := range []struct {
		schema map[string]any
		want   string
	}{
		{map[string]any{}, "any"},
		{map[string]any{"type": "string", "format": "duration"}, "duration"},
		{map[string]any{"type": "array"}, "list"},
		{map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}, "list of integer"},
		{map[string]any{"type": "object"}, "object"},
		{map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "boolean"}}, "map of boolean"},
		{map[string]any{"type": "number"}, "number"},
	} {
		if got := schemaType(tc.schema); got != tc.want {
			t.Errorf("schemaType(%v) = %q, want %q", tc.schema, got, tc.want)
		}
	}
}
