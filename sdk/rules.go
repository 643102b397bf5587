package sdk

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Field rules: a config struct's fields can carry a `marina` struct tag
// that marina enforces before any hook runs (ValidateConfig, DecodeConfig)
// and that the JSON Schema of the config shows:
//
//	type Config struct {
//		Namespace string        `json:"namespace" marina:"required,pattern=^[a-z0-9-]+$"`
//		Mode      string        `json:"mode" marina:"enum=fast|safe"`
//		Replicas  int           `json:"replicas" marina:"min=1,max=5"`
//		Labels    []string      `json:"labels" marina:"max=10"`
//		Timeout   time.Duration `json:"timeout" marina:"min=1s,max=10m"`
//	}
//
// The options, separated by commas:
//
//   - required: the user must set the field (null does not count). It is
//     checked where the field's object is written; a required field of the
//     config struct itself makes the config section mandatory. Give such a
//     field no default.
//   - enum=A|B|C: the value is one of these (strings and numbers; for a
//     list, each item). A near miss gets a "did you mean".
//   - min=N, max=N: bounds, inclusive. Numbers: the value; strings: the
//     length in characters; lists and maps: the number of items;
//     durations: a duration ("min=1s").
//   - pattern=RE: the string (for a list, each item) matches RE, a Go
//     regular expression (RE2), unanchored as in JSON Schema: write ^ and $
//     to match the whole value. pattern= takes the rest of the tag, commas
//     included, so it comes last.
//
// A malformed tag is the plugin author's bug: Describe (and so Serve and
// plugintest) fails with an error naming the field, and a config checked
// against it gets an error diagnostic saying so.
type fieldRules struct {
	required bool
	enum     []string
	// min and max bound the value (numbers, durations in nanoseconds) or
	// the size (string length, item count); nil when not set.
	min, max *float64
	pattern  *regexp.Regexp
	tag      string // the tag as written, for messages
}

// rulesTag is the struct tag key of field rules.
const rulesTag = "marina"

// typeRules caches the parsed rules of a struct type's fields.
type typeRules struct {
	byName map[string]*fieldRules // by JSON name; only fields with a tag
	err    error                  // the first malformed tag
}

var rulesCache sync.Map // reflect.Type -> *typeRules

// rulesOf returns the field rules of struct type t.
func rulesOf(t reflect.Type) *typeRules {
	if v, ok := rulesCache.Load(t); ok {
		return v.(*typeRules)
	}
	tr := &typeRules{byName: map[string]*fieldRules{}}
	for name, f := range jsonFields(t) {
		tag, ok := f.Tag.Lookup(rulesTag)
		if !ok {
			continue
		}
		r, err := parseRules(tag, f.Type)
		if err != nil {
			if tr.err == nil || err.Error() < tr.err.Error() {
				field := f.Name
				if t.Name() != "" {
					field = t.Name() + "." + field
				}
				tr.err = fmt.Errorf("field %s (json %q): tag %s:%q: %w", field, name, rulesTag, tag, err)
			}
			continue
		}
		tr.byName[name] = r
	}
	v, _ := rulesCache.LoadOrStore(t, tr)
	return v.(*typeRules)
}

// ruleKind is what a field's rules apply to.
type ruleKind int

const (
	kindOther ruleKind = iota
	kindString
	kindNumber
	kindDuration
	kindList // slices and arrays: min/max count items, enum/pattern each item
	kindMap
)

func kindOfRules(t reflect.Type) ruleKind {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return kindDuration
	case decodesItself(t):
		return kindOther
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return kindNumber
	case reflect.Slice, reflect.Array:
		return kindList
	case reflect.Map:
		return kindMap
	}
	return kindOther
}

// itemType is the element type of a list type, pointers removed.
func itemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Elem()
}

