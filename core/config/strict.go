package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// strictFile is the result of checking a config file against the schema.
type strictFile struct {
	// clean is the document with every offending key removed, so the rest can
	// still be decoded and validated (all problems are reported at once).
	clean *yaml.Node
	// lines maps key paths present in the file to "file:line:col".
	lines    map[string]string
	problems []Problem
}

// checkFile parses data strictly: unknown keys (with a suggestion), duplicate
// keys and values of the wrong type are problems naming the file and line.
func checkFile(name string, data []byte) *strictFile {
	sf := &strictFile{lines: map[string]string{}}
	doc, p := parseDocument(name, data)
	if p != nil {
		sf.problems = append(sf.problems, *p)
		return sf
	}
	if doc.Kind == 0 || len(doc.Content) == 0 { // empty file
		return sf
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return sf
	}
	c := &checker{file: name, sf: sf}
	if c.walk(root, schema(), "") {
		sf.clean = root
	}
	return sf
}

// parseDocument parses the one YAML document of a config file (Kind 0 when
// the file holds none). A second document after "---" is a problem at its
// line, not silently ignored; so is a syntax error.
func parseDocument(name string, data []byte) (doc *yaml.Node, p *Problem) {
	defer func() { // the YAML library must never take the process down
		if r := recover(); r != nil {
			doc, p = nil, &Problem{Path: "(file)", Message: fmt.Sprintf("the YAML parser failed (%v); check the file's syntax", r), Where: name}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = &yaml.Node{}
	switch err := dec.Decode(doc); {
	case errors.Is(err, io.EOF):
		return &yaml.Node{}, nil
	case err != nil:
		return nil, &Problem{Path: "(file)", Message: clip(fmt.Sprintf("not valid YAML: %v", err), maxMessage), Where: name}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, &Problem{Path: "(file)", Message: clip(fmt.Sprintf("not valid YAML: %v", err), maxMessage), Where: name}
	case !isEmptyDocument(&extra):
		return nil, &Problem{Path: "(file)", Message: fmt.Sprintf("a second YAML document starts at line %d ('---'); a config file holds one document: merge its keys into the first one or remove it", extra.Line), Where: fmt.Sprintf("%s:%d:%d", name, extra.Line, extra.Column)}
	}
	return doc, nil
}

// isEmptyDocument reports whether a document holds nothing (a trailing
// "---", or only comments).
func isEmptyDocument(doc *yaml.Node) bool {
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return true
	}
	r := doc.Content[0]
	return r.Kind == yaml.ScalarNode && r.Tag == "!!null"
}

type checker struct {
	file   string
	sf     *strictFile
	visits int // nodes visited, bounded against alias bombs
}

// maxVisits bounds the nodes a config document may expand to (aliases included).
const maxVisits = 100000

func (c *checker) where(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d:%d", c.file, n.Line, n.Column)
}

// line records where path is written, unless it already is (through an
// alias the same node can be reached again).
func (c *checker) line(path string, n *yaml.Node) {
	if _, ok := c.sf.lines[path]; !ok && len(c.sf.lines) < maxVisits {
		c.sf.lines[path] = c.where(n)
	}
}

func (c *checker) problem(path string, n *yaml.Node, format string, args ...any) {
	if path == "" {
		path = "(top level)"
	}
	c.sf.problems = append(c.sf.problems, Problem{Path: path, Message: fmt.Sprintf(format, clipArgs(args)...), Where: c.where(n)})
}

// visit counts a node against maxVisits. Past the limit it reports the
// problem once, at the first node not read, and returns false: the rest is
// dropped from the clean document, and the file is invalid, never silently
// shortened.
func (c *checker) visit(n *yaml.Node, path string) bool {
	if c.visits++; c.visits <= maxVisits {
		return true
	}
	if c.visits == maxVisits+1 {
		c.problem(path, n, "the file expands to more than %d YAML nodes (aliases, or a very large section); nothing from here on is read: make it smaller", maxVisits)
	}
	return false
}

// walk checks node n against schema f at path. It returns false when n is
// unusable and must be dropped from the clean document.
func (c *checker) walk(n *yaml.Node, f *field, path string) bool {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !c.visit(n, path) {
		return false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return true // "key:" with no value is the same as leaving it out
	}
	switch f.kind() {
	case kindStruct:
		return c.mapping(n, path, func(key *yaml.Node, val *yaml.Node) bool {
			child := f.child(key.Value)
			if child == nil {
				hint := suggest(key.Value, f)
				if hint != "" {
					hint = "; " + hint
				}
				c.problem(joinPath(path, key.Value), key, "unknown key %q%s", key.Value, hint)
				return false
			}
			c.sf.lines[child.Path] = c.where(key)
			return c.walk(val, child, child.Path)
		})
	case kindStructMap:
		return c.mapping(n, path, func(key *yaml.Node, val *yaml.Node) bool {
			p := joinPath(path, key.Value)
			if !isPluginName(key.Value) {
				c.problem(p, key, "%q is not a valid plugin name: lower-case letters, digits and '-', starting with a letter", key.Value)
				return false
			}
			c.sf.lines[p] = c.where(key)
			return c.walkElem(val, f.Elem, p)
		})
	case kindStructList:
		if n.Kind != yaml.SequenceNode {
			c.problem(path, n, "must be a list, got %s", describe(n))
			return false
		}
		kept := n.Content[:0]
		for i, item := range n.Content {
			if c.walkElem(item, f.Elem, fmt.Sprintf("%s[%d]", path, i)) {
				kept = append(kept, item)
			}
		}
		n.Content = kept
		return true
	case kindScalarList:
		if n.Kind != yaml.SequenceNode {
			c.problem(path, n, "must be a list, got %s", describe(n))
			return false
		}
		ok := true
		for i, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				c.problem(fmt.Sprintf("%s[%d]", path, i), item, "must be a string, got %s", describe(item))
				ok = false
			}
		}
		return ok
	case kindFreeMap:
		if n.Kind != yaml.MappingNode {
			c.problem(path, n, "must be a mapping, got %s", describe(n))
			return false
		}
		return c.freeForm(n, path)
	default:
		if err := checkScalar(n, f.Type); err != nil {
			c.problem(path, n, "%v", err)
			return false
		}
		return true
	}
}

