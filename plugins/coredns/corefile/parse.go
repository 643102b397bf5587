// Package corefile reads and edits CoreDNS Corefiles without rewriting them.
//
// Parse groups a Corefile into server blocks the way CoreDNS's own parser
// (github.com/coredns/caddy/caddyfile) does — keys such as `.:53` or
// `example.com:53 foo.org`, directives with their arguments and nested
// `{ }` blocks, comments, quoted words, `{$ENV}` placeholders (kept
// verbatim, never expanded), snippets and `import` lines — and remembers
// where every block sits in the original text.
//
// Edit uses that to add, replace or remove only the server blocks marina
// manages, each marked by a comment line just above it:
//
//	# managed by marina: demo.internal
//	demo.internal:53 {
//	    errors
//	    cache 30
//	    forward . 172.30.255.53
//	}
//
// Every other byte of the file is left as it was. A Corefile marina cannot
// parse, or one that already serves a zone marina should forward from a
// block marina did not write, is refused with an error naming the line.
package corefile

import (
	"fmt"
	"strings"
)

// ParseError is a Corefile that cannot be read (or safely edited).
type ParseError struct {
	// Line is the 1-based line the problem is on.
	Line int
	// Msg says what is wrong and, where it can, how to fix it.
	Msg string
}

func (e *ParseError) Error() string { return fmt.Sprintf("Corefile line %d: %s", e.Line, e.Msg) }

// Corefile is a parsed Corefile. It keeps the original text: Bytes returns
// it unchanged.
type Corefile struct {
	// Blocks are the server blocks and snippets, in file order.
	Blocks []*ServerBlock
	// Imports are the top-level `import` lines (their files are not read).
	Imports []Import

	src []byte
}

// ServerBlock is one server block (or snippet) of a Corefile.
type ServerBlock struct {
	// Keys are the block's addresses as written, e.g. ".:53" or
	// "example.com:53", with the commas that separate them removed.
	Keys []string
	// Directives are the block's directives in order.
	Directives []Directive
	// Snippet is true for a `(name) { ... }` snippet, which serves nothing.
	Snippet bool
	// Line is the line of the first key; EndLine the line of the closing brace.
	Line, EndLine int
	// ManagedZone is the zone named by the `# managed by marina: <zone>`
	// comment on the line just above the block, or "" if there is none.
	ManagedZone string

	start int // offset of the first key
	end   int // offset after the closing brace
	// markerStart is the offset of the start of the marker comment's line
	// and spanEnd the offset after the closing brace's line: marina's block
	// is whole lines (ManagedZone != "" only).
	markerStart, spanEnd int
}

// Directive is one directive of a server block.
type Directive struct {
	// Name is the directive, e.g. "forward".
	Name string
	// Args are the words after the name up to the end of the directive,
	// including the braces and lines of a nested block, exactly as
	// CoreDNS's parser groups them: `forward . 1.1.1.1 { max_fails 3 }`
	// has Args [. 1.1.1.1 { max_fails 3 }].
	Args []string
	// Line is the line the directive starts on.
	Line int
}

// Import is a top-level `import <pattern>` line.
type Import struct {
	Pattern string
	Line    int
}

// Bytes returns the Corefile's text exactly as it was parsed.
func (c *Corefile) Bytes() []byte { return append([]byte(nil), c.src...) }

// ManagedZones returns the zones of the blocks marina manages, in file order.
func (c *Corefile) ManagedZones() []string {
	var zones []string
	for _, b := range c.Blocks {
		if b.ManagedZone != "" {
			zones = append(zones, b.ManagedZone)
		}
	}
	return zones
}

// Parse reads a Corefile. It accepts what CoreDNS accepts, except for
// shapes marina could not edit safely, which it refuses with a
// *ParseError naming the line: a server block without braces (CoreDNS
// reads such a block up to the end of the file), a block with keys and no
// body, an unclosed quoted string, and text that is not UTF-8.
func Parse(src []byte) (*Corefile, error) {
	toks, comments, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, snippets: map[string]bool{}}
	cf := &Corefile{src: src}
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		if t.text == "import" {
			if !p.newLine(p.i) {
				return nil, &ParseError{Line: t.line, Msg: "import must start a line of its own"}
			}
			imp, err := p.importLine()
			if err != nil {
				return nil, err
			}
			cf.Imports = append(cf.Imports, imp)
			continue
		}
		b, err := p.block()
		if err != nil {
			return nil, err
		}
		cf.Blocks = append(cf.Blocks, b)
	}
	commentAt := map[int]comment{} // the first comment of each line
	for i := len(comments) - 1; i >= 0; i-- {
		commentAt[comments[i].line] = comments[i]
	}
	for _, b := range cf.Blocks {
		cf.findMarker(b, commentAt)
	}
	return cf, nil
}

