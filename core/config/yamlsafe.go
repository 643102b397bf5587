// GuardYAML keeps the YAML marina writes (config files it edits,
// `config view`, `-o yaml`) reading back as the values it was given.

package config

import (
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Guard makes what yaml.v3 writes for n read back as n: every string
// scalar it would write as a block scalar it cannot read back is given the
// double-quoted style, and every line comment is kept on its line.
//
// yaml.v3 writes a string that spans lines as a literal block; one that
// begins with a space, a tab or a line break gets an indentation indicator
// ("|2-"). A block whose first line begins with a tab then does not parse
// at all ("found a tab character where an indentation space is
// expected"), and at yaml.v3's default indentation of 4 (yaml.Marshal,
// and Node.Encode's own emit-and-parse) the indicator is counted from the
// wrong column in a mapping that is a sequence item ("- key: |4-"):
// yaml.v3 and PyYAML read an empty string (a first line starting with '#'
// becomes a comment), another string, or fail. Asked for a folded block,
// yaml.v3 also changes line breaks. Double-quoted, every such value reads
// back exactly (yamlsafe_test.go tries every string of four characters of
// blanks, line breaks and text in every position, style and indentation).
// Every other scalar keeps its style.
//
// yaml.v3 writes a line comment as given: a line break in it (a key that
// holds one, a file name) would start a line of YAML, read as data. A line
// comment with a control character is written escaped, as Go quotes it.
func GuardYAML(n *yaml.Node) {
	if n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode && unsafeBlock(n) {
		n.Style = n.Style&^(yaml.LiteralStyle|yaml.FoldedStyle|yaml.FlowStyle) | yaml.DoubleQuotedStyle
	}
	n.LineComment = oneLine(n.LineComment)
	for _, c := range n.Content {
		GuardYAML(c)
	}
}

// oneLine is c, escaped as Go quotes it if it holds a control character.
func oneLine(c string) string {
	if !strings.ContainsFunc(c, unicode.IsControl) {
		return c
	}
	q := strconv.Quote(c)
	return q[1 : len(q)-1]
}

// unsafeBlock: n is a string yaml.v3 writes as a block scalar (asked to,
// or left to choose for a value that spans lines) that does not read back.
func unsafeBlock(n *yaml.Node) bool {
	if !isString(n) || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		return false
	}
	multiLine := strings.ContainsRune(n.Value, '\n')
	block := n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || multiLine
	startsBlank := n.Value != "" && strings.ContainsRune(" \t\n", rune(n.Value[0]))
	return block && startsBlank || n.Style&yaml.FoldedStyle != 0 && multiLine
}

// isString: a scalar yaml.v3 writes as a string (an explicit !!str, or
// no tag, which a line break makes a string). A !!binary value is base64:
// it never begins with white space.
func isString(n *yaml.Node) bool {
	return n.Tag == "" || n.Tag == "!!str" || n.Tag == "tag:yaml.org,2002:str"
}
