package config

import (
	"bytes"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// viaNodeEncode is what AnnotatedYAML did before valueNode: yaml.v3's
// Node.Encode (emit, parse back), then the same annotation and emitter.
// "" when Node.Encode cannot be compared: it fails, or it read back other
// values than it was given (yaml.v3 cannot read back what it writes for
// some strings: a line break in a map key, a block scalar with an
// indentation indicator in a sequence item; see GuardYAML).
func viaNodeEncode(t testing.TB, v any) string {
	t.Helper()
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return ""
	}
	vn, err := valueNode(reflect.ValueOf(v).Elem())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scalars(&n, nil), scalars(vn, nil)) {
		return ""
	}
	annotate(&n, "", func(p string) (string, bool) { return "src " + p, true })
	b, err := encodeNode(&n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// viaValueNode is AnnotatedYAML's way. What it writes must read back as
// the values it was given: every scalar, in order.
func viaValueNode(t testing.TB, v any) string {
	t.Helper()
	n, err := valueNode(reflect.ValueOf(v).Elem())
	if err != nil {
		t.Fatal(err)
	}
	want := scalars(n, nil)
	annotate(n, "", func(p string) (string, bool) { return "src " + p, true })
	b, err := encodeNode(n)
	if err != nil {
		t.Fatal(err)
	}
	var back yaml.Node
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatalf("what valueNode wrote does not parse: %v\n%s", err, b)
	}
	if got := scalars(&back, nil); !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("what valueNode wrote reads back %q where it was given %q:\n%s", got[i], want[i], b)
			}
		}
		t.Fatalf("what valueNode wrote reads back %d scalars, was given %d:\n%s", len(got), len(want), b)
	}
	return string(b)
}

// scalars lists n's scalars in document order, each as its resolved tag
// and value.
func scalars(n *yaml.Node, out []string) []string {
	if n.Kind == yaml.ScalarNode {
		return append(out, n.ShortTag()+" "+n.Value)
	}
	for _, c := range n.Content {
		out = scalars(c, out)
	}
	return out
}

// tricky are strings yaml.v3 styles each its own way.
var tricky = []string{
	"", " ", "a", "true", "True", "false", "null", "~", "yes", "No", "on", "OFF", "y", "1", "-1", "1.5", "1e3", "0x1F", "0o17",
	".inf", "-.Inf", ".nan", "1:20", "+1:20:30", "-1_0:5", "1:60", "1:5.5", "190:20:30.15", "1::2", "12:3x", "a: b", "#x", "x #y",
	"- x", "? x", "*a", "&a", "!a", "%a", "@a", "`a", "'a'", "\"a\"", "a\nb", "a\n", "\nb", " a", "a ", "\ta", "é", "日本",
	"{a}", "[a]", "a,b", "|", ">", "---", "...", "2026-12-06", "10m0s", strings.Repeat("x", 200),
	// yaml.v3 writes these as blocks with an indentation indicator it
	// misreads in a sequence item: GuardYAML double-quotes them.
	"\n#0", "\n\n#0", " a\nb", "\t\nx", "\n", " #\n#",
}

func trickyConfig(s string, i int) *Config {
	c := Default()
	c.VM.Name, c.VM.Memory, c.Network.BridgeCIDR, c.DNS.Zone = s, s+"x", "x"+s, s
	c.VM.CPUs, c.VM.StartTimeout = -i, time.Duration(i)*time.Second
	c.Kind.CustomDNSResolvers = []DomainResolver{{Domain: s, Resolvers: []string{s, "1.2.3.4"}}, {Domain: "d"}}
	c.Registries.Mirrors = append(c.Registries.Mirrors, Mirror{Name: s, Port: i, Username: s, Password: s})
	c.PluginSources = []string{s}
	c.PluginTrust.Keys = []TrustedKey{{Name: s, PublicKey: s, Sources: nil}}
	c.Plugins[s] = PluginConfig{Enabled: i%2 == 0, Version: s, Timeout: time.Duration(i) * time.Minute,
		Config: map[string]any{"k": s, "n": i, "list": []any{s, 1, true, nil, 1.5, map[string]any{"in": s}}, "m": map[string]any{s: s}, "nil": nil}}
	c.Plugins["a"+s+"10"] = PluginConfig{}
	return c
}

// TestValueNodeMatchesNodeEncode: the annotated YAML of valueNode is
// byte for byte what Node.Encode gave, for the default config, configs
// holding every tricky string in every kind of field, and empty and nil
// collections.
func TestValueNodeMatchesNodeEncode(t *testing.T) {
	configs := []*Config{Default(), {}}
	empty := Default()
	empty.Registries.Mirrors, empty.Plugins, empty.PluginSources = []Mirror{}, map[string]PluginConfig{}, []string{}
	configs = append(configs, empty)
	for i, s := range tricky {
		configs = append(configs, trickyConfig(s, i))
	}
	compared := 0
	for _, c := range configs {
		want := viaNodeEncode(t, c)
		if want == "" {
			continue
		}
		compared++
		if got := viaValueNode(t, c); got != want {
			t.Errorf("valueNode differs from Node.Encode:\n--- valueNode\n%s\n--- Node.Encode\n%s", got, want)
		}
	}
	if compared < len(configs)-12 { // the strings with a line break
		t.Errorf("only %d of %d configs could be compared", compared, len(configs))
	}
	// Invalid UTF-8 goes through Node.Encode (binary), and still matches.
	c := Default()
	c.VM.Name = "a\xffb"
	if got, want := viaValueNode(t, c), viaNodeEncode(t, c); got != want {
		t.Errorf("invalid UTF-8:\n%s\nwant\n%s", got, want)
	}
}

// TestYAMLKeyOrder: map keys come out in yaml.v3's order (numbers by value).
func TestYAMLKeyOrder(t *testing.T) {
	keys := []string{"a10", "a9", "a-1", "a", "b", "a09", "a009", "10", "9", "x1y2", "x1y10", "é", "A", "a_b", "ab", "0", "00", "01", ""}
	m := map[string]int{}
	for i, k := range keys {
		m[k] = i
	}
	var n yaml.Node
	if err := n.Encode(m); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < len(n.Content); i += 2 {
		want = append(want, n.Content[i].Value)
	}
	got := append([]string(nil), keys...)
	sort.Slice(got, func(i, j int) bool { return yamlKeyLess(got[i], got[j]) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %q, yaml.v3 %q", got, want)
	}
}

var base60RE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)

func FuzzValueNode(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, i int) {
		if got, want := isBase60Float(s), base60RE.MatchString(s); got != want {
			t.Errorf("isBase60Float(%q) = %v, the expression says %v", s, got, want)
		}
		c := trickyConfig(s, i)
		var buf bytes.Buffer
		want := viaNodeEncode(t, c)
		if want == "" {
			return
		}
		if got := viaValueNode(t, c); got != want {
			buf.WriteString("valueNode differs from Node.Encode for " + strconvQuote(s))
			t.Errorf("%s:\n--- valueNode\n%s\n--- Node.Encode\n%s", buf.String(), got, want)
		}
	})
}

func strconvQuote(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\"" }
