package sdk

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
// unknown fields and wrongly typed values are errors naming their path, the
// field rules of `marina` struct tags are enforced (see fieldRules), and a
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
	checked := checkConfig(userJSON, rv.Elem().Type())
	if len(checked.ds) > 0 {
		return &ConfigError{Diagnostics: append(checked.ds, checked.rules...)}
	}
	if len(bytes.TrimSpace(userJSON)) > 0 && !bytes.Equal(bytes.TrimSpace(userJSON), []byte("null")) {
		// Durations are written "30s" by users but time.Duration decodes
		// from nanoseconds: rewrite them (CheckConfig has vetted them).
		b, err := rewriteDurations(userJSON, rv.Elem().Type(), false)
		if err != nil {
			return &ConfigError{Diagnostics: []Diagnostic{Errorf("", "config is not valid JSON: %v", err)}}
		}
		// encoding/json decodes a list into the elements already there,
		// so a user's list would inherit the defaults' items: clear them.
		clearUserLists(b, rv.Elem())
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return &ConfigError{Diagnostics: []Diagnostic{jsonDiagnostic(err)}}
		}
	}
	// A value that breaks a field rule still decodes: the config's own
	// Validate runs too, so the user sees every problem at once.
	ds := checked.rules
	if v, ok := dst.(configValidator); ok {
		ds = append(ds, errorsOnly(v.Validate())...)
	}
	if len(ds) > 0 {
		return &ConfigError{Diagnostics: ds}
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
	c := checkConfig(userJSON, t)
	return append(c.ds, c.rules...)
}

func checkConfig(userJSON []byte, t reflect.Type) *checkState {
	trimmed := bytes.TrimSpace(userJSON)
	var v any
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		st := t
		for st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if st.Kind() != reflect.Struct || decodesItself(st) {
			return &checkState{}
		}
		v = map[string]any{} // no config section: its required fields are missing
	} else {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return &checkState{ds: []Diagnostic{Errorf("", "config is not valid JSON: %v", err)}}
		}
	}
	c := &checkState{}
	checkValue(v, t, "", c)
	return c
}

// checkState collects what CheckConfig finds: ds, what keeps the config
// from decoding into its type (unknown fields, wrong types), and rules,
// values that decode but break a field rule (required, enum, min, max,
// pattern).
type checkState struct{ ds, rules []Diagnostic }

var (
	durationType        = reflect.TypeFor[time.Duration]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	jsonMarshalerType   = reflect.TypeFor[json.Marshaler]()
)

// decodesItself reports whether values of t parse their own JSON (e.g.
// netip.Prefix from "10.0.0.0/8"), so their Go kind says nothing about it.
func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType)
}

// checkSelfDecoding lets a type that parses itself judge v, reporting its
// error at path.
func checkSelfDecoding(v any, t reflect.Type, path string, c *checkState) {
	target := reflect.New(t).Interface()
	if u, ok := target.(json.Unmarshaler); ok {
		b, err := json.Marshal(v)
		if err == nil {
			err = u.UnmarshalJSON(b)
		}
		if err != nil {
			c.ds = append(c.ds, Errorf(path, "invalid value: %v", err))
		}
		return
	}
	s, ok := v.(string)
	if !ok {
		c.ds = append(c.ds, Errorf(path, "must be a string, got %v", v))
		return
	}
	if err := target.(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		c.ds = append(c.ds, Errorf(path, "invalid value %q: %v", s, err))
	}
}

func checkValue(v any, t reflect.Type, path string, c *checkState) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return
	}
	if t.Kind() == reflect.Interface {
		return // free-form
	}
	if decodesItself(t) {
		checkSelfDecoding(v, t, path, c)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			rules := rulesOf(t)
			if rules.err != nil {
				c.ds = append(c.ds, Errorf(path, "the plugin's config schema is invalid, a bug in the plugin to report to its maintainer: %v", rules.err))
			}
			for _, k := range sortedKeys(x) {
				f, ok := fields[k]
				if !ok {
					c.ds = append(c.ds, Errorf(joinPath(path, k), "unknown field %q%s", k, suggestField(k, fields)))
					continue
				}
				before := len(c.ds)
				checkValue(x[k], f.Type, joinPath(path, k), c)
				if r := rules.byName[k]; r != nil && len(c.ds) == before {
					checkRules(x[k], f.Type, r, joinPath(path, k), &c.rules)
				}
			}
			checkRequired(x, t, path, &c.rules)
		case reflect.Map:
			for _, k := range sortedKeys(x) {
				checkValue(x[k], t.Elem(), joinPath(path, k), c)
			}
		default:
			c.ds = append(c.ds, Errorf(path, "must be %s, got an object", kindName(t)))
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			c.ds = append(c.ds, Errorf(path, "must be %s, got a list", kindName(t)))
			return
		}
		for i, item := range x {
			checkValue(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), c)
		}
	case string:
		if t == durationType {
			if _, err := time.ParseDuration(x); err != nil {
				c.ds = append(c.ds, Errorf(path, "must be a duration such as 30s or 5m, got %q", x))
			}
			return
		}
		if t.Kind() != reflect.String {
			c.ds = append(c.ds, Errorf(path, "must be %s, got the string %q", kindName(t), x))
		}
	case bool:
		if t.Kind() != reflect.Bool {
			c.ds = append(c.ds, Errorf(path, "must be %s, got %v", kindName(t), x))
		}
	case json.Number:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if t == durationType {
				c.ds = append(c.ds, Errorf(path, "must be a duration such as 30s or 5m, got %s", x))
			} else if _, err := x.Int64(); err != nil {
				c.ds = append(c.ds, Errorf(path, "must be a whole number, got %s", x))
			}
		case reflect.Float32, reflect.Float64:
		default:
			c.ds = append(c.ds, Errorf(path, "must be %s, got %s", kindName(t), x))
		}
	}
}

