package sdk

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

type testPool struct {
	Name    string `json:"name" doc:"Name of the pool."`
	Range   string `json:"range,omitempty"`
	Private bool   `json:"-"`
}

type testNested struct {
	Deep struct {
		Level int `json:"level" doc:"How deep."`
	} `json:"deep"`
	Port uint16 `json:"port"`
}

type testConfig struct {
	Replicas int                      `json:"replicas" doc:"How many replicas to run."`
	Image    string                   `json:"image"`
	Wait     time.Duration            `json:"wait" doc:"How long to wait for readiness."`
	Enabled  bool                     `json:"enabled"`
	Ratio    float64                  `json:"ratio"`
	Pools    []testPool               `json:"pools"`
	Labels   map[string]string        `json:"labels"`
	Nested   testNested               `json:"nested"`
	Net      netip.Prefix             `json:"net" doc:"Subnet to use."`
	Timeouts map[string]time.Duration `json:"timeouts"`
	Extra    any                      `json:"extra"`
	Skipped  string                   `json:"-"`
	NoTag    string
}

// Validate fails on too many replicas and warns about :latest images.
func (c *testConfig) Validate() []Diagnostic {
	var ds []Diagnostic
	if c.Replicas > 10 {
		ds = append(ds, Errorf("replicas", "must be at most 10, got %d", c.Replicas))
	}
	if c.Replicas < 0 {
		ds = append(ds, Diagnostic{Path: "replicas", Summary: "must not be negative"}) // no severity: an error
	}
	if strings.HasSuffix(c.Image, ":latest") {
		ds = append(ds, Diagnostic{Severity: SeverityWarning, Path: "image", Summary: "a :latest image is not reproducible"})
	}
	return ds
}

func testDefaults() *testConfig {
	c := &testConfig{
		Replicas: 2,
		Image:    "acme:1.0",
		Wait:     time.Minute,
		Ratio:    0.5,
		Pools:    []testPool{{Name: "default", Range: "172.30.1.1-172.30.1.7"}},
		Labels:   map[string]string{"team": "dns"},
		Net:      netip.MustParsePrefix("172.30.0.0/16"),
		Timeouts: map[string]time.Duration{"install": 2 * time.Minute},
	}
	c.Nested.Deep.Level = 1
	c.Nested.Port = 53
	return c
}

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		check func(t *testing.T, c *testConfig)
	}{
		{name: "no config gives the defaults", json: "", check: func(t *testing.T, c *testConfig) {
			if !reflect.DeepEqual(c, testDefaults()) {
				t.Errorf("got %+v, want the defaults %+v", c, testDefaults())
			}
		}},
		{name: "null gives the defaults", json: " null ", check: func(t *testing.T, c *testConfig) {
			if !reflect.DeepEqual(c, testDefaults()) {
				t.Errorf("got %+v, want the defaults", c)
			}
		}},
		{name: "empty object gives the defaults", json: "{}", check: func(t *testing.T, c *testConfig) {
			if !reflect.DeepEqual(c, testDefaults()) {
				t.Errorf("got %+v, want the defaults", c)
			}
		}},
		{name: "user values override, others keep defaults", json: `{"replicas":3,"enabled":true,"pools":[{"name":"a"}]}`, check: func(t *testing.T, c *testConfig) {
			want := testDefaults()
			want.Replicas, want.Enabled, want.Pools = 3, true, []testPool{{Name: "a"}}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("got %+v, want %+v", c, want)
			}
		}},
		{name: "zero values override defaults", json: `{"replicas":0,"image":"","ratio":0}`, check: func(t *testing.T, c *testConfig) {
			if c.Replicas != 0 || c.Image != "" || c.Ratio != 0 {
				t.Errorf("got replicas %d image %q ratio %v, want explicit zeros", c.Replicas, c.Image, c.Ratio)
			}
		}},
		{name: "nested struct merges with defaults", json: `{"nested":{"deep":{"level":7}}}`, check: func(t *testing.T, c *testConfig) {
			if c.Nested.Deep.Level != 7 || c.Nested.Port != 53 {
				t.Errorf("nested = %+v, want level 7 and the default port 53", c.Nested)
			}
		}},
		{name: "durations as strings", json: `{"wait":"1m30s","timeouts":{"install":"45s","wait":"2h"}}`, check: func(t *testing.T, c *testConfig) {
			if c.Wait != 90*time.Second {
				t.Errorf("wait = %v, want 1m30s", c.Wait)
			}
			if c.Timeouts["install"] != 45*time.Second || c.Timeouts["wait"] != 2*time.Hour {
				t.Errorf("timeouts = %v, want install 45s wait 2h", c.Timeouts)
			}
		}},
		{name: "text-encoded types such as netip.Prefix", json: `{"net":"10.0.0.0/8"}`, check: func(t *testing.T, c *testConfig) {
			if c.Net != netip.MustParsePrefix("10.0.0.0/8") {
				t.Errorf("net = %v, want 10.0.0.0/8", c.Net)
			}
		}},
		{name: "free-form field", json: `{"extra":{"anything":[1,"two"]}}`, check: func(t *testing.T, c *testConfig) {
			if _, ok := c.Extra.(map[string]any); !ok {
				t.Errorf("extra = %#v, want an object", c.Extra)
			}
		}},
		{name: "untagged field uses the Go name", json: `{"NoTag":"x"}`, check: func(t *testing.T, c *testConfig) {
			if c.NoTag != "x" {
				t.Errorf("NoTag = %q", c.NoTag)
			}
		}},
		{name: "warnings do not fail", json: `{"image":"acme:latest"}`, check: func(t *testing.T, c *testConfig) {
			if c.Image != "acme:latest" {
				t.Errorf("image = %q", c.Image)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defaults := testDefaults()
			var c testConfig
			if err := DecodeConfig([]byte(tt.json), defaults, &c); err != nil {
				t.Fatalf("DecodeConfig(%s): %v", tt.json, err)
			}
			tt.check(t, &c)
			if !reflect.DeepEqual(defaults, testDefaults()) {
				t.Errorf("DecodeConfig changed the defaults: %+v", defaults)
			}
		})
	}
}

func TestDecodeConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want map[string]string // path -> substring of the summary
	}{
		{name: "unknown nested field with suggestion", json: `{"pools":[{"name":"a"},{"nmae":"b"}]}`,
			want: map[string]string{"pools[1].nmae": `unknown field "nmae"; did you mean "name"?`}},
		{name: "unknown top-level field with suggestion", json: `{"replica":3}`,
			want: map[string]string{"replica": `did you mean "replicas"?`}},
		{name: "wrong case", json: `{"Replicas":3}`,
			want: map[string]string{"Replicas": `did you mean "replicas"? (names are case-sensitive)`}},
		{name: "unknown field, nothing close", json: `{"kubernetesVersion":"1.33"}`,
			want: map[string]string{"kubernetesVersion": `unknown field "kubernetesVersion"`}},
		{name: "ignored field is unknown", json: `{"Skipped":"x"}`,
			want: map[string]string{"Skipped": "unknown field"}},
		{name: "deep unknown field", json: `{"nested":{"deep":{"levle":1}}}`,
			want: map[string]string{"nested.deep.levle": `did you mean "level"?`}},
		{name: "string for int", json: `{"replicas":"three"}`,
			want: map[string]string{"replicas": `must be a whole number, got the string "three"`}},
		{name: "fraction for int", json: `{"nested":{"deep":{"level":1.5}}}`,
			want: map[string]string{"nested.deep.level": "must be a whole number, got 1.5"}},
		{name: "string for bool", json: `{"enabled":"yes"}`,
			want: map[string]string{"enabled": "must be true or false"}},
		{name: "number for string in a list", json: `{"pools":[{"name":5}]}`,
			want: map[string]string{"pools[0].name": "must be a string, got 5"}},
		{name: "object for list", json: `{"pools":{"name":"a"}}`,
			want: map[string]string{"pools": "must be a list, got an object"}},
		{name: "list for object", json: `{"nested":[1]}`,
			want: map[string]string{"nested": "must be an object, got a list"}},
		{name: "bool for map value", json: `{"labels":{"team":true}}`,
			want: map[string]string{"labels.team": "must be a string, got true"}},
		{name: "unparsable duration", json: `{"wait":"soon"}`,
			want: map[string]string{"wait": `must be a duration such as 30s or 5m, got "soon"`}},
		{name: "number for duration", json: `{"wait":30}`,
			want: map[string]string{"wait": "must be a duration such as 30s or 5m, got 30"}},
		{name: "duration in a map", json: `{"timeouts":{"install":"5 minutes"}}`,
			want: map[string]string{"timeouts.install": "must be a duration"}},
		{name: "bad prefix", json: `{"net":"10.0.0.0/99"}`,
			want: map[string]string{"net": `invalid value "10.0.0.0/99"`}},
		{name: "number for prefix", json: `{"net":8}`,
			want: map[string]string{"net": "must be a string, got 8"}},
		{name: "overflow", json: `{"nested":{"port":70000}}`,
			want: map[string]string{"nested.port": "must be a whole number"}},
		{name: "not an object", json: `[1,2]`,
			want: map[string]string{"": "must be an object, got a list"}},
		{name: "invalid JSON", json: `{"replicas":`,
			want: map[string]string{"": "config is not valid JSON"}},
		{name: "every problem reported", json: `{"replicas":"x","enabled":1,"pools":[{"nmae":"a"}]}`,
			want: map[string]string{"replicas": "whole number", "enabled": "true or false", "pools[0].nmae": `did you mean "name"`}},
		{name: "Validate error", json: `{"replicas":11}`,
			want: map[string]string{"replicas": "must be at most 10, got 11"}},
		{name: "Validate error without severity is an error; warnings are dropped", json: `{"replicas":-1,"image":"x:latest"}`,
			want: map[string]string{"replicas": "must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c testConfig
			err := DecodeConfig([]byte(tt.json), testDefaults(), &c)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("DecodeConfig(%s) = %v, want a *ConfigError", tt.json, err)
			}
			got := map[string]string{}
			for _, d := range ce.Diagnostics {
				if d.Severity != SeverityError {
					t.Errorf("diagnostic %+v has severity %q, want error", d, d.Severity)
				}
				got[d.Path] = d.Summary
			}
			if len(got) != len(tt.want) {
				t.Errorf("diagnostics = %+v, want paths %v", ce.Diagnostics, tt.want)
			}
			for path, sub := range tt.want {
				if !strings.Contains(got[path], sub) {
					t.Errorf("diagnostic at %q = %q, want it to contain %q (all: %+v)", path, got[path], sub, ce.Diagnostics)
				}
				if path != "" && !strings.Contains(err.Error(), path+": ") {
					t.Errorf("Error() = %q does not name the path %q", err, path)
				}
			}
			if !strings.HasPrefix(err.Error(), "invalid plugin config: ") {
				t.Errorf("Error() = %q", err)
			}
		})
	}
}

