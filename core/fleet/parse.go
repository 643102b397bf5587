package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/userfile"
)

// The keys each part of a manifest accepts.
var (
	topKeys      = []string{"apiVersion", "kind", "metadata", "spec"}
	metadataKeys = []string{"name"}
	specKeys     = []string{"defaults", "maxParallel", "strategy", "clusters"}
	optionKeys   = []string{"nodeVersion", "workers", "region", "zone", "registries", "plugins", "labels"}
	entryKeys    = append([]string{"name", "num", "dependsOn"}, optionKeys...)
	pluginKeys   = []string{"enabled", "config"}
)

// homes says where a key belongs when it is written in the wrong place.
var homes = sync.OnceValue(func() map[string]string {
	h := map[string]string{
		"apiversion":  "it belongs at the top level",
		"kind":        "it belongs at the top level",
		"metadata":    "it belongs at the top level",
		"spec":        "it belongs at the top level",
		"maxparallel": "it belongs under spec",
		"strategy":    "it belongs under spec",
		"clusters":    "it belongs under spec",
		"defaults":    "it belongs under spec",
		"num":         "set it on an entry of spec.clusters (slots cannot have a default)",
		"dependson":   "set it on an entry of spec.clusters",
		"enabled":     "it belongs under plugins.<plugin name>",
		"config":      "it belongs under plugins.<plugin name>",
	}
	for _, k := range optionKeys {
		h[strings.ToLower(k)] = "set it under spec.defaults (every cluster) or on an entry of spec.clusters"
	}
	return h
})

// maxVisits bounds the nodes a manifest may expand to, aliases included.
const maxVisits = 100000

// MaxManifestSize is the largest manifest Parse reads (userfile.MaxSize,
// the limit for every YAML file marina reads).
const MaxManifestSize = userfile.MaxSize

