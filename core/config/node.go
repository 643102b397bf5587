package config

import (
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// valueNode builds the node yaml.v3's Node.Encode builds for v, for the
// kinds a Config holds (structs with yaml tags, strings, bools, ints,
// durations, slices, string-keyed maps, and the interface values of a
// plugin's free-form config), without Node.Encode's round trip through
// YAML text (emit, then parse back), which was most of AnnotatedYAML's
// cost and a tenth of `marina config view`, and which loses a string
// yaml.v3 cannot read back (GuardYAML). Anything else (a float, a string
// that is not UTF-8) is given to Node.Encode itself, alone: a scalar.
// node_test.go compares the two on every kind.
func valueNode(v reflect.Value) (*yaml.Node, error) {
	if v.Type() == durationType { // yaml.v3 writes a Duration as its String()
		return stringNode(time.Duration(v.Int()).String()), nil
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
		}
		return valueNode(v.Elem())
	case reflect.String:
		if s := v.String(); utf8.ValidString(s) {
			return stringNode(s), nil
		}
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}, nil
	case reflect.Struct:
		return structNode(v)
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		for i := 0; i < v.Len(); i++ {
			item, err := valueNode(v.Index(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, item)
		}
		return n, nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			break
		}
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		if slices.ContainsFunc(keys, func(k string) bool { return !utf8.ValidString(k) }) {
			break // a !!binary key: yaml.v3's own
		}
		sort.Slice(keys, func(i, j int) bool { return yamlKeyLess(keys[i], keys[j]) })
		for _, k := range keys {
			val, err := valueNode(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, stringNode(k), val)
		}
		return n, nil
	}
	var n yaml.Node
	if err := n.Encode(v.Interface()); err != nil {
		return nil, err
	}
	return &n, nil
}

// structNode is a struct's mapping: its exported fields under their yaml
// names, in order, omitempty ones left out when zero.
func structNode(v reflect.Value) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || opts != "" && opts != "omitempty" {
			var whole yaml.Node // a flag this builder does not know: yaml.v3's own
			if err := whole.Encode(v.Interface()); err != nil {
				return nil, err
			}
			return &whole, nil
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fv := v.Field(i)
		if opts == "omitempty" && fv.IsZero() {
			continue
		}
		val, err := valueNode(fv)
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, stringNode(name), val)
	}
	if len(n.Content) == 0 {
		n.Style = yaml.FlowStyle
	}
	return n, nil
}

// stringNode is a string scalar styled as yaml.v3's marshaller styles it:
// literal when multi-line, double-quoted when plain text would read as
// another type (the encoder quotes those itself for a !!str node) or as a
// YAML 1.1 bool or base-60 float, plain otherwise.
func stringNode(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case strings.Contains(s, "\n"):
		n.Style = yaml.LiteralStyle
	case isOldBool(s) || isBase60Float(s):
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// isOldBool: YAML 1.1's bool words (yaml.v3's isOldBool).
func isOldBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// isBase60Float: ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$ (yaml.v3's).
func isBase60Float(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	groups := 0
	for i < len(s) && s[i] == ':' {
		j := i + 1
		for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		switch j - i - 1 {
		case 1:
		case 2:
			if s[i+1] > '5' {
				return false
			}
		default:
			return false
		}
		i, groups = j, groups+1
	}
	if groups == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_'); i++ {
		}
	}
	return i == len(s)
}

// yamlKeyLess is yaml.v3's order of string map keys (its keyList.Less):
// runs of digits compare by value, letters before other characters.
func yamlKeyLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	digits := false
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			digits = unicode.IsDigit(ar[i])
			continue
		}
		al, bl := unicode.IsLetter(ar[i]), unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			if digits {
				return al
			}
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}