// freeForm checks a free-form value (a plugin's config, which the plugin
// validates itself) for what its Go type cannot hold: a mapping key that is
// not a plain string (a list or a mapping used as a key).
func (c *checker) freeForm(n *yaml.Node, path string) bool {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !c.visit(n, path) {
		return false
	}
	ok := true
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if key.Kind == yaml.AliasNode {
				key = key.Alias
			}
			if key.Kind != yaml.ScalarNode {
				c.problem(path, key, "keys must be plain strings, got %s", describe(key))
				ok = false
				continue
			}
			p := joinPath(path, key.Value)
			c.line(p, key) // a plugin's verdict on this key is reported at this line
			ok = c.freeForm(val, p) && ok
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			c.line(p, item)
			ok = c.freeForm(item, p) && ok
		}
	}
	return ok
}

// walkElem checks an element of a map or list of structs: its fields are
// checked like a section, with paths relative to the element.
func (c *checker) walkElem(n *yaml.Node, elem *field, path string) bool {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !c.visit(n, path) {
		return false
	}
	return c.mapping(n, path, func(key, val *yaml.Node) bool {
		child := elem.child(key.Value)
		if child == nil {
			hint := suggest(key.Value, elem)
			if hint != "" {
				hint = "; " + hint
			}
			c.problem(path+"."+key.Value, key, "unknown key %q%s", key.Value, hint)
			return false
		}
		p := path + "." + key.Value
		c.sf.lines[p] = c.where(key)
		return c.walk(val, child, p)
	})
}

// mapping iterates the pairs of a mapping node, dropping duplicates and pairs
// the visitor rejects. A non-mapping node is a problem.
func (c *checker) mapping(n *yaml.Node, path string, visit func(key, val *yaml.Node) bool) bool {
	if n.Kind != yaml.MappingNode {
		c.problem(path, n, "must be a mapping of keys, got %s", describe(n))
		return false
	}
	seen := map[string]int{}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			c.problem(path, key, "keys must be plain strings")
			continue
		}
		if first, dup := seen[key.Value]; dup {
			c.problem(joinPath(path, key.Value), key, "duplicate key %q (first set on line %d); keep one", key.Value, first)
			continue
		}
		seen[key.Value] = key.Line
		if visit(key, val) {
			kept = append(kept, key, val)
		}
	}
	n.Content = kept
	return true
}

// checkScalar reports whether a scalar node can be decoded as type t.
func checkScalar(n *yaml.Node, t reflect.Type) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be %s, got %s", typeName(t), describe(n))
	}
	return parseScalar(n.Value, n.Tag, t)
}

// parseScalar checks that the text s (YAML tag tag, "" when not from YAML) is a valid t.
func parseScalar(s, tag string, t reflect.Type) error {
	switch {
	case t == durationType:
		if _, err := time.ParseDuration(s); err != nil || (tag != "" && tag != "!!str") {
			return fmt.Errorf("must be %s, got %q", typeName(t), excerpt(s))
		}
	case t.Kind() == reflect.Int:
		if _, err := strconv.Atoi(s); err != nil || (tag != "" && tag != "!!int") {
			return fmt.Errorf("must be %s, got %q", typeName(t), excerpt(s))
		}
	case t.Kind() == reflect.Bool:
		if _, err := strconv.ParseBool(s); err != nil || (tag != "" && tag != "!!bool") {
			return fmt.Errorf("must be %s, got %q", typeName(t), excerpt(s))
		}
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", excerpt(n.Value))
	default:
		return "something else"
	}
}
