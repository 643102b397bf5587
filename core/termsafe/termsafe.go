// Package termsafe makes text from untrusted sources (plugins, above all)
// safe to show on a terminal or write to a log a terminal may display.
//
// A plugin's error message, log line or diagnostic can carry escape
// sequences that a terminal obeys: set the window title (OSC 0), write to
// the clipboard (OSC 52), hide or rewrite earlier output (CSI cursor moves,
// erase, carriage return), or spoof text with bidirectional overrides.
// Line and Text remove all of them and keep the readable text:
//
//   - ESC sequences: CSI (ESC [ ... final byte), OSC, DCS, SOS, PM and APC
//     strings (up to BEL, ST or the end of the line), and every other
//     ESC-introduced sequence;
//   - the 8-bit C1 forms of the same (U+0080–U+009F, e.g. U+009B CSI);
//   - every other C0 control and DEL, except tab (and newline in Text);
//     carriage return included;
//   - the bidirectional embedding, override and isolate controls
//     (U+202A–U+202E, U+2066–U+2069);
//   - invalid UTF-8, each bad byte replaced by U+FFFD.
//
// Text that needs none of this is returned as it is, without copying.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Line returns s safe to show as one line: as Text, with each newline
// replaced by a space.
func Line(s string) string { return clean(s, false) }

// Text returns s safe to show, keeping its newlines (multi-line error
// messages, stack traces).
func Text(s string) string { return clean(s, true) }

// Lines applies Line to each element of ss, in a new slice.
func Lines(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Line(s)
	}
	return out
}

// Safe reports whether s is shown as it is by Text (newlines allowed) or
// by Line (no newline allowed).
func Safe(s string, newlines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			if c == '\t' || (c == '\n' && newlines) {
				i++
				continue
			}
			return false
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || unsafeRune(r) {
			return false
		}
		i += n
	}
	return true
}

// unsafeRune reports a non-ASCII rune that is removed: C1 controls and
// bidirectional controls.
func unsafeRune(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

const (
	esc = 0x1b
	bel = 0x07
	st  = 0x9c // C1 string terminator
)

// clean implements Line and Text.
func clean(s string, newlines bool) string {
	if Safe(s, newlines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	nl := func() {
		if newlines {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f || c == '\t':
			b.WriteByte(c)
			i++
		case c == '\n':
			nl()
			i++
		case c == esc:
			i = skipEscape(s, i+1)
		case c < utf8.RuneSelf:
			i++ // other C0 controls, DEL
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				b.WriteRune(utf8.RuneError)
				i++
			case r == 0x9b: // CSI
				i = skipCSI(s, i+n)
			case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // OSC, DCS, SOS, PM, APC
				i = skipString(s, i+n)
			case unsafeRune(r):
				i += n
			default:
				b.WriteString(s[i : i+n])
				i += n
			}
		}
	}
	return b.String()
}

// skipEscape returns the index after the escape sequence whose ESC was
// just before i.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_':
		return skipString(s, i+1)
	}
	// ESC, intermediate bytes (0x20–0x2F), one final byte (0x30–0x7E).
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI returns the index after a control sequence's parameter bytes
// (0x30–0x3F), intermediate bytes (0x20–0x2F) and final byte (0x40–0x7E)
// starting at i. A byte that fits none of them ends the sequence without
// being consumed (it is then cleaned on its own).
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x30 && s[i] <= 0x3f {
		i++
	}
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipString returns the index after a control string (OSC, DCS, ...)
// starting at i: it ends at BEL, ST (ESC \ or U+009C), or before a newline
// or the end of s, so an unterminated string cannot swallow more than the
// rest of its line.
func skipString(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == bel:
			return i + 1
		case c == '\n':
			return i
		case c == esc:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i // another sequence starts: the string was cut short
		case c == 0xc2 && i+1 < len(s) && s[i+1] == st:
			return i + 2
		}
		i++
	}
	return i
}

// Excerpt caps s at about n bytes (cut on a rune boundary), marking the
// cut with "...": for showing a value that may be long.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