// parseRules parses a `marina` tag for a field of type t.
func parseRules(tag string, t reflect.Type) (*fieldRules, error) {
	r := &fieldRules{tag: tag}
	kind := kindOfRules(t)
	valueKind := kind // what enum and pattern apply to
	if kind == kindList {
		valueKind = kindOfRules(itemType(t))
	}
	rest := tag
	for rest != "" {
		var opt string
		if strings.HasPrefix(rest, "pattern=") {
			opt, rest = rest, ""
		} else {
			opt, rest, _ = strings.Cut(rest, ",")
		}
		key, val, hasVal := strings.Cut(opt, "=")
		switch {
		case key == "required" && !hasVal:
			r.required = true
		case key == "enum" && hasVal:
			if valueKind != kindString && valueKind != kindNumber {
				return nil, fmt.Errorf("enum= applies to strings and numbers (or lists of them), not %s", t)
			}
			for _, e := range strings.Split(val, "|") {
				if valueKind == kindNumber {
					if _, err := strconv.ParseFloat(e, 64); err != nil {
						return nil, fmt.Errorf("enum value %q is not a number", e)
					}
				}
				r.enum = append(r.enum, e)
			}
			if val == "" {
				return nil, fmt.Errorf("enum= lists no value; write enum=A|B")
			}
		case (key == "min" || key == "max") && hasVal:
			var n float64
			switch kind {
			case kindDuration:
				d, err := time.ParseDuration(val)
				if err != nil {
					return nil, fmt.Errorf("%s=%s is not a duration such as 30s", key, val)
				}
				n = float64(d)
			case kindNumber:
				f, err := strconv.ParseFloat(val, 64)
				if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
					return nil, fmt.Errorf("%s=%s is not a number", key, val)
				}
				n = f
			case kindString, kindList, kindMap:
				i, err := strconv.ParseUint(val, 10, 31)
				if err != nil {
					return nil, fmt.Errorf("%s=%s is not a count (a whole number ≥ 0)", key, val)
				}
				n = float64(i)
			default:
				return nil, fmt.Errorf("%s= applies to numbers, durations, strings, lists and maps, not %s", key, t)
			}
			if key == "min" {
				r.min = &n
			} else {
				r.max = &n
			}
		case key == "pattern" && hasVal:
			if valueKind != kindString {
				return nil, fmt.Errorf("pattern= applies to strings (or lists of them), not %s", t)
			}
			re, err := regexp.Compile(val)
			if err != nil {
				return nil, fmt.Errorf("pattern: %v", err)
			}
			r.pattern = re
		default:
			return nil, fmt.Errorf("unknown option %q; the options are required, enum=A|B, min=N, max=N, pattern=RE (last)", opt)
		}
	}
	if r.min != nil && r.max != nil && *r.min > *r.max {
		return nil, fmt.Errorf("min is above max")
	}
	return r, nil
}

// checkRules applies r to v, the user's value (decoded with UseNumber) of a
// field of type t, already found to have the right type.
func checkRules(v any, t reflect.Type, r *fieldRules, path string, ds *[]Diagnostic) {
	if v == nil {
		return
	}
	switch kindOfRules(t) {
	case kindDuration:
		s, _ := v.(string)
		d, err := time.ParseDuration(s)
		if err != nil {
			return // reported by the type check
		}
		if r.min != nil && float64(d) < *r.min {
			*ds = append(*ds, Errorf(path, "must be at least %s, got %s", time.Duration(*r.min), s))
		}
		if r.max != nil && float64(d) > *r.max {
			*ds = append(*ds, Errorf(path, "must be at most %s, got %s", time.Duration(*r.max), s))
		}
	case kindNumber:
		n, ok := v.(json.Number)
		if !ok {
			return
		}
		f, err := n.Float64()
		if err != nil {
			return
		}
		if r.min != nil && f < *r.min {
			*ds = append(*ds, Errorf(path, "must be at least %s, got %s", formatBound(*r.min), n))
		}
		if r.max != nil && f > *r.max {
			*ds = append(*ds, Errorf(path, "must be at most %s, got %s", formatBound(*r.max), n))
		}
		checkEnum(n.String(), true, r, path, ds)
	case kindString:
		s, ok := v.(string)
		if !ok {
			return
		}
		n := float64(utf8.RuneCountInString(s))
		if r.min != nil && n < *r.min {
			*ds = append(*ds, Errorf(path, "must be at least %s long, got %q", plural(*r.min, "character"), excerptValue(s)))
		}
		if r.max != nil && n > *r.max {
			*ds = append(*ds, Errorf(path, "must be at most %s long, got %d", plural(*r.max, "character"), int(n)))
		}
		checkString(s, r, path, ds)
	case kindList:
		items, ok := v.([]any)
		if !ok {
			return
		}
		checkCount(len(items), "item", r, path, ds)
		it := itemType(t)
		for i, item := range items {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch kindOfRules(it) {
			case kindString:
				if s, ok := item.(string); ok {
					checkString(s, r, p, ds)
				}
			case kindNumber:
				if n, ok := item.(json.Number); ok {
					checkEnum(n.String(), true, r, p, ds)
				}
			}
		}
	case kindMap:
		if m, ok := v.(map[string]any); ok {
			checkCount(len(m), "key", r, path, ds)
		}
	}
}