type parser struct {
	toks     []token
	i        int
	snippets map[string]bool
}

// newLine reports whether token j starts a line of its own, as the
// Caddyfile dispenser's isNewLine does (a quoted word's line breaks count).
func (p *parser) newLine(j int) bool {
	return j == 0 || p.toks[j-1].endLine < p.toks[j].line
}

// importLine reads `import <pattern>`; the pattern must be the one other
// word on the line.
func (p *parser) importLine() (Import, error) {
	t := p.toks[p.i]
	if p.i+1 >= len(p.toks) || p.newLine(p.i+1) {
		return Import{}, &ParseError{Line: t.line, Msg: "import needs one argument, a file or glob pattern"}
	}
	arg := p.toks[p.i+1]
	if arg.text == "" {
		return Import{}, &ParseError{Line: t.line, Msg: "import needs a non-empty file or glob pattern"}
	}
	if p.i+2 < len(p.toks) && !p.newLine(p.i+2) {
		return Import{}, &ParseError{Line: t.line, Msg: "import takes only one argument (a file or glob pattern)"}
	}
	p.i += 2
	return Import{Pattern: arg.text, Line: t.line}, nil
}

// block reads one server block or snippet, starting at its first key.
func (p *parser) block() (*ServerBlock, error) {
	first := p.toks[p.i]
	b := &ServerBlock{Line: first.line, start: first.start}
	if err := p.keys(b); err != nil {
		return nil, err
	}
	if len(b.Keys) == 0 {
		return nil, &ParseError{Line: first.line, Msg: "server block without an address; put its zone and port before '{', e.g. .:53 {"}
	}
	if p.i >= len(p.toks) {
		return nil, &ParseError{Line: first.line, Msg: fmt.Sprintf("server block %s has no body; add { ... } with its directives", strings.Join(b.Keys, " "))}
	}
	if p.toks[p.i].text != "{" {
		return nil, &ParseError{Line: p.toks[p.i].line, Msg: fmt.Sprintf("expected '{' to open server block %s, found %q; enclose every server block in { } (a block without braces runs to the end of the file)", strings.Join(b.Keys, " "), p.toks[p.i].text)}
	}
	open := p.toks[p.i]
	p.i++
	if len(b.Keys) == 1 && strings.HasPrefix(b.Keys[0], "(") && strings.HasSuffix(b.Keys[0], ")") {
		return b, p.snippet(b, open)
	}
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		if t.text == "}" {
			b.EndLine, b.end = t.line, t.end
			p.i++
			return b, nil
		}
		d, err := p.directive()
		if err != nil {
			return nil, err
		}
		if d.Name == "import" && (len(d.Args) != 1 || d.Args[0] == "") {
			return nil, &ParseError{Line: d.Line, Msg: "import takes exactly one argument, a file or glob pattern"}
		}
		b.Directives = append(b.Directives, d)
	}
	return nil, &ParseError{Line: open.line, Msg: fmt.Sprintf("the '{' of server block %s is never closed; add the missing '}'", strings.Join(b.Keys, " "))}
}

// keys reads a block's addresses: the words up to the end of the line (a
// trailing comma continues the list on the next line) or up to '{'.
func (p *parser) keys(b *ServerBlock) error {
	expectingAnother := false
	for {
		t := p.toks[p.i]
		if t.text == "{" {
			if expectingAnother {
				return &ParseError{Line: t.line, Msg: "expected another address after the trailing comma, found '{'; remove the comma"}
			}
			return nil
		}
		if t.text == "import" {
			return &ParseError{Line: t.line, Msg: "import in a list of server block addresses is not supported; put the import on a line of its own"}
		}
		if t.text != "" {
			key := t.text
			expectingAnother = key[len(key)-1] == ','
			if expectingAnother {
				key = key[:len(key)-1]
			}
			b.Keys = append(b.Keys, key)
		}
		p.i++
		if p.i >= len(p.toks) {
			if expectingAnother {
				return &ParseError{Line: t.line, Msg: "the Corefile ends after a trailing comma; add the next address or remove the comma"}
			}
			return nil
		}
		if !expectingAnother && p.newLine(p.i) {
			return nil
		}
	}
}

