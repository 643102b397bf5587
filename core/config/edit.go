package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/userfile"
)

// SetPluginEnabled sets plugins.<name>.enabled in the config file at path,
// keeping the file's comments and layout. A missing file is created (0600)
// holding just that setting. The edited file must still validate; otherwise
// nothing is written and the problems are returned. Callers hold the process lock.
func SetPluginEnabled(path, name string, enabled bool) error {
	if !isPluginName(name) {
		return &ValidationError{Problems: []Problem{{Path: "plugins." + name, Message: fmt.Sprintf("%q is not a valid plugin name: lower-case letters, digits and '-', starting with a letter", name)}}}
	}
	data, err := userfile.ReadFile(path, userfile.MaxSize)
	var refused *userfile.Error
	switch {
	case errors.As(err, &refused):
		return &ValidationError{File: path, Problems: []Problem{{Path: "(file)", Message: "the config file " + refused.Reason, Where: path}}}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// One document only: writing back the first of two would drop the second.
	parsed, p := parseDocument(path, data)
	if p != nil {
		return &ValidationError{File: path, Problems: []Problem{*p}}
	}
	doc := *parsed
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		*root = yaml.Node{Kind: yaml.MappingNode}
	}
	if root.Kind != yaml.MappingNode {
		return &ValidationError{File: path, Problems: []Problem{{Path: "(top level)", Message: "must be a mapping of keys"}}}
	}
	value := "false"
	if enabled {
		value = "true"
	}
	// The user's file is edited as text where the change is one value or
	// a few inserted lines, so every other line stays as written (flow
	// lists, quoting, indentation); only a layout that edit cannot handle
	// is written back from the parsed document.
	out, ok := editEnabled(data, root, name, value)
	if !ok {
		plugins := mappingChild(root, "plugins")
		entry := mappingChild(plugins, name)
		setScalar(entry, "enabled", value, "!!bool")
		if out, err = encodeNode(&doc); err != nil {
			return err
		}
	}
	// Validate the result before it replaces the file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".marina-config-check-*.yaml")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			tmp, err = os.CreateTemp(filepath.Dir(path), ".marina-config-check-*.yaml")
		}
		if err != nil {
			return err
		}
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	tmp.Close()
	if _, err := Load(LoadOptions{Path: tmp.Name()}); err != nil {
		var verr *ValidationError
		if errors.As(err, &verr) {
			verr.File = path
			return fmt.Errorf("%s was not changed: %w", path, verr)
		}
		return err
	}
	return atomicfile.WriteFile(path, out, 0o600)
}

// mappingChild returns the mapping under key in m, creating it (or replacing
// a null value) when needed.
func mappingChild(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				*v = yaml.Node{Kind: yaml.MappingNode}
			}
			return v
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

func setScalar(m *yaml.Node, key, value, tag string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1].Kind, m.Content[i+1].Value, m.Content[i+1].Tag = yaml.ScalarNode, value, tag
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &yaml.Node{Kind: yaml.ScalarNode, Value: value, Tag: tag})
}

