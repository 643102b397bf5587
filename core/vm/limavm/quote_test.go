package limavm

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "''"},
		{"abc", "'abc'"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$(reboot)", "'$(reboot)'"},
		{"`id`;\n\\", "'`id`;\n\\'"},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestQuoteArgsRefuses(t *testing.T) {
	if _, err := QuoteArgs(nil); err == nil {
		t.Error("QuoteArgs(nil) accepted an empty command")
	}
	if _, err := QuoteArgs([]string{"echo", "a\x00b"}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("QuoteArgs with NUL: %v, want an error naming NUL", err)
	}
}

// shellRoundTrip runs `sh -c 'printf "%s\0" <quoted args>'` locally and
// returns the NUL-separated words the shell saw.
func shellRoundTrip(t testing.TB, args []string) []string {
	t.Helper()
	line, err := QuoteArgs(append([]string{"printf", `%s\0`}, args...))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("sh -c %s: %v", line, err)
	}
	if len(args) == 0 {
		// printf with no arguments still prints the format once.
		return nil
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

func TestQuoteShellRoundTrip(t *testing.T) {
	args := []string{"", " ", "a b", "it's", "''", `\`, `"`, "$HOME", "$(id)", "`id`", "*", "~", "-n", "--", "a\nb", "\t", "é✓", "\xff\xfe", "!", "#c", ";", "&&", "|", "<x", "{a,b}"}
	got := shellRoundTrip(t, args)
	if len(got) != len(args) {
		t.Fatalf("shell saw %d words, want %d: %q", len(got), len(args), got)
	}
	for i := range args {
		if got[i] != args[i] {
			t.Errorf("word %d: shell saw %q, want %q", i, got[i], args[i])
		}
	}
}

// FuzzQuote checks that any argument list survives a trip through a real
// POSIX shell byte for byte.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a", "it's", "$(id)", "\n", "'\\''", "\xff", "%s", "-e"} {
		f.Add(s, "x y")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.IndexByte(a, 0) >= 0 || strings.IndexByte(b, 0) >= 0 {
			if _, err := QuoteArgs([]string{"x", a, b}); err == nil {
				t.Fatal("QuoteArgs accepted a NUL byte")
			}
			return
		}
		got := shellRoundTrip(t, []string{a, b})
		if len(got) != 2 || !bytes.Equal([]byte(got[0]), []byte(a)) || !bytes.Equal([]byte(got[1]), []byte(b)) {
			t.Fatalf("round trip of %q, %q gave %q (valid UTF-8: %v)", a, b, got, utf8.ValidString(a))
		}
	})
}
