package config

import (
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
)

// field is one node of the schema tree derived from Config's struct tags.
type field struct {
	Key      string       // key in YAML, e.g. "cpus"
	Path     string       // dotted path, e.g. "vm.cpus"; "plugins.*" for map elements, "registries.mirrors[]" for list items
	Type     reflect.Type // Go type of the value
	Doc      string
	Children []*field // struct fields, in declaration order
	Elem     *field   // element schema of a map of structs or a list of structs
}

// kind classifies a field for decoding and layering.
type fieldKind int

const (
	kindStruct     fieldKind = iota // nested section
	kindStructMap                   // map[string]Struct (plugins)
	kindStructList                  // []Struct (mirrors)
	kindScalarList                  // []string
	kindFreeMap                     // map[string]any (plugin config)
	kindScalar                      // string, int, bool, duration
)

var durationType = reflect.TypeOf(time.Duration(0))

func (f *field) kind() fieldKind {
	switch t := f.Type; t.Kind() {
	case reflect.Struct:
		return kindStruct
	case reflect.Map:
		if t.Elem().Kind() == reflect.Struct {
			return kindStructMap
		}
		return kindFreeMap
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return kindStructList
		}
		return kindScalarList
	default:
		return kindScalar
	}
}

// child returns the direct child with exactly this key.
func (f *field) child(key string) *field {
	for _, c := range f.Children {
		if c.Key == key {
			return c
		}
	}
	return nil
}

// typeName is the user-facing name of a scalar type, for error messages.
func typeName(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 90s or 5m"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	default:
		return "a string"
	}
}

var (
	schemaOnce sync.Once
	schemaRoot *field
)

// schema returns the schema tree of Config (built once).
func schema() *field {
	schemaOnce.Do(func() {
		schemaRoot = buildField("", "", reflect.TypeOf(Config{}), "")
	})
	return schemaRoot
}

func buildField(key, path string, t reflect.Type, doc string) *field {
	f := &field{Key: key, Path: path, Type: t, Doc: doc}
	switch f.kind() {
	case kindStruct:
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name := yamlKey(sf)
			if name == "" {
				continue
			}
			f.Children = append(f.Children, buildField(name, joinPath(path, name), sf.Type, sf.Tag.Get("doc")))
		}
	case kindStructMap:
		f.Elem = buildField("*", path+".*", t.Elem(), doc)
	case kindStructList:
		f.Elem = buildField("[]", path+"[]", t.Elem(), doc)
	}
	return f
}

func yamlKey(sf reflect.StructField) string {
	tag := sf.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	return name
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// leaves returns every scalar, list and free-map field reachable without
// going through a map or list, in declaration order: the keys that defaults,
// environment variables and --set address directly.
func (f *field) leaves() []*field {
	var out []*field
	var walk func(*field)
	walk = func(n *field) {
		for _, c := range n.Children {
			if c.kind() == kindStruct {
				walk(c)
				continue
			}
			out = append(out, c)
		}
	}
	walk(f)
	return out
}

// allKeyPaths lists every key path of the schema (for "did you mean" across sections).
func (f *field) allKeyPaths() []*field {
	var out []*field
	var walk func(*field)
	walk = func(n *field) {
		for _, c := range n.Children {
			out = append(out, c)
			walk(c)
		}
		if n.Elem != nil {
			walk(n.Elem)
		}
	}
	walk(f)
	return out
}

// envName is the environment variable that sets a scalar key: vm.cpus -> MARINA_VM_CPUS.
func envName(path string) string {
	return "MARINA_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// EnvVars lists every MARINA_* variable that sets a config key, sorted, with its key.
func EnvVars() map[string]string {
	out := map[string]string{}
	for _, l := range schema().leaves() {
		if l.kind() == kindScalar {
			out[envName(l.Path)] = l.Path
		}
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
