package corefile

import (
	"bytes"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// token is one word of a Corefile, lexed the way CoreDNS's Caddyfile lexer
// (github.com/coredns/caddy/caddyfile) does: words are separated by white
// space, a word that starts with '"' runs to the next unescaped '"' (only
// \" is an escape; other backslashes stay), a '#' that starts a word
// starts a comment that runs to the end of the line, a '#' inside a word
// hides the rest of that word only, and '\r' is ignored.
type token struct {
	text    string
	line    int // line of the first byte
	endLine int // line of the last byte (a quoted word may span lines)
	start   int // byte offset of the first byte (the opening quote if quoted)
	end     int // byte offset after the last byte
}

// comment is a '#' comment; start is the offset of '#', end the offset of
// the line break (or the end of the input) that ends it.
type comment struct {
	line       int
	start, end int
}

// lex splits src into tokens and comments. It refuses input that is not
// UTF-8 (a ConfigMap's data is UTF-8 anyway) and quoted words that never close: CoreDNS would read them in ways
// marina could not reproduce when it edits the file.
func lex(src []byte) ([]token, []comment, error) {
	var (
		toks     []token
		comments []comment
		line     = 1
		i        = 0
	)
	if !utf8.Valid(src) {
		bad := 0
		for bad < len(src) {
			r, size := utf8.DecodeRune(src[bad:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			bad += size
		}
		return nil, nil, &ParseError{Line: 1 + bytes.Count(src[:bad], []byte("\n")), Msg: "the Corefile is not valid UTF-8"}
	}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		i = 3 // byte order mark, as the Caddyfile lexer discards it
	}
	for i < len(src) {
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == '\n':
			line++
			i += size
		case unicode.IsSpace(r):
			i += size
		case r == '#':
			c := comment{line: line, start: i}
			for i < len(src) && src[i] != '\n' {
				i++
			}
			c.end = i
			comments = append(comments, c)
		case r == '"':
			t, next, err := lexQuoted(src, i, line)
			if err != nil {
				return nil, nil, err
			}
			toks = append(toks, t)
			line = t.endLine
			i = next
		default:
			t := token{line: line, endLine: line, start: i}
			var text []byte
			for i < len(src) {
				r, size := utf8.DecodeRune(src[i:])
				if r == '\r' {
					i += size // dropped, not a separator (as in the Caddyfile lexer)
					continue
				}
				if unicode.IsSpace(r) {
					break
				}
				if r == '#' {
					// A '#' inside a word hides the rest of the word only:
					// the Caddyfile lexer ends the comment with the word,
					// so later words on the line still count.
					for i < len(src) {
						r, size := utf8.DecodeRune(src[i:])
						if unicode.IsSpace(r) && r != '\r' {
							break
						}
						i += size
					}
					break
				}
				text = append(text, src[i:i+size]...)
				i += size
			}
			t.text = string(text)
			t.end = i
			toks = append(toks, t)
		}
	}
	return toks, comments, nil
}

// lexQuoted reads the quoted word whose opening quote is at src[start].
func lexQuoted(src []byte, start, line int) (token, int, error) {
	t := token{line: line, start: start}
	var text []byte
	escaped := false
	for i := start + 1; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		i += size
		if !escaped {
			if r == '\\' {
				escaped = true
				continue
			}
			if r == '"' {
				t.text, t.end, t.endLine = string(text), i, line
				return t, i, nil
			}
		}
		if r == '\n' {
			line++
		}
		if escaped && r != '"' {
			text = append(text, '\\')
		}
		text = utf8.AppendRune(text, r)
		escaped = false
	}
	return token{}, 0, &ParseError{Line: t.line, Msg: fmt.Sprintf("the quoted string that starts here (%s) is never closed; add the closing '\"'", preview(src[start:]))}
}

// preview is the start of s, for error messages.
func preview(s []byte) string {
	const max = 24
	for i, b := range s {
		if b == '\n' || i >= max {
			return string(s[:i]) + "…"
		}
	}
	return string(s)
}
