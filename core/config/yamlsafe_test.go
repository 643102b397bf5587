package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// document holds s in every position yaml.v3 writes a block scalar in:
// a top-level value, a sequence item, a mapping in a sequence item (where
// the indentation indicator is miscounted), nested mappings and sequences,
// a key.
func document(s string) map[string]any {
	return map[string]any{
		"top":   s,
		"seq":   []any{s, "x"},
		"items": []any{map[string]any{"k": s, "l": []any{s}, "m": map[string]any{"n": s}}},
		"m":     map[string]any{"x": map[string]any{"y": s}},
		"ss":    []any{[]any{s}},
		"keys":  map[string]any{"a" + s: "v"},
	}
}

// roundTrip writes document(s) as a node tree, every scalar given style,
// guarded or not, and reads it back.
func roundTrip(t *testing.T, s string, style yaml.Style, indent int, guard bool) (any, error) {
	t.Helper()
	n := nodeOf(document(s), style)
	if guard {
		GuardYAML(n)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(indent)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	var back any
	if err := yaml.Unmarshal(out.Bytes(), &back); err != nil {
		return nil, err
	}
	return back, nil
}

// nodeOf is v's node tree (strings, sequences, mappings in key order),
// block collections, every scalar a !!str of the given style.
func nodeOf(v any, style yaml.Style) *yaml.Node {
	switch v := v.(type) {
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Style: style}
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, item := range v {
			n.Content = append(n.Content, nodeOf(item, style))
		}
		return n
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.Content = append(n.Content, nodeOf(k, style), nodeOf(v[k], style))
		}
		return n
	}
	panic(fmt.Sprintf("nodeOf %T", v))
}

func allStrings(alphabet []string, maxLen int) []string {
	out := []string{""}
	for prev := []string{""}; maxLen > 0; maxLen-- {
		var next []string
		for _, p := range prev {
			for _, c := range alphabet {
				next = append(next, p+c)
			}
		}
		out, prev = append(out, next...), next
	}
	return out
}

// TestQuoteIndentedBlocks: every string of up to four characters of
// line breaks, spaces, tabs, '#', ':' and a letter, in every position of
// document, in every style yaml.v3 can be asked for, reads back as
// written once guarded. Without the guard, some do not (the test would
// catch yaml.v3's bug if the guard did nothing).
func TestQuoteIndentedBlocks(t *testing.T) {
	unguardedFailures := 0
	for _, s := range allStrings([]string{"\n", " ", "\t", "#", ":", "a"}, 4) {
		checkReadsBack(t, s)
		if got, err := roundTrip(t, s, 0, 2, false); err != nil || !reflect.DeepEqual(got, asJSON(t, s)) {
			unguardedFailures++
		}
	}
	if unguardedFailures == 0 {
		t.Error("no string failed without the guard: the test no longer shows yaml.v3's block-scalar bug")
	}
	t.Logf("%d strings did not read back without the guard", unguardedFailures)
}

// FuzzQuoteIndentedBlocks: any string reads back as written once guarded.
func FuzzQuoteIndentedBlocks(f *testing.F) {
	for _, s := range []string{"\n#0", " a\nb", "\t\nx", "a\n\n", "\n", "a: b\n c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // yaml.v3 writes those as !!binary
		}
		checkReadsBack(t, s)
	})
}

// checkReadsBack: document(s) reads back as written in every style and
// indentation once guarded.
func checkReadsBack(t *testing.T, s string) {
	t.Helper()
	want := asJSON(t, s)
	for _, style := range []yaml.Style{0, yaml.LiteralStyle, yaml.FoldedStyle, yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle} {
		for _, indent := range []int{2, 4} {
			if got, err := roundTrip(t, s, style, indent, true); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%q, style %v, indent %d: read back %#v (%v)", s, style, indent, got, err)
			}
		}
	}
}

// asJSON is document(s) as JSON decodes it: the values YAML must give back.
func asJSON(t *testing.T, s string) any {
	t.Helper()
	b, err := json.Marshal(document(s))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuoteIndentedBlocksLeavesOthers: scalars the bug cannot reach keep
// their style, and non-string scalars are not touched.
func TestQuoteIndentedBlocksLeavesOthers(t *testing.T) {
	for _, c := range []struct {
		value, tag string
		style      yaml.Style
		want       yaml.Style
	}{
		{"a\nb", "!!str", yaml.LiteralStyle, yaml.LiteralStyle},
		{"a\n b", "", 0, 0},
		{" a", "!!str", 0, 0},
		{"\n", "!!str", 0, yaml.DoubleQuotedStyle},
		{" a\nb", "!!str", yaml.FoldedStyle, yaml.DoubleQuotedStyle},
		{" a\nb", "", yaml.LiteralStyle | yaml.TaggedStyle, yaml.DoubleQuotedStyle | yaml.TaggedStyle},
		{" a\nb", "!!str", yaml.SingleQuotedStyle, yaml.SingleQuotedStyle},
		{" a\nb", "!!binary", yaml.LiteralStyle, yaml.LiteralStyle},
	} {
		n := &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: c.value, Tag: c.tag, Style: c.style}}}
		GuardYAML(n)
		if got := n.Content[0].Style; got != c.want {
			t.Errorf("%q %s style %v: became %v, want %v", c.value, c.tag, c.style, got, c.want)
		}
	}
}

// TestGuardLineComments: a line comment holding a line break or another
// control character stays on its line (escaped) and the document reads
// back the same values; a plain comment is left as it is. Without the
// guard, the line break makes the rest of the comment a line of data.
func TestGuardLineComments(t *testing.T) {
	doc := func() *yaml.Node {
		return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "a"},
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "1", LineComment: "file x\nb: 2"},
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "c", LineComment: "tab\there \x1b[31m"},
			{Kind: yaml.MappingNode, Content: []*yaml.Node{
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "d"},
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "3", LineComment: "plain # comment"},
			}},
		}}
	}
	encode := func(n *yaml.Node) (string, map[string]any) {
		t.Helper()
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(n); err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		_ = yaml.Unmarshal(b.Bytes(), &back)
		return b.String(), back
	}
	want := map[string]any{"a": "1", "c": map[string]any{"d": "3"}}
	if _, back := encode(doc()); reflect.DeepEqual(back, want) {
		t.Fatal("an unguarded comment with a line break reads back the same: the test no longer shows why Guard escapes it")
	}
	n := doc()
	GuardYAML(n)
	out, back := encode(n)
	if !reflect.DeepEqual(back, want) {
		t.Errorf("read back %#v, want %#v:\n%s", back, want, out)
	}
	for _, line := range []string{`a: "1" # file x\nb: 2`, `c: # tab\there \x1b[31m`, `d: "3" # plain # comment`} {
		if !bytes.Contains([]byte(out), []byte(line)) {
			t.Errorf("output lacks the line %q:\n%s", line, out)
		}
	}
}
