package corefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse feeds arbitrary text to Parse and, when it parses, to Edit. It
// must never panic; a parsed Corefile must parse again from its own text to
// the same blocks; and Edit must either refuse with a ConflictError or give
// a Corefile that parses, keeps every block marina does not manage, holds
// exactly marina's zones and is a fixed point of Edit.
//
//	go test -fuzz FuzzParse ./plugins/coredns/corefile/
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "in", "*.Corefile"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "{", "}", "\"", "#", "import", "import x y", ".:53 {\n}", ".:53 { errors }",
		"a,\n", "a, {", "(s) {\n{\n}\n}\nimport s\n", "x\n{\n{\n}\n}\n", "\ufeff.:53 {\nwhoami\n}",
		"# managed by marina: demo.internal\ndemo.internal:53 {\n}\n",
		"# managed by marina: demo.internal\r\ndemo.internal:53 {\r\n}\r\n",
		"# managed by marina:\n.:53 {\n}\n", ".:53 {\n log \"a\\\"b\n}\" \n}\n",
		"a {\n b\n} # managed by marina: c.org\nc.org {\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cf, err := Parse(src)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("Parse error %v is not a *ParseError with a line", err)
			}
			return
		}
		again, err := Parse(cf.Bytes())
		if err != nil {
			t.Fatalf("Parse(Bytes()) failed: %v", err)
		}
		if !reflect.DeepEqual(again.Blocks, cf.Blocks) || !reflect.DeepEqual(again.Imports, cf.Imports) {
			t.Fatalf("Parse(Bytes()) differs")
		}
		out, err := cf.Edit(defaultForwards, defaultOptions)
		if err != nil {
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("Edit of a parsed Corefile failed with %T: %v", err, err)
			}
			return
		}
		checkEdit(t, src, out, defaultForwards, defaultOptions)
		if len(cf.ManagedZones()) == 0 && bytes.HasSuffix(src, []byte("\n")) && !bytes.HasPrefix(out, src) {
			t.Fatalf("Edit changed the existing text instead of appending:\n%q\n%q", src, out)
		}
	})
}
