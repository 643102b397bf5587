package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redacted replaces secrets in rendered configuration.
const Redacted = "<redacted>"

// Redact returns a deep copy of c with credentials replaced by Redacted.
func Redact(c *Config) *Config {
	out := *c
	out.Registries.Mirrors = append([]Mirror(nil), c.Registries.Mirrors...)
	for i := range out.Registries.Mirrors {
		if out.Registries.Mirrors[i].Password != "" {
			out.Registries.Mirrors[i].Password = Redacted
		}
	}
	return &out
}

// Entry is one effective value and its source, for `config view -o json|yaml`.
type Entry struct {
	Key    string `json:"key" yaml:"key"`
	Value  any    `json:"value" yaml:"value"`
	Source Source `json:"source" yaml:"source"`
}

// Entries lists the effective configuration key by key, secrets redacted.
func (l *Loaded) Entries() []Entry {
	c := Redact(l.Config)
	var out []Entry
	for _, leaf := range schema().leaves() {
		if leaf.Path == "plugins" {
			for _, name := range sortedKeys(c.Plugins) {
				pv := reflect.ValueOf(c.Plugins[name])
				for _, f := range leaf.Elem.Children {
					p := "plugins." + name + "." + f.Key
					out = append(out, Entry{Key: p, Value: fieldByKey(pv, f.Key).Interface(), Source: l.Sources[p]})
				}
			}
			continue
		}
		out = append(out, Entry{Key: leaf.Path, Value: valueAt(c, leaf), Source: l.Sources[leaf.Path]})
	}
	return out
}

// AnnotatedYAML renders the effective configuration as YAML with a comment
// after every value saying where it came from. Secrets are redacted.
func (l *Loaded) AnnotatedYAML() ([]byte, error) {
	doc, err := valueNode(reflect.ValueOf(Redact(l.Config)).Elem())
	if err != nil {
		return nil, err
	}
	annotate(doc, "", func(path string) (string, bool) {
		s, ok := l.Sources[path]
		return s.String(), ok
	})
	return encodeNode(doc)
}

// annotate walks a mapping node and sets a line comment on every key whose
// path comment returns.
func annotate(n *yaml.Node, path string, comment func(string) (string, bool)) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		p := joinPath(path, key.Value)
		if c, ok := comment(p); ok {
			if val.Kind == yaml.ScalarNode || len(val.Content) == 0 {
				val.LineComment = c
			} else {
				key.LineComment = c
			}
		}
		annotate(val, p, comment)
	}
}

// encodeNode writes n as marina writes YAML (indent 2), guarded so that
// it reads back as n (GuardYAML: strings yaml.v3 would write as blocks it
// cannot read back are double-quoted, line comments kept on their line).
func encodeNode(n *yaml.Node) ([]byte, error) {
	GuardYAML(n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// InitTemplate is the commented default configuration written by
// `marina config init`: every key with its documentation above it.
func InitTemplate() ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(Default()); err != nil {
		return nil, err
	}
	root := &doc
	var comment func(n *yaml.Node, f *field)
	comment = func(n *yaml.Node, f *field) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			child := f.child(key.Value)
			if child == nil {
				continue
			}
			key.HeadComment = wrap(child.Doc)
			if child.kind() == kindStruct {
				comment(val, child)
			}
		}
	}
	comment(root, schema())
	root.HeadComment = strings.Join([]string{
		"marina configuration. Reference: docs/config.md; check it with `marina config validate`.",
		"Precedence: built-in default < this file < MARINA_* environment variables < --set key=value.",
		"Every key below shows its default; delete what you do not change.",
	}, "\n")
	return encodeNode(&doc)
}

// RenderKeys renders cfg as a config file holding only the keys of
// comments (dotted paths, as `marina config view` names them) and the
// sections that lead to them: each key documented as InitTemplate documents
// it, followed by its comment (on the value when it is a scalar or empty,
// on the key otherwise). header is the file's head comment.
func RenderKeys(cfg *Config, comments map[string]string, header string) ([]byte, error) {
	root, err := valueNode(reflect.ValueOf(cfg).Elem())
	if err != nil {
		return nil, err
	}
	pruneTo(root, schema(), comments)
	return encodeNode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}, HeadComment: header})
}

// pruneTo keeps, in the mapping n of section f, the keys in comments and
// the sections leading to one, with their documentation.
func pruneTo(n *yaml.Node, f *field, comments map[string]string) {
	var kept []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		child := f.child(key.Value)
		if child == nil {
			continue
		}
		if comment, ok := comments[child.Path]; ok {
			key.HeadComment = wrap(child.Doc)
			if val.Kind == yaml.ScalarNode || len(val.Content) == 0 {
				val.LineComment = comment
			} else {
				key.LineComment = comment
			}
			kept = append(kept, key, val)
			continue
		}
		if val.Kind == yaml.MappingNode && child.kind() == kindStruct && leadsTo(comments, child.Path+".") {
			key.HeadComment = wrap(child.Doc)
			pruneTo(val, child, comments)
			kept = append(kept, key, val)
		}
	}
	n.Content = kept
}