// editEnabled sets plugins.<name>.enabled to value (true or false) in data,
// whose parsed document is root (a mapping), by editing the text: the
// value replaced in place, or the missing lines inserted in the style
// around them. It returns false when the layout is one it does not edit
// (flow mappings, tabs, a key on a line with something before it), and
// checks that the result parses to the same document with only that
// value changed.
func editEnabled(data []byte, root *yaml.Node, name, value string) ([]byte, bool) {
	if root.Style&yaml.FlowStyle != 0 || bytes.ContainsRune(data, '\t') || bytes.ContainsRune(data, '\r') {
		return nil, false
	}
	lines := strings.SplitAfter(string(data), "\n")
	// lineStart is the byte offset of 1-based line n (len(data) past the end).
	lineStart := func(n int) int {
		off := 0
		for i := 0; i < n-1 && i < len(lines); i++ {
			off += len(lines[i])
		}
		return off
	}
	// startsLine: node n is the first thing on its line.
	startsLine := func(n *yaml.Node) bool {
		if n.Line < 1 || n.Line > len(lines) || n.Column < 1 {
			return false
		}
		l := lines[n.Line-1]
		return n.Column-1 <= len(l) && strings.TrimLeft(l[:n.Column-1], " ") == ""
	}
	insertAt := func(off int, text string) []byte {
		out := make([]byte, 0, len(data)+len(text)+1)
		out = append(out, data[:off]...)
		if off > 0 && data[off-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, text...)
		return append(out, data[off:]...)
	}
	var out []byte
	pluginsKey, plugins := lookup(root, "plugins")
	switch {
	case plugins == nil:
		// No plugins section: append one.
		out = insertAt(len(data), "plugins:\n  "+name+":\n    enabled: "+value+"\n")
	case plugins.Kind != yaml.MappingNode:
		return nil, false
	default:
		_, entry := lookup(plugins, name)
		_, v := lookup(entry, "enabled")
		switch {
		case v != nil:
			// The value is replaced where it is written, in any style.
			if v.Kind != yaml.ScalarNode || v.Line < 1 || v.Line > len(lines) || v.Column < 1 || v.Column-1 > len(lines[v.Line-1]) {
				return nil, false
			}
			token := v.Value
			switch v.Style {
			case 0:
			case yaml.DoubleQuotedStyle:
				token = `"` + v.Value + `"`
			case yaml.SingleQuotedStyle:
				token = "'" + v.Value + "'"
			default:
				return nil, false
			}
			if !strings.HasPrefix(lines[v.Line-1][v.Column-1:], token) {
				return nil, false
			}
			off := lineStart(v.Line) + v.Column - 1
			out = append(append(append([]byte{}, data[:off]...), value...), data[off+len(token):]...)
		case entry != nil:
			// An entry without the key: a line before its first key.
			if entry.Kind != yaml.MappingNode || entry.Style&yaml.FlowStyle != 0 || len(entry.Content) == 0 || !startsLine(entry.Content[0]) {
				return nil, false
			}
			first := entry.Content[0]
			out = insertAt(lineStart(first.Line), strings.Repeat(" ", first.Column-1)+"enabled: "+value+"\n")
		default:
			// A new entry, right after the plugins: line (no comment
			// above the first entry ends up above this one), indented as
			// the entries are.
			if plugins.Style&yaml.FlowStyle != 0 || len(plugins.Content) == 0 || !startsLine(pluginsKey) || !startsLine(plugins.Content[0]) {
				return nil, false
			}
			indent := strings.Repeat(" ", plugins.Content[0].Column-1)
			step := strings.Repeat(" ", plugins.Content[0].Column-pluginsKey.Column)
			out = insertAt(lineStart(pluginsKey.Line+1), indent+name+":\n"+indent+step+"enabled: "+value+"\n")
		}
	}
	// The edit must mean exactly the change.
	want, _ := parseDocument("", data)
	got, p := parseDocument("", out)
	if p != nil || got.Kind == 0 || want == nil {
		return nil, false
	}
	if want.Kind == 0 {
		want = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	var wantV, gotV map[string]any
	if want.Decode(&wantV) != nil || got.Decode(&gotV) != nil {
		return nil, false
	}
	if wantV == nil {
		wantV = map[string]any{}
	}
	ps, _ := wantV["plugins"].(map[string]any)
	if ps == nil {
		ps = map[string]any{}
		wantV["plugins"] = ps
	}
	e, _ := ps[name].(map[string]any)
	if e == nil {
		e = map[string]any{}
		ps[name] = e
	}
	e["enabled"] = value == "true"
	if !reflect.DeepEqual(wantV, gotV) {
		return nil, false
	}
	return out, true
}

// lookup returns the key and value nodes of key in mapping m, or nils.
func lookup(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}
