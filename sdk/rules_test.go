package sdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type rulesNested struct {
	Host string `json:"host" marina:"required"`
	Port int    `json:"port" marina:"min=1,max=65535"`
}

type rulesConfig struct {
	Namespace string            `json:"namespace" marina:"required,min=2,max=20,pattern=^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" doc:"Namespace to create."`
	Mode      string            `json:"mode" marina:"enum=fast|safe|paranoid"`
	Replicas  int               `json:"replicas" marina:"min=1,max=5"`
	Ratio     float64           `json:"ratio" marina:"min=0.5,max=1.5"`
	Level     int               `json:"level" marina:"enum=1|2|3"`
	Sources   []string          `json:"sources" marina:"min=1,max=2,enum=service|ingress"`
	Labels    map[string]string `json:"labels" marina:"max=2"`
	Timeout   time.Duration     `json:"timeout" marina:"min=1s,max=10m"`
	Upstream  *rulesNested      `json:"upstream"`
	Free      string            `json:"free"`
}

func rulesDefaults() rulesConfig {
	return rulesConfig{Mode: "safe", Replicas: 1, Ratio: 1, Level: 1, Sources: []string{"service"}, Timeout: time.Minute}
}

// diagLines renders diagnostics as "path: summary" lines.
func diagLines(ds []Diagnostic) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Path + ": " + d.Summary
	}
	return out
}

