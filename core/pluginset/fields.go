package pluginset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ConfigField is one field of a plugin's config as `plugin info` lists it,
// read from the JSON Schema the plugin sent.
type ConfigField struct {
	Path        string // "logLevel", "upstream.host", "pools[].name"
	Type        string // "string", "duration", "list of string", ...
	Default     string // JSON, "" when none
	Rules       []string
	Description string
}

// ConfigFields lists the fields of a config schema, depth first in name
// order. Nested objects with properties are listed by their fields.
func ConfigFields(schema []byte) ([]ConfigField, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, nil
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	var out []ConfigField
	walkSchema(root, "", &out)
	return out, nil
}

func walkSchema(s map[string]any, prefix string, out *[]ConfigField) {
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if rs, ok := s["required"].([]any); ok {
		for _, r := range rs {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child, _ := props[name].(map[string]any)
		if child == nil {
			continue
		}
		path := prefix + name
		if _, nested := child["properties"].(map[string]any); nested {
			if required[name] || child["description"] != nil {
				*out = append(*out, fieldOf(path, child, required[name]))
			}
			walkSchema(child, path+".", out)
			continue
		}
		*out = append(*out, fieldOf(path, child, required[name]))
		if items, ok := child["items"].(map[string]any); ok {
			if _, nested := items["properties"].(map[string]any); nested {
				walkSchema(items, path+"[].", out)
			}
		}
	}
}

func fieldOf(path string, s map[string]any, required bool) ConfigField {
	f := ConfigField{Path: path, Type: schemaType(s)}
	if d, ok := s["description"].(string); ok {
		f.Description = d
	}
	if d, ok := s["default"]; ok {
		b, _ := json.Marshal(d)
		f.Default = string(b)
	}
	if required {
		f.Rules = append(f.Rules, "required")
	}
	f.Rules = append(f.Rules, schemaRules(s, "")...)
	if items, ok := s["items"].(map[string]any); ok {
		f.Rules = append(f.Rules, schemaRules(items, "each ")...)
	}
	return f
}

// schemaType names a schema's type for a reader.
func schemaType(s map[string]any) string {
	t, _ := s["type"].(string)
	switch {
	case t == "string" && s["format"] == "duration":
		return "duration"
	case t == "array":
		if items, ok := s["items"].(map[string]any); ok {
			return "list of " + schemaType(items)
		}
		return "list"
	case t == "object":
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			return "map of " + schemaType(ap)
		}
		return "object"
	case t == "":
		return "any"
	}
	return t
}

// schemaRules renders the validation keywords of s: "one of a, b",
// "1..5", "length ≤ 20", "pattern ^x$".
func schemaRules(s map[string]any, prefix string) []string {
	var out []string
	if enum, ok := s["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, v := range enum {
			vals[i] = fmt.Sprint(v)
		}
		out = append(out, prefix+"one of "+strings.Join(vals, ", "))
	}
	for _, b := range []struct{ min, max, label string }{
		{"minimum", "maximum", ""},
		{"x-minDuration", "x-maxDuration", ""},
		{"minLength", "maxLength", "length "},
		{"minItems", "maxItems", "items "},
		{"minProperties", "maxProperties", "keys "},
	} {
		lo, hasLo := s[b.min]
		hi, hasHi := s[b.max]
		switch {
		case hasLo && hasHi:
			out = append(out, fmt.Sprintf("%s%s%v..%v", prefix, b.label, lo, hi))
		case hasLo:
			out = append(out, fmt.Sprintf("%s%s≥ %v", prefix, b.label, lo))
		case hasHi:
			out = append(out, fmt.Sprintf("%s%s≤ %v", prefix, b.label, hi))
		}
	}
	if p, ok := s["pattern"].(string); ok {
		out = append(out, prefix+"pattern "+p)
	}
	return out
}
