package corefile

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/coredns/caddy/caddyfile"
)

// sameAsCoreDNS checks Parse against the parser CoreDNS itself uses
// (github.com/coredns/caddy/caddyfile v1.1.4): whenever Parse accepts src,
// CoreDNS must accept it too and see the same server blocks, keys and
// directive words. Parse may refuse more (it is stricter on purpose).
// Inputs with imports or {$ENV} placeholders are skipped: CoreDNS reads
// files and the environment for them.
func sameAsCoreDNS(t *testing.T, src []byte) {
	t.Helper()
	if bytes.Contains(src, []byte("import")) || bytes.Contains(src, []byte("{$")) || bytes.Contains(src, []byte("{%")) {
		return
	}
	cf, err := Parse(src)
	if err != nil {
		return
	}
	theirs, err := caddyfile.Parse("Corefile", bytes.NewReader(src), nil)
	if err != nil {
		t.Fatalf("Parse accepted a Corefile CoreDNS refuses (%v):\n%q", err, src)
	}
	type block struct {
		Keys   []string
		Tokens map[string][]string
	}
	var ours, want []block
	for _, b := range cf.Blocks {
		if b.Snippet {
			continue
		}
		tokens := map[string][]string{}
		for _, d := range b.Directives {
			tokens[d.Name] = append(append(tokens[d.Name], d.Name), d.Args...)
		}
		ours = append(ours, block{Keys: b.Keys, Tokens: tokens})
	}
	for _, sb := range theirs {
		tokens := map[string][]string{}
		for dir, toks := range sb.Tokens {
			for _, tk := range toks {
				tokens[dir] = append(tokens[dir], tk.Text)
			}
		}
		want = append(want, block{Keys: sb.Keys, Tokens: tokens})
	}
	if !reflect.DeepEqual(ours, want) {
		t.Fatalf("Parse and CoreDNS read %q differently:\nours:    %+v\ncoredns: %+v", src, ours, want)
	}
}

// TestParseMatchesCoreDNS runs the comparison over the test Corefiles and
// their edited forms.
func TestParseMatchesCoreDNS(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.Corefile"))
	if len(files) < 10 {
		t.Fatalf("found %d test Corefiles, want the testdata inputs and golden files", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(f, func(t *testing.T) { sameAsCoreDNS(t, src) })
	}
}

// FuzzParseMatchesCoreDNS is the comparison with CoreDNS's parser on
// arbitrary input, before and after Edit:
//
//	go test -fuzz FuzzParseMatchesCoreDNS ./plugins/coredns/corefile/
func FuzzParseMatchesCoreDNS(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "in", "*.Corefile"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		".:53 {\n}\n", "a, b\n{\nx { y\n}\n}\n", "a {\n b \"c\nd\" e\n}\n", "a {\n b {\n {\n }\n }\n}\n",
		"\"\", a {\n}\n", "a {\n{\n}\n}\n", "a\r\n{\r\nb\r}\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		sameAsCoreDNS(t, src)
		if out, err := Edit(src, defaultForwards, defaultOptions); err == nil {
			sameAsCoreDNS(t, out)
		}
	})
}