func TestFieldRulesEnforced(t *testing.T) {
	typ := reflect.TypeFor[rulesConfig]()
	for _, tc := range []struct {
		name   string
		config string
		want   []string // substrings, one per diagnostic, in order
	}{
		{name: "valid", config: `{"namespace":"team-a","mode":"fast","replicas":5,"ratio":0.5,"level":3,"sources":["service","ingress"],"labels":{"a":"b"},"timeout":"10m","upstream":{"host":"h","port":53}}`},
		{name: "only the required field", config: `{"namespace":"ab"}`},
		{name: "no config section", config: ``, want: []string{"namespace: is required (Namespace to create.)"}},
		{name: "null config", config: `null`, want: []string{"namespace: is required"}},
		{name: "null value", config: `{"namespace":null}`, want: []string{"namespace: is required"}},
		{name: "enum near miss", config: `{"namespace":"ab","mode":"fsat"}`, want: []string{`mode: must be one of fast, safe, paranoid, got "fsat"; did you mean "fast"?`}},
		{name: "enum case", config: `{"namespace":"ab","mode":"Safe"}`, want: []string{`mode: must be one of fast, safe, paranoid, got "Safe"; did you mean "safe"? (values are case-sensitive)`}},
		{name: "enum far", config: `{"namespace":"ab","mode":"turbo"}`, want: []string{`mode: must be one of fast, safe, paranoid, got "turbo"`}},
		{name: "numbers", config: `{"namespace":"ab","replicas":0,"ratio":2,"level":4}`, want: []string{
			"level: must be one of 1, 2, 3, got \"4\"",
			"ratio: must be at most 1.5, got 2",
			"replicas: must be at least 1, got 0",
		}},
		{name: "number enum by value", config: `{"namespace":"ab","level":2.0}`, want: []string{"level: must be a whole number"}},
		{name: "string length and pattern", config: `{"namespace":"A"}`, want: []string{
			"namespace: must be at least 2 characters long",
			"namespace: must match the pattern ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$, got \"A\"",
		}},
		{name: "string too long", config: `{"namespace":"abcdefghijklmnopqrstuvwxyz"}`, want: []string{"namespace: must be at most 20 characters long, got 26"}},
		{name: "list count and items", config: `{"namespace":"ab","sources":["service","ingres","crd"]}`, want: []string{
			"sources: must have at most 2 items, got 3",
			`sources[1]: must be one of service, ingress, got "ingres"; did you mean "ingress"?`,
			`sources[2]: must be one of service, ingress, got "crd"`,
		}},
		{name: "empty list", config: `{"namespace":"ab","sources":[]}`, want: []string{"sources: must have at least 1 item, got 0"}},
		{name: "map count", config: `{"namespace":"ab","labels":{"a":"1","b":"2","c":"3"}}`, want: []string{"labels: must have at most 2 keys, got 3"}},
		{name: "durations", config: `{"namespace":"ab","timeout":"500ms"}`, want: []string{"timeout: must be at least 1s, got 500ms"}},
		{name: "duration max", config: `{"namespace":"ab","timeout":"1h"}`, want: []string{"timeout: must be at most 10m0s, got 1h"}},
		{name: "nested required only where written", config: `{"namespace":"ab","upstream":{"port":70000}}`, want: []string{
			"upstream.port: must be at most 65535, got 70000",
			"upstream.host: is required",
		}},
		{name: "type errors first, no rule noise", config: `{"namespace":"ab","replicas":"three"}`, want: []string{"replicas: must be a whole number, got the string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := diagLines(CheckConfig([]byte(tc.config), typ))
			if len(got) != len(tc.want) {
				t.Fatalf("diagnostics = %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("diagnostic %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestFieldRulesDecode: DecodeConfig (what a hook's req.Config runs)
// enforces the rules before it fills the struct, and the defaults still
// apply to what the user did not write.
func TestFieldRulesDecode(t *testing.T) {
	var c rulesConfig
	err := DecodeConfig([]byte(`{"mode":"fast"}`), rulesDefaults(), &c)
	if err == nil || !strings.Contains(err.Error(), "namespace: is required") {
		t.Fatalf("DecodeConfig without the required field = %v", err)
	}
	c = rulesConfig{}
	if err := DecodeConfig([]byte(`{"namespace":"team-a","timeout":"2m"}`), rulesDefaults(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "team-a" || c.Mode != "safe" || c.Timeout != 2*time.Minute || c.Replicas != 1 {
		t.Errorf("decoded %+v", c)
	}
}

func TestFieldRulesSchema(t *testing.T) {
	b, err := ConfigSchema(rulesDefaults())
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Required, ",") != "namespace" {
		t.Errorf("required = %q", s.Required)
	}
	p := s.Properties
	check := func(field, key string, want any) {
		t.Helper()
		got, _ := json.Marshal(p[field][key])
		w, _ := json.Marshal(want)
		if string(got) != string(w) {
			t.Errorf("%s.%s = %s, want %s", field, key, got, w)
		}
	}
	check("namespace", "minLength", 2)
	check("namespace", "maxLength", 20)
	check("namespace", "pattern", "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
	if _, ok := p["namespace"]["default"]; ok {
		t.Errorf("a required field shows a default: %v", p["namespace"])
	}
	check("mode", "enum", []string{"fast", "safe", "paranoid"})
	check("mode", "default", "safe")
	check("level", "enum", []int{1, 2, 3})
	check("replicas", "minimum", 1)
	check("replicas", "maximum", 5)
	check("ratio", "minimum", 0.5)
	check("sources", "minItems", 1)
	check("sources", "items", map[string]any{"type": "string", "enum": []string{"service", "ingress"}})
	check("labels", "maxProperties", 2)
	check("timeout", "x-minDuration", "1s")
	check("timeout", "x-maxDuration", "10m0s")
	check("free", "type", "string")
	if len(p["free"]) != 2 { // type and default only
		t.Errorf("a field without rules = %v", p["free"])
	}
	up, _ := json.Marshal(p["upstream"]["required"])
	if string(up) != `["host"]` {
		t.Errorf("nested required = %s", up)
	}
}

// TestFieldRulesMalformed: a malformed tag is the author's bug, reported
// by Describe (so Serve and plugintest fail at once) and, if a config is
// checked anyway, as an error naming the field.
func TestFieldRulesMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  any
		want string
	}{
		{"unknown option", &struct {
			A string `json:"a" marina:"requried"`
		}{}, `field A (json "a"): tag marina:"requried": unknown option "requried"; the options are required, enum=A|B, min=N, max=N, pattern=RE (last)`},
		{"min not a number", &struct {
			N int `json:"n" marina:"min=one"`
		}{}, "min=one is not a number"},
		{"min above max", &struct {
			N int `json:"n" marina:"min=5,max=1"`
		}{}, "min is above max"},
		{"duration bound", &struct {
			D time.Duration `json:"d" marina:"max=10"`
		}{}, "max=10 is not a duration such as 30s"},
		{"bad pattern", &struct {
			S string `json:"s" marina:"pattern=([a-z"`
		}{}, "pattern: error parsing regexp"},
		{"pattern on a number", &struct {
			N int `json:"n" marina:"pattern=^1$"`
		}{}, "pattern= applies to strings"},
		{"enum on a bool", &struct {
			B bool `json:"b" marina:"enum=true"`
		}{}, "enum= applies to strings and numbers"},
		{"enum not numbers", &struct {
			N int `json:"n" marina:"enum=1|two"`
		}{}, `enum value "two" is not a number`},
		{"nested", &struct {
			In []struct {
				S string `json:"s" marina:"max=-1"`
			} `json:"in"`
		}{}, "max=-1 is not a count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigSchema(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ConfigSchema error = %v, want it to contain %q", err, tc.want)
			}
			if _, err := Describe(infoPlugin{info: Info{Name: "acme", Version: "1.0.0", Config: tc.cfg}}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Describe error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	ds := CheckConfig([]byte(`{"a":"x"}`), reflect.TypeFor[struct {
		A string `json:"a" marina:"requried"`
	}]())
	if len(ds) != 1 || !strings.Contains(ds[0].Summary, "config schema is invalid, a bug in the plugin") {
		t.Errorf("CheckConfig with a malformed tag = %q", diagLines(ds))
	}
}

// TestFieldRulesPatternTakesTheRest: pattern= keeps its commas.
func TestFieldRulesPatternTakesTheRest(t *testing.T) {
	typ := reflect.TypeFor[struct {
		S string `json:"s" marina:"required,pattern=^a{1,2}$"`
	}]()
	if ds := CheckConfig([]byte(`{"s":"aa"}`), typ); len(ds) != 0 {
		t.Errorf("aa: %q", diagLines(ds))
	}
	if ds := CheckConfig([]byte(`{"s":"aaa"}`), typ); len(ds) != 1 {
		t.Errorf("aaa: %q", diagLines(ds))
	}
}

type rulesValidated struct {
	Mode string `json:"mode" marina:"enum=a|b"`
	Name string `json:"name"`
}

func (c *rulesValidated) Validate() []Diagnostic {
	if c.Name == "" {
		return []Diagnostic{Errorf("name", "must not be empty")}
	}
	return nil
}

// TestFieldRulesWithValidate: a value that breaks a rule still decodes, so
// the config's Validate runs too and the user sees both problems at once;
// an unknown field stops before Validate (nothing decoded to check).
func TestFieldRulesWithValidate(t *testing.T) {
	var c rulesValidated
	err := DecodeConfig([]byte(`{"mode":"c"}`), nil, &c)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Diagnostics) != 2 || ce.Diagnostics[0].Path != "mode" || ce.Diagnostics[1].Path != "name" {
		t.Fatalf("DecodeConfig = %v, want the rule's and Validate's problems", err)
	}
	err = DecodeConfig([]byte(`{"mode":"c","nmae":"x"}`), nil, &c)
	if !errors.As(err, &ce) || len(ce.Diagnostics) != 2 || ce.Diagnostics[0].Path != "nmae" || ce.Diagnostics[1].Path != "mode" {
		t.Fatalf("DecodeConfig = %v, want the unknown field, then the rule", err)
	}
}
