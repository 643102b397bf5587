package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// ConfigError lists every problem found in a plugin's config.
type ConfigError struct{ Diagnostics []Diagnostic }

func (e *ConfigError) Error() string {
	parts := make([]string, 0, len(e.Diagnostics))
	for _, d := range e.Diagnostics {
		if d.Path != "" {
			parts = append(parts, d.Path+": "+d.Summary)
		} else {
			parts = append(parts, d.Summary)
		}
	}
	return "invalid plugin config: " + strings.Join(parts, "; ")
}

// configValidator is implemented by config structs that check themselves.
type configValidator interface{ Validate() []Diagnostic }

// DecodeConfig decodes user JSON over a copy of defaults into dst, strictly:
// unknown fields and wrongly typed values are errors naming their path, and a
// Validate method on the config type is called. defaults may be nil.
func DecodeConfig(userJSON []byte, defaults any, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("sdk: Config needs a non-nil pointer, got %T", dst)
	}
	if defaults != nil {
		b, err := json.Marshal(defaults)
		if err != nil {
			return fmt.Errorf("sdk: encoding config defaults: %w", err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			return fmt.Errorf("sdk: applying config defaults: %w", err)
		}
	}
	diags := CheckConfig(userJSON, rv.Elem().Type())
	if len(diags) > 0 {
		return &ConfigError{Diagnostics: diags}
	}
	if len(bytes.TrimSpace(userJSON)) > 0 && !bytes.Equal(bytes.TrimSpace(userJSON), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(userJSON))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return &ConfigError{Diagnostics: []Diagnostic{jsonDiagnostic(err)}}
		}
	}
	if v, ok := dst.(configValidator); ok {
		if ds := errorsOnly(v.Validate()); len(ds) > 0 {
			return &ConfigError{Diagnostics: ds}
		}
	}
	return nil
}

func errorsOnly(ds []Diagnostic) []Diagnostic {
	var out []Diagnostic
	for _, d := range ds {
		if d.Severity != SeverityWarning {
			if d.Severity == "" {
				d.Severity = SeverityError
			}
			out = append(out, d)
		}
	}
	return out
}

func jsonDiagnostic(err error) Diagnostic {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return Errorf(te.Field, "must be %s, got a JSON %s", kindName(te.Type), te.Value)
	}
	return Errorf("", "%v", err)
}

// CheckConfig walks user JSON against the config type t and reports unknown
// fields (with a suggestion) and values of the wrong type, with their paths.
func CheckConfig(userJSON []byte, t reflect.Type) []Diagnostic {
	trimmed := bytes.TrimSpace(userJSON)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []Diagnostic{Errorf("", "config is not valid JSON: %v", err)}
	}
	var ds []Diagnostic
	checkValue(v, t, "", &ds)
	return ds
}

var durationType = reflect.TypeOf(time.Duration(0))

func checkValue(v any, t reflect.Type, path string, ds *[]Diagnostic) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return
	}
	if t.Kind() == reflect.Interface {
		return // free-form
	}
	switch x := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for _, k := range sortedKeys(x) {
				f, ok := fields[k]
				if !ok {
					*ds = append(*ds, Errorf(joinPath(path, k), "unknown field %q%s", k, suggestField(k, fields)))
					continue
				}
				checkValue(x[k], f.Type, joinPath(path, k), ds)
			}
		case reflect.Map:
			for _, k := range sortedKeys(x) {
				checkValue(x[k], t.Elem(), joinPath(path, k), ds)
			}
		default:
			*ds = append(*ds, Errorf(path, "must be %s, got an object", kindName(t)))
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			*ds = append(*ds, Errorf(path, "must be %s, got a list", kindName(t)))
			return
		}
		for i, item := range x {
			checkValue(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), ds)
		}
	case string:
		if t == durationType {
			if _, err := time.ParseDuration(x); err != nil {
				*ds = append(*ds, Errorf(path, "must be a duration such as 30s or 5m, got %q", x))
			}
			return
		}
		if t.Kind() != reflect.String {
			*ds = append(*ds, Errorf(path, "must be %s, got the string %q", kindName(t), x))
		}
	case bool:
		if t.Kind() != reflect.Bool {
			*ds = append(*ds, Errorf(path, "must be %s, got %v", kindName(t), x))
		}
	case json.Number:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if t == durationType {
				*ds = append(*ds, Errorf(path, "must be a duration such as 30s or 5m, got %s", x))
			} else if _, err := x.Int64(); err != nil {
				*ds = append(*ds, Errorf(path, "must be a whole number, got %s", x))
			}
		case reflect.Float32, reflect.Float64:
		default:
			*ds = append(*ds, Errorf(path, "must be %s, got %s", kindName(t), x))
		}
	}
}

func kindName(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// jsonFields maps the JSON names of t's exported fields (embedded structs flattened).
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func suggestField(k string, fields map[string]reflect.StructField) string {
	best, bestD := "", 1<<30
	for name := range fields {
		if strings.EqualFold(name, k) {
			return fmt.Sprintf("; did you mean %q? (names are case-sensitive)", name)
		}
		if d := editDistance(strings.ToLower(k), strings.ToLower(name)); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best != "" && bestD <= max(1, min(3, len(k)/3)) {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ConfigSchema returns the JSON Schema (draft 2020-12) of a config struct:
// types from the Go types, names from json tags, descriptions from `doc`
// tags, defaults from the value, and additionalProperties false.
func ConfigSchema(defaults any) ([]byte, error) {
	if defaults == nil {
		return nil, nil
	}
	v := reflect.ValueOf(defaults)
	s := schemaFor(v.Type(), v)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	return json.MarshalIndent(s, "", "  ")
}

func schemaFor(t reflect.Type, v reflect.Value) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if v.IsValid() && !v.IsNil() {
			v = v.Elem()
		} else {
			v = reflect.Value{}
		}
	}
	s := map[string]any{}
	if t == durationType {
		s["type"] = "string"
		s["format"] = "duration"
		if v.IsValid() {
			s["default"] = time.Duration(v.Int()).String()
		}
		return s
	}
	switch t.Kind() {
	case reflect.Struct:
		s["type"] = "object"
		s["additionalProperties"] = false
		props := map[string]any{}
		for name, f := range jsonFields(t) {
			var fv reflect.Value
			if v.IsValid() {
				fv = v.FieldByIndex(f.Index)
			}
			p := schemaFor(f.Type, fv)
			if d := f.Tag.Get("doc"); d != "" {
				p["description"] = d
			}
			props[name] = p
		}
		s["properties"] = props
		return s
	case reflect.Map:
		s["type"] = "object"
		s["additionalProperties"] = schemaFor(t.Elem(), reflect.Value{})
	case reflect.Slice, reflect.Array:
		s["type"] = "array"
		s["items"] = schemaFor(t.Elem(), reflect.Value{})
	case reflect.String:
		s["type"] = "string"
	case reflect.Bool:
		s["type"] = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s["type"] = "integer"
	case reflect.Float32, reflect.Float64:
		s["type"] = "number"
	}
	if v.IsValid() && (t.Kind() != reflect.Slice && t.Kind() != reflect.Map || !v.IsNil()) {
		s["default"] = v.Interface()
	}
	return s
}