func TestDecodeConfigNeedsPointer(t *testing.T) {
	for _, dst := range []any{testConfig{}, (*testConfig)(nil), nil} {
		if err := DecodeConfig([]byte(`{}`), nil, dst); err == nil || !strings.Contains(err.Error(), "non-nil pointer") {
			t.Errorf("DecodeConfig into %T = %v, want a non-nil pointer error", dst, err)
		}
	}
}

func TestDecodeConfigWithoutDefaults(t *testing.T) {
	var c testConfig
	if err := DecodeConfig([]byte(`{"replicas":4}`), nil, &c); err != nil {
		t.Fatal(err)
	}
	if c.Replicas != 4 || c.Image != "" {
		t.Errorf("got %+v, want replicas 4 and zero values elsewhere", c)
	}
}

// The defaults a plugin publishes (Describe) must be valid user config that
// decodes back to the same value, durations included.
func TestConfigDefaultsRoundTrip(t *testing.T) {
	d, err := Describe(infoPlugin{Info{Name: "acme", Version: "1.0.0", Config: testDefaults()}})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(d.ConfigDefaults, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["wait"] != "1m0s" || raw["net"] != "172.30.0.0/16" {
		t.Errorf("defaults wait=%v net=%v, want \"1m0s\" and \"172.30.0.0/16\" as users write them", raw["wait"], raw["net"])
	}
	if tm, _ := raw["timeouts"].(map[string]any); tm["install"] != "2m0s" {
		t.Errorf("defaults timeouts = %v, want install \"2m0s\"", raw["timeouts"])
	}
	var c testConfig
	if err := DecodeConfig(d.ConfigDefaults, nil, &c); err != nil {
		t.Fatalf("the published defaults do not validate: %v", err)
	}
	if !reflect.DeepEqual(&c, testDefaults()) {
		t.Errorf("defaults decode to %+v, want %+v", c, testDefaults())
	}
}

func TestConfigSchema(t *testing.T) {
	b, err := ConfigSchema(testDefaults())
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schema is not JSON: %v\n%s", err, b)
	}
	get := func(path ...string) map[string]any {
		t.Helper()
		cur := s
		for _, p := range path {
			next, ok := cur[p].(map[string]any)
			if !ok {
				t.Fatalf("schema has no object at %v:\n%s", path, b)
			}
			cur = next
		}
		return cur
	}
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["type"] != "object" || s["additionalProperties"] != false {
		t.Errorf("root = %v %v %v", s["$schema"], s["type"], s["additionalProperties"])
	}
	props := get("properties")
	want := []string{"NoTag", "enabled", "extra", "image", "labels", "nested", "net", "pools", "ratio", "replicas", "timeouts", "wait"}
	if !reflect.DeepEqual(sortedKeys(props), want) {
		t.Errorf("properties = %v, want %v", sortedKeys(props), want)
	}
	leaf := []struct {
		path []string
		want map[string]any
	}{
		{[]string{"properties", "replicas"}, map[string]any{"type": "integer", "default": float64(2), "description": "How many replicas to run."}},
		{[]string{"properties", "image"}, map[string]any{"type": "string", "default": "acme:1.0"}},
		{[]string{"properties", "wait"}, map[string]any{"type": "string", "format": "duration", "default": "1m0s", "description": "How long to wait for readiness."}},
		{[]string{"properties", "enabled"}, map[string]any{"type": "boolean", "default": false}},
		{[]string{"properties", "ratio"}, map[string]any{"type": "number", "default": 0.5}},
		{[]string{"properties", "net"}, map[string]any{"type": "string", "default": "172.30.0.0/16", "description": "Subnet to use."}},
		{[]string{"properties", "labels", "additionalProperties"}, map[string]any{"type": "string"}},
		{[]string{"properties", "timeouts", "additionalProperties"}, map[string]any{"type": "string", "format": "duration"}},
		{[]string{"properties", "pools", "items", "properties", "name"}, map[string]any{"type": "string", "description": "Name of the pool."}},
		{[]string{"properties", "nested", "properties", "port"}, map[string]any{"type": "integer", "default": float64(53)}},
		{[]string{"properties", "nested", "properties", "deep", "properties", "level"}, map[string]any{"type": "integer", "default": float64(1), "description": "How deep."}},
		{[]string{"properties", "extra"}, map[string]any{}},
	}
	for _, l := range leaf {
		if got := get(l.path...); !reflect.DeepEqual(got, l.want) {
			t.Errorf("%v = %v, want %v", l.path, got, l.want)
		}
	}
	for _, obj := range [][]string{{"properties", "nested"}, {"properties", "nested", "properties", "deep"}, {"properties", "pools", "items"}} {
		o := get(obj...)
		if o["type"] != "object" || o["additionalProperties"] != false {
			t.Errorf("%v: type %v additionalProperties %v, want a closed object", obj, o["type"], o["additionalProperties"])
		}
	}
	if pools := get("properties", "pools"); pools["type"] != "array" {
		t.Errorf("pools type = %v, want array", pools["type"])
	}
	if _, ok := get("properties", "pools", "items", "properties")["Private"]; ok {
		t.Errorf(`a json:"-" field is in the schema`)
	}
	if _, ok := get("properties", "labels")["default"]; !ok {
		t.Errorf("labels has no default")
	}
}

