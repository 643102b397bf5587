package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello, world", "hello, world"},
		{"tab and newline kept", "a\tb\nc", "a\tb\nc"},
		{"unicode kept", "café ✓ 日本", "café ✓ 日本"},
		{"SGR colour", "\x1b[31mred\x1b[0m", "red"},
		{"CSI with private params", "\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"},
		{"cursor up and erase line", "ok\x1b[1A\x1b[2Kfake", "okfake"},
		{"OSC title BEL", "\x1b]0;pwned\x07after", "after"},
		{"OSC title ST", "\x1b]0;pwned\x1b\\after", "after"},
		{"OSC 52 clipboard", "x\x1b]52;c;ZXZpbA==\x07y", "xy"},
		{"OSC 8 hyperlink", "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"unterminated OSC stops at the newline", "\x1b]0;pwned\nnext line", "\nnext line"},
		{"unterminated OSC at the end", "msg\x1b]0;pwned", "msg"},
		{"DCS", "a\x1bPq#0;2;0;0;0\x1b\\b", "ab"},
		{"APC", "a\x1b_payload\x07b", "ab"},
		{"two-byte ESC", "a\x1bcb\x1b7c", "abc"},
		{"ESC with intermediate", "a\x1b(Bb", "ab"},
		{"lone ESC at end", "abc\x1b", "abc"},
		{"carriage return", "progress 10%\rDONE", "progress 10%DONE"},
		{"C0 and DEL", "a\x00b\x07c\x08d\x7fe", "abcde"},
		{"8-bit CSI", "a\u009b31mb", "ab"},
		{"8-bit OSC with 8-bit ST", "a\u009d0;t\u009cb", "ab"},
		{"other C1", "a\u0085b\u008ec", "abc"},
		{"bidi override", "file\u202etxt.exe", "filetxt.exe"},
		{"bidi isolate", "a\u2066b\u2069c", "abc"},
		{"invalid UTF-8", "a\xffb\x9bc", "a\ufffdb\ufffdc"},
		{"CSI cut by a control", "\x1b[31\x07mx", "mx"},
		{"issue 13 payload", "\x1b]0;pwned\x07\x1b[31mthe thing is broken\x1b[0m", "the thing is broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	if got, want := Line("one\ntwo\r\nthree\x1b[2J"), "one two three"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if got := Lines([]string{"a\x1b[1mb", "c\nd"}); got[0] != "ab" || got[1] != "c d" {
		t.Errorf("Lines = %q", got)
	}
	if Lines(nil) != nil {
		t.Error("Lines(nil) is not nil")
	}
}

// TestSafeTextIsNotCopied checks the fast path: clean text comes back as
// the same string (no allocation).
func TestSafeTextIsNotCopied(t *testing.T) {
	s := strings.Repeat("plain text with a\ttab and ünïcode\n", 100)
	if n := testing.AllocsPerRun(10, func() { _ = Text(s) }); n != 0 {
		t.Errorf("Text of clean text allocates %v times, want 0", n)
	}
	if !Safe(s, true) || Safe(s, false) {
		t.Error("Safe disagrees about newlines")
	}
}

// checkShown fails unless out contains nothing a terminal interprets.
func checkShown(t *testing.T, in, out string, newlines bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("clean(%q) = %q: invalid UTF-8", in, out)
	}
	for _, r := range out {
		switch {
		case r == '\t', r == '\n' && newlines:
		case r < 0x20, r == 0x7f, unsafeRune(r):
			t.Fatalf("clean(%q) = %q: keeps control %U", in, out, r)
		}
	}
	if !Safe(out, newlines) {
		t.Fatalf("clean(%q) = %q is not Safe", in, out)
	}
	if again := clean(out, newlines); again != out {
		t.Fatalf("clean is not idempotent: %q -> %q -> %q", in, out, again)
	}
	if len(out) > 3*len(in) {
		t.Fatalf("clean(%q) = %q grew more than 3x", in, out)
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred", "\x1b]0;t\x07", "\x1bP\x1b\\", "\u009b1m", "\xff\xfe", "a\rb\nc", "\u202e", "\x1b]8;;u\x1b\\l"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkShown(t, s, Text(s), true)
		line := Line(s)
		checkShown(t, s, line, false)
		if strings.Contains(line, "\n") {
			t.Fatalf("Line(%q) = %q has a newline", s, line)
		}
		if Safe(s, true) && Text(s) != s {
			t.Fatalf("Text changed safe text %q to %q", s, Text(s))
		}
	})
}