func checkCount(n int, what string, r *fieldRules, path string, ds *[]Diagnostic) {
	if r.min != nil && float64(n) < *r.min {
		*ds = append(*ds, Errorf(path, "must have at least %s, got %d", plural(*r.min, what), n))
	}
	if r.max != nil && float64(n) > *r.max {
		*ds = append(*ds, Errorf(path, "must have at most %s, got %d", plural(*r.max, what), n))
	}
}

// plural renders a count and a noun: "1 item", "2 items".
func plural(n float64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return formatBound(n) + " " + noun + "s"
}

// checkString applies enum and pattern to one string.
func checkString(s string, r *fieldRules, path string, ds *[]Diagnostic) {
	checkEnum(s, false, r, path, ds)
	if r.pattern != nil && !r.pattern.MatchString(s) {
		*ds = append(*ds, Errorf(path, "must match the pattern %s, got %q", r.pattern, excerptValue(s)))
	}
}

// checkEnum reports s if it is not one of r.enum (numbers compare by value).
func checkEnum(s string, number bool, r *fieldRules, path string, ds *[]Diagnostic) {
	if len(r.enum) == 0 {
		return
	}
	for _, e := range r.enum {
		if e == s {
			return
		}
		if number {
			a, err1 := strconv.ParseFloat(e, 64)
			b, err2 := strconv.ParseFloat(s, 64)
			if err1 == nil && err2 == nil && a == b {
				return
			}
		}
	}
	*ds = append(*ds, Errorf(path, "must be one of %s, got %q%s", strings.Join(r.enum, ", "), excerptValue(s), didYouMean(s, r.enum, "values")))
}

// checkRequired reports the required fields of struct type t that obj (the
// user's object at path) does not set.
func checkRequired(obj map[string]any, t reflect.Type, path string, ds *[]Diagnostic) {
	tr := rulesOf(t)
	names := make([]string, 0, len(tr.byName))
	for name, r := range tr.byName {
		if r.required {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if obj[name] == nil {
			*ds = append(*ds, Errorf(joinPath(path, name), "is required%s", docHint(t, name)))
		}
	}
}

// docHint returns " (DOC)" from the field's doc tag, to say what to set.
func docHint(t reflect.Type, name string) string {
	if f, ok := jsonFields(t)[name]; ok {
		if d := f.Tag.Get("doc"); d != "" {
			return " (" + d + ")"
		}
	}
	return ""
}

// formatBound renders a bound without a trailing ".0".
func formatBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// excerptValue caps a user's value quoted in a message.
func excerptValue(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// schemaRules adds r's keywords to the JSON Schema s of a field of type t.
func schemaRules(s map[string]any, t reflect.Type, r *fieldRules) {
	target := s
	kind := kindOfRules(t)
	if kind == kindList {
		if items, ok := s["items"].(map[string]any); ok {
			target = items
		}
	}
	if len(r.enum) > 0 {
		vals := make([]any, len(r.enum))
		for i, e := range r.enum {
			if kind == kindNumber || kind == kindList && kindOfRules(itemType(t)) == kindNumber {
				vals[i] = json.Number(e)
			} else {
				vals[i] = e
			}
		}
		target["enum"] = vals
	}
	if r.pattern != nil {
		target["pattern"] = r.pattern.String()
	}
	set := func(minKey, maxKey string, conv func(float64) any) {
		if r.min != nil {
			s[minKey] = conv(*r.min)
		}
		if r.max != nil {
			s[maxKey] = conv(*r.max)
		}
	}
	num := func(f float64) any { return json.Number(formatBound(f)) }
	switch kind {
	case kindNumber:
		set("minimum", "maximum", num)
	case kindString:
		set("minLength", "maxLength", num)
	case kindList:
		set("minItems", "maxItems", num)
	case kindMap:
		set("minProperties", "maxProperties", num)
	case kindDuration:
		// JSON Schema has no duration bounds: marina's own keywords.
		set("x-minDuration", "x-maxDuration", func(f float64) any { return time.Duration(f).String() })
	}
}