// Parse decodes a Fleet manifest strictly: one YAML document; unknown keys
// (with a "did you mean"), duplicate keys, merge keys and wrongly typed
// values are errors; apiVersion and kind must be exactly marina.dev/v1alpha1
// and Fleet. Every problem is reported at once, each with its key path and
// line:column, in an *Error. source names the manifest in messages.
//
// Parse checks the shape only: call Validate for names, dependencies,
// slots, labels, mirrors and plugins.
func Parse(data []byte, source string) (f *Fleet, err error) {
	f = &Fleet{Source: source, pos: map[string]pos{}}
	p := &parser{f: f}
	p.ps.pos = f.pos
	if len(data) > MaxManifestSize {
		// Callers read manifests through userfile, which stops sooner; this
		// keeps Parse itself from building millions of nodes.
		p.ps.list = append(p.ps.list, Problem{Path: "(document)", Message: fmt.Sprintf("the manifest is %d bytes, more than %s; is it the right file?", len(data), userfile.Size(MaxManifestSize)), Line: 1, Column: 1})
		return nil, p.ps.err(source, "parse")
	}
	root, ok := p.document(data)
	if ok {
		p.top(root)
	}
	if err := p.ps.err(source, "parse"); err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	f      *Fleet
	ps     problems
	visits int
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line (\d+)`) })

// document reads the one YAML document of data and returns its root.
func (p *parser) document(data []byte) (root *yaml.Node, ok bool) {
	defer func() { // the YAML library must never take the process down
		if r := recover(); r != nil {
			p.ps.list = append(p.ps.list, Problem{Path: "(document)", Message: fmt.Sprintf("the YAML parser failed (%v); check the file's syntax", r), Line: 1, Column: 1})
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || (err == nil && isEmpty(&doc)) {
		p.ps.list = append(p.ps.list, Problem{Path: "(document)", Message: "the manifest is empty; start it with apiVersion: " + APIVersion + " and kind: " + Kind, Line: 1, Column: 1})
		return nil, false
	}
	if err != nil {
		p.syntax(err)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		p.syntax(err)
		return nil, false
	case !isEmpty(&extra):
		p.ps.list = append(p.ps.list, Problem{Path: "(document)", Message: "found a second YAML document after '---'; a manifest holds one Fleet: put each fleet in its own file", Line: extra.Line, Column: extra.Column})
		return nil, false
	}
	return doc.Content[0], true
}

func isEmpty(doc *yaml.Node) bool {
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return true
	}
	r := doc.Content[0]
	return r.Kind == yaml.ScalarNode && r.Tag == "!!null"
}

// syntax records a YAML syntax error; the library names the line only.
func (p *parser) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	pr := Problem{Path: "(document)", Line: 1}
	if m := yamlLine().FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
			pr.Line = n
			msg = strings.TrimPrefix(msg, m[0]+": ")
		}
	}
	pr.Message = "not valid YAML: " + msg
	p.ps.list = append(p.ps.list, pr)
}

// at records a problem located at node n.
func (p *parser) at(path string, n *yaml.Node, format string, args ...any) {
	if path == "" {
		path = "(document)"
	}
	p.ps.list = append(p.ps.list, Problem{Path: clipText(path, 200), Message: fmt.Sprintf(format, args...), Line: n.Line, Column: n.Column})
}

// echo is the most of a key or value a message repeats: they can be
// megabytes long, and a problem never echoes one whole.
const echo = 64

// clipText cuts s to at most n bytes, on a character boundary, saying how
// long it was.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// deref follows an alias and counts the visit; nil means the document is
// too large (already reported once).
func (p *parser) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	if p.visits++; p.visits > maxVisits {
		if p.visits == maxVisits+1 {
			p.at("", n, "the manifest expands to more than %d YAML nodes (aliases?); simplify it", maxVisits)
		}
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping walks the pairs of a mapping node. With known != nil, keys must be
// among known (an unknown one is a problem with a suggestion). visit is not
// called for null values: "key:" alone means the key is not set. It returns
// false when n is not a mapping.
func (p *parser) mapping(n *yaml.Node, path string, known []string, visit func(key string, val *yaml.Node)) bool {
	return p.pairs(n, path, known, false, visit)
}

// pairs is mapping; with nulls, visit is called for null values too.
func (p *parser) pairs(n *yaml.Node, path string, known []string, nulls bool, visit func(key string, val *yaml.Node)) bool {
	if n.Kind != yaml.MappingNode {
		p.at(path, n, "must be a mapping (key: value), got %s", describe(n))
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := p.deref(n.Content[i])
		if k == nil {
			return true
		}
		if k.Kind != yaml.ScalarNode {
			p.at(path, k, "keys must be plain strings, got %s", describe(k))
			continue
		}
		key := k.Value
		kp := join(path, key)
		if key == "<<" && k.Tag == "!!merge" {
			p.at(path, k, "YAML merge keys (<<) are not supported; write the keys out, or use spec.defaults for shared settings")
			continue
		}
		if first, dup := seen[key]; dup {
			p.at(kp, k, "duplicate key %q (first set on line %d); keep one", clipText(key, echo), first)
			continue
		}
		seen[key] = k.Line
		if known != nil && !contains(known, key) {
			p.at(kp, k, "unknown key %q%s", clipText(key, echo), keyHint(key, known))
			continue
		}
		p.f.pos[kp] = pos{k.Line, k.Column}
		v := p.deref(n.Content[i+1])
		if v == nil {
			return true
		}
		if known != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
			// a schema key's scalar is what Validate complains about; in a
			// free map (labels) the key is
			p.f.pos[kp] = pos{v.Line, v.Column}
		}
		if isNull(v) && !nulls {
			continue
		}
		visit(key, v)
	}
	return true
}

// keyHint suggests a sibling key, or says where key belongs, or lists the
// valid keys.
func keyHint(key string, known []string) string {
	if s := suggest(key, known); s != "" {
		return s
	}
	if h, ok := homes()[strings.ToLower(key)]; ok {
		return "; " + h
	}
	return "; valid keys here: " + strings.Join(known, ", ")
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", clipText(n.Value, 40))
	default:
		return "something else"
	}
}

func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.at(path, n, "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) int(n *yaml.Node, path string) (int, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if v, err := strconv.Atoi(n.Value); err == nil {
			return v, true
		}
	}
	p.at(path, n, "must be a whole number such as 3, got %s", describe(n))
	return 0, false
}

func (p *parser) bool(n *yaml.Node, path string) (bool, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		if v, err := strconv.ParseBool(n.Value); err == nil {
			return v, true
		}
	}
	p.at(path, n, "must be true or false, got %s", describe(n))
	return false, false
}

// strList decodes a list of strings, recording each item's position.
func (p *parser) strList(n *yaml.Node, path string) ([]string, bool) {
	if n.Kind != yaml.SequenceNode {
		p.at(path, n, "must be a list of names such as [a, b], got %s", describe(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if item = p.deref(item); item == nil {
			return nil, false
		}
		p.f.pos[ip] = pos{item.Line, item.Column}
		s, good := p.str(item, ip)
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

func (p *parser) top(root *yaml.Node) {
	if root = p.deref(root); root == nil {
		return
	}
	p.f.pos[""] = pos{root.Line, root.Column}
	var haveAPI, haveKind bool
	ok := p.mapping(root, "", topKeys, func(key string, v *yaml.Node) {
		switch key {
		case "apiVersion":
			haveAPI = true
			if s, ok := p.str(v, key); ok {
				p.f.APIVersion = s
				if s != APIVersion {
					hint := "; set apiVersion: " + APIVersion
					if strings.HasSuffix(s, "/v1alpha1") && strings.Contains(s, "klimax") {
						hint += " (this looks like a klimax manifest: only the apiVersion changes)"
					}
					p.at(key, v, "unsupported apiVersion %q%s", clipText(s, echo), hint)
				}
			}
		case "kind":
			haveKind = true
			if s, ok := p.str(v, key); ok {
				p.f.Kind = s
				if s != Kind {
					p.at(key, v, "kind must be %q, got %q%s", Kind, clipText(s, echo), suggest(s, []string{Kind}))
				}
			}
		case "metadata":
			p.mapping(v, key, metadataKeys, func(k string, v *yaml.Node) {
				if s, ok := p.str(v, "metadata.name"); ok {
					p.f.Metadata.Name = s
				}
			})
		case "spec":
			p.spec(v)
		}
	})
	if !ok {
		return
	}
	if !haveAPI {
		p.at("apiVersion", root, "apiVersion is required; add apiVersion: %s", APIVersion)
	}
	if !haveKind {
		p.at("kind", root, "kind is required; add kind: %s", Kind)
	}
}

func (p *parser) spec(n *yaml.Node) {
	s := &p.f.Spec
	p.mapping(n, "spec", specKeys, func(key string, v *yaml.Node) {
		path := "spec." + key
		switch key {
		case "defaults":
			p.options(v, path, &s.Defaults, optionKeys)
		case "maxParallel":
			s.MaxParallel, _ = p.int(v, path)
		case "strategy":
			if str, ok := p.str(v, path); ok {
				s.Strategy = Strategy(str)
			}
		case "clusters":
			p.clusters(v, path)
		}
	})
}

func (p *parser) clusters(n *yaml.Node, path string) {
	if n.Kind != yaml.SequenceNode {
		p.at(path, n, "must be a list of cluster names or entries, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if item = p.deref(item); item == nil {
			return
		}
		p.f.pos[ip] = pos{item.Line, item.Column}
		var e Entry
		switch {
		case item.Kind == yaml.ScalarNode && !isNull(item):
			e.Name = item.Value
			p.f.pos[ip+".name"] = pos{item.Line, item.Column}
		case item.Kind == yaml.MappingNode:
			p.entry(item, ip, &e)
		default:
			p.at(ip, item, "must be a cluster name or a mapping with name:, got %s", describeItem(item))
			continue
		}
		p.f.Spec.Clusters = append(p.f.Spec.Clusters, e)
	}
}

func describeItem(n *yaml.Node) string {
	if isNull(n) {
		return "an empty item"
	}
	return describe(n)
}

func (p *parser) entry(n *yaml.Node, path string, e *Entry) {
	p.options(n, path, &e.Options, entryKeys, func(key string, v *yaml.Node) {
		kp := path + "." + key
		switch key {
		case "name":
			e.Name, _ = p.str(v, kp)
		case "num":
			e.Num, e.numSet = p.int(v, kp)
		case "dependsOn":
			e.DependsOn, _ = p.strList(v, kp)
		}
	})
}

// options decodes the per-cluster option keys of n into o; other keys of
// known go to extra.
func (p *parser) options(n *yaml.Node, path string, o *Options, known []string, extra ...func(string, *yaml.Node)) {
	p.mapping(n, path, known, func(key string, v *yaml.Node) {
		kp := path + "." + key
		switch key {
		case "nodeVersion":
			o.NodeVersion, _ = p.str(v, kp)
		case "workers":
			if w, ok := p.int(v, kp); ok {
				o.Workers = &w
			}
		case "region":
			o.Region, _ = p.str(v, kp)
		case "zone":
			o.Zone, _ = p.str(v, kp)
		case "registries":
			o.Registries = p.registries(v, kp)
		case "plugins":
			o.Plugins = p.plugins(v, kp)
		case "labels":
			o.Labels = p.labels(v, kp)
		default:
			for _, f := range extra {
				f(key, v)
			}
		}
	})
}

func (p *parser) registries(n *yaml.Node, path string) *Registries {
	const want = `must be "all", "none" or a list of mirror names such as [docker-io, ghcr-io]`
	switch n.Kind {
	case yaml.ScalarNode:
		switch RegistryMode(n.Value) {
		case RegistriesAll, RegistriesNone:
			return &Registries{Mode: RegistryMode(n.Value)}
		}
		p.at(path, n, "%s, got %s%s", want, describe(n), suggest(n.Value, []string{"all", "none"}))
		return nil
	case yaml.SequenceNode:
		names, ok := p.strList(n, path)
		if !ok {
			return nil
		}
		if len(names) == 0 {
			return &Registries{Mode: RegistriesNone}
		}
		return &Registries{Mode: RegistriesSubset, Names: names}
	}
	p.at(path, n, "%s, got %s", want, describe(n))
	return nil
}

func (p *parser) labels(n *yaml.Node, path string) map[string]string {
	out := map[string]string{}
	// "key:" with no value is an empty label value, which Kubernetes allows.
	p.pairs(n, path, nil, true, func(key string, v *yaml.Node) {
		if isNull(v) {
			out[key] = ""
		} else if s, ok := p.str(v, path+"."+key); ok {
			out[key] = s
		}
	})
	return out
}

func (p *parser) plugins(n *yaml.Node, path string) map[string]PluginSetting {
	out := map[string]PluginSetting{}
	p.mapping(n, path, nil, func(name string, v *yaml.Node) {
		pp := path + "." + name
		var s PluginSetting
		if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
			p.at(pp, v, "must be a mapping such as {enabled: %s}, got %s", v.Value, describe(v))
			return
		}
		p.mapping(v, pp, pluginKeys, func(key string, v *yaml.Node) {
			kp := pp + "." + key
			switch key {
			case "enabled":
				if b, ok := p.bool(v, kp); ok {
					s.Enabled = &b
				}
			case "config":
				if v.Kind != yaml.MappingNode {
					p.at(kp, v, "must be a mapping of the plugin's settings, got %s", describe(v))
					return
				}
				if m, ok := p.value(v, kp).(map[string]any); ok {
					s.Config = m
				}
			}
		})
		out[name] = s
	})
	return out
}

// value converts free-form plugin config to JSON-compatible Go values:
// map[string]any, []any, string, bool, int/int64/uint64, float64, nil.
func (p *parser) value(n *yaml.Node, path string) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		// "key:" in plugin config is an explicit null, passed on as such.
		p.pairs(n, path, nil, true, func(key string, v *yaml.Node) {
			m[key] = p.value(v, path+"."+key)
		})
		return m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			if item = p.deref(item); item == nil {
				return l
			}
			l = append(l, p.value(item, fmt.Sprintf("%s[%d]", path, i)))
		}
		return l
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			p.at(path, n, "cannot read %s: %v", describe(n), err)
			return nil
		}
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				p.at(path, n, "%s is not a finite number; plugin config must be JSON-compatible", describe(n))
				return nil
			}
		case nil, string, bool, int, int64, uint64:
		default: // timestamps, binary: pass the text through
			return n.Value
		}
		return v
	}
	p.at(path, n, "unsupported YAML value %s", describe(n))
	return nil
}
