package limavm

import (
	"errors"
	"fmt"
	"strings"
)

// Quote returns s quoted for a POSIX shell: the result, read by sh as one
// word, is exactly s. Everything is wrapped in single quotes, inside which
// no character is special; each single quote of s is written as a closing
// quote, a backslash-escaped quote and an opening quote. The empty string
// becomes a pair of single quotes.
//
// A NUL byte cannot be part of an argument of any program (argv is a list
// of C strings); use QuoteArgs, which refuses it, for command lines.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuoteArgs quotes every element of argv with Quote and joins them with
// spaces, giving a command line that a POSIX shell splits back into exactly
// argv. It refuses an empty argv and arguments that contain a NUL byte.
func QuoteArgs(argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("empty command: argv needs at least the program name")
	}
	var b strings.Builder
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %d of %q contains a NUL byte, which no program can receive", i, argv[0])
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Quote(a))
	}
	return b.String(), nil
}