// snippet reads the body of a `(name) { ... }` snippet up to its matching brace.
func (p *parser) snippet(b *ServerBlock, open token) error {
	b.Snippet = true
	name := strings.TrimSuffix(strings.TrimPrefix(b.Keys[0], "("), ")")
	if p.snippets[name] {
		return &ParseError{Line: b.Line, Msg: fmt.Sprintf("snippet %s is declared twice; rename or remove one", name)}
	}
	p.snippets[name] = true
	depth := 1
	for ; p.i < len(p.toks); p.i++ {
		switch p.toks[p.i].text {
		case "{":
			depth++
		case "}":
			depth--
			if depth == 0 {
				b.EndLine, b.end = p.toks[p.i].line, p.toks[p.i].end
				p.i++
				return nil
			}
		}
	}
	return &ParseError{Line: open.line, Msg: fmt.Sprintf("the '{' of snippet %s is never closed; add the missing '}'", b.Keys[0])}
}

// directive reads one directive: its name and the words after it up to the
// end of its line, or up to the brace that closes a nested block opened on
// that line.
func (p *parser) directive() (Directive, error) {
	name := p.toks[p.i]
	d := Directive{Name: name.text, Line: name.line}
	nesting := 0
	for p.i++; p.i < len(p.toks); p.i++ {
		t := p.toks[p.i]
		switch {
		case t.text == "{":
			nesting++
		case p.newLine(p.i) && nesting == 0:
			return d, nil
		case t.text == "}" && nesting > 0:
			nesting--
		case t.text == "}":
			return d, &ParseError{Line: t.line, Msg: fmt.Sprintf("unexpected '}' after directive %s; put the closing brace of a block on a line of its own", d.Name)}
		}
		d.Args = append(d.Args, t.text)
	}
	if nesting > 0 {
		return d, &ParseError{Line: name.line, Msg: fmt.Sprintf("the block of directive %s is never closed; add the missing '}'", d.Name)}
	}
	return d, nil
}

// markerPrefix starts the comment that marks a block marina manages.
const markerPrefix = "managed by marina:"

// findMarker sets b.ManagedZone when the line just above b's first key is a
// marina marker comment standing alone on its line, the key is the first
// word on its line and nothing but a comment follows the closing brace on
// its line: marina's blocks are whole lines, so replacing or removing one
// never touches a neighbour's text.
func (c *Corefile) findMarker(b *ServerBlock, commentAt map[int]comment) {
	if b.Snippet || b.Line < 2 || !onlySpaceBefore(c.src, b.start) {
		return
	}
	spanEnd, ok := restOfLineIsBlank(c.src, b.end)
	if !ok {
		return
	}
	cm, ok := commentAt[b.Line-1]
	if !ok || !onlySpaceBefore(c.src, cm.start) {
		return
	}
	text := strings.TrimSpace(strings.TrimPrefix(string(c.src[cm.start:cm.end]), "#"))
	rest, ok := strings.CutPrefix(text, markerPrefix)
	if !ok {
		return
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return
	}
	b.ManagedZone = normalizeZone(fields[0])
	b.markerStart, b.spanEnd = lineStart(c.src, cm.start), spanEnd
}

// isMarker reports whether line (without its line break) is a marker comment.
func isMarker(line string) bool {
	text, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
	return ok && strings.HasPrefix(strings.TrimSpace(text), markerPrefix)
}

// restOfLineIsBlank reports whether only blanks and a comment follow offset
// on its line, and returns the offset after that line's break (or the end).
func restOfLineIsBlank(src []byte, offset int) (int, bool) {
	i := offset
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r') {
		i++
	}
	if i < len(src) && src[i] == '#' {
		for i < len(src) && src[i] != '\n' {
			i++
		}
	}
	switch {
	case i == len(src):
		return i, true
	case src[i] == '\n':
		return i + 1, true
	}
	return 0, false
}

// onlySpaceBefore reports whether only blanks precede offset on its line.
func onlySpaceBefore(src []byte, offset int) bool {
	return strings.TrimLeft(string(src[lineStart(src, offset):offset]), " \t\r\ufeff") == ""
}

// lineStart is the offset of the start of the line holding offset.
func lineStart(src []byte, offset int) int {
	for offset > 0 && src[offset-1] != '\n' {
		offset--
	}
	return offset
}