// leadsTo reports whether a key of comments lies under prefix.
func leadsTo(comments map[string]string, prefix string) bool {
	for k := range comments {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func wrap(s string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > 88 {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// Reference renders docs/config.md from the schema and the defaults.
func Reference() string {
	var b strings.Builder
	b.WriteString("<!-- Generated by `make docs` from core/config. Do not edit. -->\n")
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("marina reads `~/.marina/config.yaml` (or the file named by `--config` or `$MARINA_CONFIG`).\n")
	b.WriteString("`marina config init` writes a commented default file; `marina config view` shows the effective\n")
	b.WriteString("configuration and where each value came from; `marina config validate` checks it.\n\n")
	b.WriteString("## Precedence\n\n")
	b.WriteString("Lowest to highest: built-in default, the config file, `MARINA_*` environment variables,\n")
	b.WriteString("`--set key=value` flags (repeatable, on every command). Environment variables and `--set` address\n")
	b.WriteString("scalar keys only; lists (mirrors, resolvers) are set in the file. `--set plugins.<name>.config.<key>=<value>`\n")
	b.WriteString("sets a plugin's own config key.\n\n")
	b.WriteString("## Strictness\n\n")
	b.WriteString("Unknown or misspelled keys, duplicate keys and values of the wrong type are errors that name the\n")
	b.WriteString("key, the file, the line and a suggestion. Validation reports every problem at once, with field paths.\n")
	b.WriteString("A `MARINA_*` variable that sets no key is a warning.\n\n")
	b.WriteString("Nothing is dropped silently. The file holds one YAML document: a second one after `---` is an\n")
	b.WriteString("error at its line. A file that expands to more than 100000 YAML nodes (a very large plugin\n")
	b.WriteString("`config:` section, or aliases) is an error at the first node not read. The config file must be a\n")
	b.WriteString("regular file of at most 1 MiB (a directory, named pipe or device is refused at once), the same limit\n")
	b.WriteString("as for Fleet manifests. A `--set plugins.<name>.config.<key>` for a plugin that nothing else names\n")
	b.WriteString("is an error. Sizes past 8EiB are too large. Messages quote at most the first 64 bytes of a value.\n\n")
	b.WriteString("`marina config validate` reports every problem of every layer in one run, exit 2: the file's, the\n")
	b.WriteString("environment's, the `--set` flags', and what each enabled plugin says about its own `config:`, even\n")
	b.WriteString("when the rest has problems (the built-ins check theirs inside marina; an installed plugin is started\n")
	b.WriteString("only when that binary has not checked that exact config before: its answers are cached under\n")
	b.WriteString("`~/.marina/cache/validate`). Each problem names its source: the\n")
	b.WriteString("file and line (a plugin's field at the line of that key, or of its nearest parent written), the\n")
	b.WriteString("`MARINA_*` variable or the `--set` flag. The file's problems come first, in line order.\n\n")
	def := Default()
	for _, section := range schema().Children {
		fmt.Fprintf(&b, "## `%s`\n\n%s\n\n", section.Key, section.Doc)
		b.WriteString("| Key | Type | Default | Environment | Description |\n|---|---|---|---|---|\n")
		var rows func(f *field, prefix string)
		rows = func(f *field, prefix string) {
			for _, c := range f.Children {
				path := prefix + "." + c.Key
				switch c.kind() {
				case kindStruct:
					rows(c, path)
					continue
				case kindStructList, kindStructMap:
					fmt.Fprintf(&b, "| `%s` | %s | %s | | %s |\n", path, docType(c), docDefault(def, c, prefix == section.Key), escape(c.Doc))
					rows(c.Elem, path+elemSuffix(c))
					continue
				}
				env := ""
				if prefix == section.Key && c.kind() == kindScalar && !strings.Contains(path, "[]") && !strings.Contains(path, "<") {
					env = "`" + envName(path) + "`"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", path, docType(c), docDefault(def, c, prefix == section.Key && env != ""), env, escape(c.Doc))
			}
		}
		if section.kind() == kindStructMap {
			fmt.Fprintf(&b, "| `%s.<name>` | mapping | %s | | %s |\n", section.Key, "built-ins: "+builtinDefaults(), escape(section.Doc))
			rows(section.Elem, section.Key+".<name>")
		} else {
			rows(section, section.Key)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Default mirrors\n\n| Name | Port | Upstream |\n|---|---|---|\n")
	for _, m := range DefaultMirrors() {
		fmt.Fprintf(&b, "| `%s` | %d | %s |\n", m.Name, m.Port, m.RemoteURL)
	}
	return b.String()
}

func elemSuffix(f *field) string {
	if f.kind() == kindStructList {
		return "[]"
	}
	return ".<name>"
}

func docType(f *field) string {
	switch f.kind() {
	case kindStructList:
		return "list"
	case kindScalarList:
		return "list of strings"
	case kindStructMap, kindFreeMap:
		return "mapping"
	}
	if f.Type == durationType {
		return "duration"
	}
	switch f.Type.Kind() {
	case reflect.Int:
		return "integer"
	case reflect.Bool:
		return "boolean"
	}
	return "string"
}

func docDefault(def *Config, f *field, addressable bool) string {
	if !addressable {
		return ""
	}
	v := valueAt(def, f)
	switch x := v.(type) {
	case string:
		if x == "" {
			return "(empty)"
		}
		return "`" + x + "`"
	case []Mirror:
		return "the default mirrors below"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice && rv.Len() == 0 {
		return "`[]`"
	}
	return fmt.Sprintf("`%v`", v)
}

func escape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// builtinDefaults lists the built-in plugins with their default state.
func builtinDefaults() string {
	var on, off []string
	for _, b := range BuiltinPlugins {
		if slices.Contains(OptInBuiltins, b) {
			off = append(off, b)
		} else {
			on = append(on, b)
		}
	}
	return strings.Join(on, ", ") + " (enabled); " + strings.Join(off, ", ") + " (disabled: opt-in)"
}