// rewriteDurations re-encodes JSON whose shape follows type t, turning
// time.Duration values into nanoseconds (toString false, for decoding) or
// into strings such as "5m0s" (toString true, for showing defaults).
func rewriteDurations(data []byte, t reflect.Type, toString bool) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(walkDurations(v, t, toString))
}

func walkDurations(v any, t reflect.Type, toString bool) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		switch x := v.(type) {
		case string:
			if d, err := time.ParseDuration(x); err == nil && !toString {
				return json.Number(strconv.FormatInt(int64(d), 10))
			}
		case json.Number:
			if n, err := x.Int64(); err == nil && toString {
				return time.Duration(n).String()
			}
		}
		return v
	}
	if decodesItself(t) {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, item := range x {
				if f, ok := fields[k]; ok {
					x[k] = walkDurations(item, f.Type, toString)
				}
			}
		case reflect.Map:
			for k, item := range x {
				x[k] = walkDurations(item, t.Elem(), toString)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, item := range x {
				x[i] = walkDurations(item, t.Elem(), toString)
			}
		}
	}
	return v
}

// clearUserLists zeroes the slices of dst (a struct, after defaults) that
// the user's JSON sets, so user lists replace default lists instead of
// being merged into them item by item. Structs still merge field by field.
func clearUserLists(userJSON []byte, dst reflect.Value) {
	var v any
	if json.Unmarshal(userJSON, &v) != nil {
		return
	}
	clearLists(v, dst)
}

func clearLists(v any, dst reflect.Value) {
	for dst.Kind() == reflect.Pointer {
		if dst.IsNil() {
			return
		}
		dst = dst.Elem()
	}
	obj, ok := v.(map[string]any)
	if !ok || dst.Kind() != reflect.Struct || decodesItself(dst.Type()) {
		return
	}
	fields := jsonFields(dst.Type())
	for k, item := range obj {
		f, ok := fields[k]
		if !ok {
			continue
		}
		fv, err := dst.FieldByIndexErr(f.Index)
		if err != nil || !fv.CanSet() {
			continue
		}
		if fv.Kind() == reflect.Slice {
			fv.SetZero()
			continue
		}
		clearLists(item, fv)
	}
}

// configDefaultsJSON encodes a config's defaults the way users write them
// (durations as "5m0s"), so they validate against the schema.
func configDefaultsJSON(defaults any) ([]byte, error) {
	b, err := json.Marshal(defaults)
	if err != nil {
		return nil, err
	}
	return rewriteDurations(b, reflect.TypeOf(defaults), true)
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
	return didYouMean(k, sortedKeys(fields), "names")
}

// didYouMean returns "; did you mean X?" for the candidate nearest to k
// (the first of equally near ones), when it is near enough: the same but
// for case ("... (WHAT are case-sensitive)"), or within an edit distance
// of a third of k's length (1 to 3); "" otherwise.
func didYouMean(k string, candidates []string, what string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if strings.EqualFold(c, k) {
			return fmt.Sprintf("; did you mean %q? (%s are case-sensitive)", c, what)
		}
		if d := editDistance(strings.ToLower(k), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" && bestD <= max(1, min(3, utf8.RuneCountInString(k)/3)) {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent
// characters ("nmae" for "name") each cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
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
	if err := rulesError(v.Type(), map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	s := schemaFor(v.Type(), v)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	return json.MarshalIndent(s, "", "  ")
}

// rulesError returns the first malformed `marina` tag in the struct types
// reachable from t.
func rulesError(t reflect.Type, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Struct:
		if decodesItself(t) {
			return nil
		}
		if err := rulesOf(t).err; err != nil {
			return err
		}
		fields := jsonFields(t)
		for _, name := range sortedKeys(fields) {
			if err := rulesError(fields[name].Type, seen); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array, reflect.Map:
		return rulesError(t.Elem(), seen)
	}
	return nil
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
	if pt := reflect.PointerTo(t); pt.Implements(textMarshalerType) || t.Implements(textMarshalerType) {
		// Types such as netip.Prefix are written as strings.
		s["type"] = "string"
		if v.IsValid() {
			if b, err := json.Marshal(v.Interface()); err == nil {
				s["default"] = json.RawMessage(b)
			}
		}
		return s
	}
	if reflect.PointerTo(t).Implements(jsonMarshalerType) || t.Implements(jsonMarshalerType) {
		// A custom JSON encoding: any JSON value, shown by its default.
		if v.IsValid() {
			if b, err := json.Marshal(v.Interface()); err == nil {
				s["default"] = json.RawMessage(b)
			}
		}
		return s
	}
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
		rules := rulesOf(t)
		var required []string
		for name, f := range jsonFields(t) {
			var fv reflect.Value
			if v.IsValid() {
				fv = v.FieldByIndex(f.Index)
			}
			p := schemaFor(f.Type, fv)
			if d := f.Tag.Get("doc"); d != "" {
				p["description"] = d
			}
			if r := rules.byName[name]; r != nil {
				schemaRules(p, f.Type, r)
				if r.required {
					required = append(required, name)
					delete(p, "default") // the user sets it: a zero default says nothing
				}
			}
			props[name] = p
		}
		s["properties"] = props
		if len(required) > 0 {
			sort.Strings(required)
			s["required"] = required
		}
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
	if v.IsValid() && (t.Kind() != reflect.Slice && t.Kind() != reflect.Map && t.Kind() != reflect.Interface || !v.IsNil()) {
		s["default"] = v.Interface()
	}
	return s
}