// A small struct checked against its complete schema, so a change in the
// output format is seen in full.
func TestConfigSchemaGolden(t *testing.T) {
	type small struct {
		Name  string        `json:"name" doc:"Who."`
		Count int           `json:"count,omitempty"`
		Tags  []string      `json:"tags"`
		Wait  time.Duration `json:"wait"`
	}
	b, err := ConfigSchema(&small{Name: "x", Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const golden = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "properties": {
    "count": {
      "default": 0,
      "type": "integer"
    },
    "name": {
      "default": "x",
      "description": "Who.",
      "type": "string"
    },
    "tags": {
      "items": {
        "type": "string"
      },
      "type": "array"
    },
    "wait": {
      "default": "5s",
      "format": "duration",
      "type": "string"
    }
  },
  "type": "object"
}`
	if string(b) != golden {
		t.Errorf("schema:\n%s\nwant:\n%s", b, golden)
	}
}

func TestConfigSchemaNil(t *testing.T) {
	b, err := ConfigSchema(nil)
	if b != nil || err != nil {
		t.Errorf("ConfigSchema(nil) = %q, %v; want nil, nil", b, err)
	}
}

func TestSuggestField(t *testing.T) {
	fields := jsonFields(reflect.TypeOf(testConfig{}))
	tests := map[string]string{
		"nmae":      "", // too far from every field of testConfig ("name" is in pools)
		"imgae":     `"image"`,
		"IMAGE":     `"image"`,
		"replicass": `"replicas"`,
		"x":         "",
	}
	for in, want := range tests {
		got := suggestField(in, fields)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("suggestField(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckConfigNoValue(t *testing.T) {
	for _, in := range []string{"", "  ", "null"} {
		if ds := CheckConfig([]byte(in), reflect.TypeOf(testConfig{})); ds != nil {
			t.Errorf("CheckConfig(%q) = %v, want nothing", in, ds)
		}
	}
}
