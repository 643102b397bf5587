package corefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"
)

// defaultForwards is what marina forwards with the default config plus one
// custom domain: the local zone and example.dev.
var defaultForwards = []Forward{
	{Zone: "demo.internal", Resolvers: []string{"172.30.255.53"}},
	{Zone: "example.dev", Resolvers: []string{"10.0.0.2", "10.0.0.3:5353"}},
}

var defaultOptions = Options{CacheSeconds: 30}

// TestEditGolden edits real-world Corefiles (testdata/in) and compares the
// result with testdata/golden (go test -update rewrites them). For every
// case it also checks the properties the golden file cannot show: a second
// edit changes nothing, the blocks marina does not manage parse to the same
// keys and directives, and removing marina's blocks gives the same text
// whether they were just added or not.
func TestEditGolden(t *testing.T) {
	cases := []struct {
		name     string
		forwards []Forward
		opt      Options
	}{
		{name: "kind-kubeadm-1.34"},
		{name: "kubeadm-1.27"},
		{name: "kubeadm-1.13-proxy"},
		{name: "k3s-imports"},
		{name: "eks-odd-indent-comments"},
		{name: "user-zone-block"},
		{name: "tabs"},
		{name: "crlf"},
		{name: "no-trailing-newline"},
		{name: "snippets-and-quotes"},
		{name: "previous-run", forwards: []Forward{
			{Zone: "demo.internal", Resolvers: []string{"172.30.255.53"}},
			{Zone: "example.dev", Resolvers: []string{"1.1.1.1", "1.0.0.1"}},
		}, opt: defaultOptions},
		{name: "zone-removed", forwards: defaultForwards[:1], opt: defaultOptions},
		{name: "previous-run-hand-edited"},
		{name: "kind-kubeadm-1.34-no-cache", forwards: defaultForwards, opt: Options{}},
		{name: "kind-kubeadm-1.34-nothing-to-forward", forwards: []Forward{}, opt: defaultOptions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := readInput(t, strings.TrimSuffix(strings.TrimSuffix(tc.name, "-no-cache"), "-nothing-to-forward"))
			forwards, opt := tc.forwards, tc.opt
			if forwards == nil {
				forwards, opt = defaultForwards, defaultOptions
			}
			out, err := Edit(in, forwards, opt)
			if err != nil {
				t.Fatalf("Edit: %v", err)
			}
			golden.Check(t, "testdata/golden/"+tc.name+".Corefile", out)
			checkEdit(t, in, out, forwards, opt)
		})
	}
}

// checkEdit checks what every edit must satisfy.
func checkEdit(t *testing.T, in, out []byte, forwards []Forward, opt Options) {
	t.Helper()
	again, err := Edit(out, forwards, opt)
	if err != nil {
		t.Fatalf("second Edit: %v", err)
	}
	if !bytes.Equal(again, out) {
		t.Fatalf("Edit is not idempotent:\nfirst:\n%s\nsecond:\n%s", out, again)
	}
	before, after := mustParse(t, in), mustParse(t, out)
	if got, want := unmanaged(after), unmanaged(before); !reflect.DeepEqual(got, want) {
		t.Fatalf("blocks marina does not manage changed:\nbefore: %+v\nafter:  %+v", want, got)
	}
	if !reflect.DeepEqual(after.Imports, before.Imports) {
		t.Fatalf("imports changed: %+v -> %+v", before.Imports, after.Imports)
	}
	var wantZones []string
	for _, f := range forwards {
		wantZones = append(wantZones, normalizeZone(f.Zone))
	}
	gotZones := after.ManagedZones()
	slices.Sort(gotZones)
	slices.Sort(wantZones)
	if !slices.Equal(gotZones, wantZones) {
		t.Fatalf("managed zones = %v, want %v", gotZones, wantZones)
	}
	for _, b := range after.Blocks {
		if b.ManagedZone == "" {
			continue
		}
		f := forwards[slices.IndexFunc(forwards, func(f Forward) bool { return normalizeZone(f.Zone) == b.ManagedZone })]
		if want := []string{b.ManagedZone + ":53"}; !slices.Equal(b.Keys, want) {
			t.Errorf("managed block keys = %v, want %v", b.Keys, want)
		}
		fwd := b.Directives[len(b.Directives)-1]
		if fwd.Name != "forward" || !slices.Equal(fwd.Args, append([]string{"."}, f.Resolvers...)) {
			t.Errorf("managed block %s forwards with %s %v, want forward . %v", b.ManagedZone, fwd.Name, fwd.Args, f.Resolvers)
		}
		if hasCache := slices.ContainsFunc(b.Directives, func(d Directive) bool { return d.Name == "cache" }); hasCache != (opt.CacheSeconds > 0) {
			t.Errorf("managed block %s: cache directive present = %v with CacheSeconds %d", b.ManagedZone, hasCache, opt.CacheSeconds)
		}
	}
	// Removing marina's blocks must leave the same text whether this
	// edit added them or not: nothing else was touched.
	strippedIn, err := Edit(in, nil, opt)
	if err != nil {
		t.Fatalf("Edit(in, nil): %v", err)
	}
	strippedOut, err := Edit(out, nil, opt)
	if err != nil {
		t.Fatalf("Edit(out, nil): %v", err)
	}
	if len(strippedIn) > 0 && !bytes.HasSuffix(strippedIn, []byte("\n")) && bytes.HasPrefix(strippedOut, strippedIn) {
		// Edit ends the last line before it appends a block.
		if rest := string(strippedOut[len(strippedIn):]); rest == "\n" || rest == "\r\n" {
			strippedIn = strippedOut
		}
	}
	if !bytes.Equal(strippedIn, strippedOut) {
		t.Fatalf("removing marina's blocks differs:\nfrom the input:\n%q\nfrom the output:\n%q", strippedIn, strippedOut)
	}
	if len(before.ManagedZones()) == 0 && bytes.HasSuffix(in, []byte("\n")) && !bytes.Equal(strippedOut, in) {
		t.Fatalf("removing marina's blocks does not restore the input:\n%q\ngot:\n%q", in, strippedOut)
	}
}

// blockView is what CoreDNS reads from a block, for comparisons.
type blockView struct {
	Keys       []string
	Directives []Directive
	Snippet    bool
}

func unmanaged(cf *Corefile) []blockView {
	var out []blockView
	for _, b := range cf.Blocks {
		if b.ManagedZone == "" {
			// Lines move when marina's blocks above change size.
			ds := slices.Clone(b.Directives)
			for i := range ds {
				ds[i].Line = 0
			}
			out = append(out, blockView{b.Keys, ds, b.Snippet})
		}
	}
	return out
}

func TestParse(t *testing.T) {
	cf := mustParse(t, readInput(t, "kind-kubeadm-1.34"))
	if len(cf.Blocks) != 1 {
		t.Fatalf("blocks = %d, want 1", len(cf.Blocks))
	}
	b := cf.Blocks[0]
	if !slices.Equal(b.Keys, []string{".:53"}) || b.Line != 1 || b.EndLine != 23 || b.Snippet || b.ManagedZone != "" {
		t.Errorf("block = keys %v lines %d-%d snippet %v managed %q", b.Keys, b.Line, b.EndLine, b.Snippet, b.ManagedZone)
	}
	var names []string
	for _, d := range b.Directives {
		names = append(names, d.Name)
	}
	wantNames := []string{"errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache", "loop", "reload", "loadbalance"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("directives = %v, want %v", names, wantNames)
	}
	fwd := b.Directives[5]
	if want := []string{".", "/etc/resolv.conf", "{", "max_concurrent", "1000", "}"}; !slices.Equal(fwd.Args, want) || fwd.Line != 13 {
		t.Errorf("forward = %v at line %d, want %v at line 13", fwd.Args, fwd.Line, want)
	}

	k3s := mustParse(t, readInput(t, "k3s-imports"))
	if want := []Import{{Pattern: "/etc/coredns/custom/*.server", Line: 22}}; !reflect.DeepEqual(k3s.Imports, want) {
		t.Errorf("k3s imports = %+v, want %+v", k3s.Imports, want)
	}
	last := k3s.Blocks[0].Directives[len(k3s.Blocks[0].Directives)-1]
	if last.Name != "import" || !slices.Equal(last.Args, []string{"/etc/coredns/custom/*.override"}) {
		t.Errorf("k3s last directive = %s %v", last.Name, last.Args)
	}

	sn := mustParse(t, readInput(t, "snippets-and-quotes"))
	if !sn.Blocks[0].Snippet || sn.Blocks[1].Snippet {
		t.Errorf("snippet flags = %v %v, want true false", sn.Blocks[0].Snippet, sn.Blocks[1].Snippet)
	}
	if want := []string{".:53", "dns://.:1053"}; !slices.Equal(sn.Blocks[1].Keys, want) {
		t.Errorf("keys = %v, want %v", sn.Blocks[1].Keys, want)
	}
	quoted := mustParse(t, []byte(`.:53 {
    log . "{remote}:{port} - {>id} \"{type} {class} {name}\"" "a\b" ""
}`))
	if got, want := quoted.Blocks[0].Directives[0].Args, []string{".", `{remote}:{port} - {>id} "{type} {class} {name}"`, `a\b`, ""}; !slices.Equal(got, want) {
		t.Errorf("quoted log args = %q, want %q", got, want)
	}
	if got := sn.Blocks[1].Directives[1].Args[0]; got != "{$CLUSTER_DOMAIN}" {
		t.Errorf("placeholder = %q, want it kept verbatim", got)
	}

	prev := mustParse(t, readInput(t, "previous-run"))
	if got := prev.ManagedZones(); !slices.Equal(got, []string{"demo.internal", "example.dev"}) {
		t.Errorf("managed zones = %v", got)
	}
	if !bytes.Equal(prev.Bytes(), readInput(t, "previous-run")) {
		t.Error("Bytes does not return the parsed text")
	}
}

func TestParseEdgeCases(t *testing.T) {
	cases := []struct {
		name string
		src  string
		keys [][]string
	}{
		{"empty", "", nil},
		{"only comments", "# nothing\n\n   # here\n", nil},
		{"brace on its own line", "example.org\n{\n  whoami\n}\n", [][]string{{"example.org"}}},
		{"keys continued after comma", "a.org,\n  b.org {\n  whoami\n}\n", [][]string{{"a.org", "b.org"}}},
		{"directive on the brace line", ".:53 { whoami\n}\n", [][]string{{".:53"}}},
		{"blocks share a line", "a.org {\n whoami\n} b.org {\n whoami\n}\n", [][]string{{"a.org"}, {"b.org"}}},
		{"byte order mark", "\ufeff.:53 {\n whoami\n}\n", [][]string{{".:53"}}},
		{"hash inside a word hides the rest of the word", ".:53 {\n  whoami#x y\n}\n", [][]string{{".:53"}}},
		{"quoted multi-line word", ".:53 {\n  log \"a\nb\" x\n  whoami\n}\n", [][]string{{".:53"}}},
		{"marker not alone on its line", ".:53 {\n whoami\n} # managed by marina: x.org\nx.org:53 {\n whoami\n}\n", [][]string{{".:53"}, {"x.org:53"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cf := mustParse(t, []byte(tc.src))
			var keys [][]string
			for _, b := range cf.Blocks {
				keys = append(keys, b.Keys)
				if b.ManagedZone != "" {
					t.Errorf("block %v is marked managed by %q", b.Keys, b.ManagedZone)
				}
			}
			if !reflect.DeepEqual(keys, tc.keys) {
				t.Errorf("keys = %v, want %v", keys, tc.keys)
			}
		})
	}
	hash := mustParse(t, []byte(".:53 {\n  whoami#x y # z\n}\n"))
	if d := hash.Blocks[0].Directives[0]; d.Name != "whoami" || !slices.Equal(d.Args, []string{"y"}) {
		t.Errorf("whoami#x y # z = %s %q, want whoami [y] as CoreDNS reads it", d.Name, d.Args)
	}
	multi := mustParse(t, []byte(".:53 {\n  log \"a\nb\" x\n  whoami\n}\n"))
	if d := multi.Blocks[0].Directives; len(d) != 2 || d[1].Name != "whoami" || d[1].Line != 4 {
		t.Errorf("directives after a multi-line word = %+v", d)
	}
}

func TestEditErrors(t *testing.T) {
	kind := string(readInput(t, "kind-kubeadm-1.34"))
	cases := []struct {
		name     string
		src      string
		forwards []Forward
		line     int      // ParseError or ConflictError line; 0 for other errors
		want     []string // substrings of the message
	}{
		{"user block for the zone", kind + "\ndemo.internal:53 {\n    forward . 10.0.0.1\n}\n", nil, 25,
			[]string{"line 25", `"demo.internal:53"`, "not written by marina", "kubectl -n kube-system edit configmap coredns"}},
		{"user block without port, upper case, trailing dot", "Demo.Internal. {\n forward . 10.0.0.1\n}\n", nil, 1,
			[]string{"demo.internal", "not written by marina"}},
		{"user block with dns scheme and several keys", ".:53 {\n whoami\n}\n\nfoo.org dns://example.dev:53 {\n whoami\n}\n", nil, 5,
			[]string{`"foo.org dns://example.dev:53"`, "example.dev"}},
		{"marker separated from its block", "# managed by marina: demo.internal\n\ndemo.internal:53 {\n whoami\n}\n", nil, 3,
			[]string{"not written by marina"}},
		{"unclosed server block", ".:53 {\n    errors\n    forward . /etc/resolv.conf\n", nil, 1,
			[]string{"line 1", "never closed", "'}'"}},
		{"unclosed nested block", ".:53 {\n    errors\n    health {\n       lameduck 5s\n", nil, 3,
			[]string{"line 3", "directive health", "never closed"}},
		{"block without braces", "example.org\nwhoami\n", nil, 2,
			[]string{"line 2", "expected '{'", "example.org"}},
		{"keys without a body", ".:53 {\n whoami\n}\nexample.org\n", nil, 4,
			[]string{"line 4", "no body"}},
		{"block without keys", ".:53 {\n whoami\n}\n\n{\n whoami\n}\n", nil, 5,
			[]string{"line 5", "without an address"}},
		{"brace closing on the directive line", ".:53 {\n    errors }\n", nil, 2,
			[]string{"line 2", "unexpected '}'", "errors"}},
		{"unterminated quote", ".:53 {\n    log \"oops\n}\n", nil, 2,
			[]string{"line 2", "never closed"}},
		{"trailing comma before brace", "a.org, {\n whoami\n}\n", nil, 1,
			[]string{"line 1", "comma"}},
		{"import without argument", "import\n.:53 {\n whoami\n}\n", nil, 1,
			[]string{"line 1", "import needs one argument"}},
		{"import with two arguments", ".:53 {\n whoami\n}\nimport a b\n", nil, 4,
			[]string{"line 4", "only one argument"}},
		{"not UTF-8", ".:53 {\n whoami \xff\n}\n", nil, 2,
			[]string{"line 2", "UTF-8"}},
		{"snippet declared twice", "(a) {\n errors\n}\n(a) {\n log\n}\n", nil, 4,
			[]string{"line 4", "snippet a is declared twice"}},
		{"root zone", kind, []Forward{{Zone: ".", Resolvers: []string{"1.1.1.1"}}}, 0,
			[]string{`zone "."`, "root zone"}},
		{"hostname resolver", kind, []Forward{{Zone: "example.dev", Resolvers: []string{"dns.google"}}}, 0,
			[]string{`resolver "dns.google"`, "not an IP address"}},
		{"resolver that would inject a directive", kind, []Forward{{Zone: "example.dev", Resolvers: []string{"1.1.1.1\n}\n"}}}, 0,
			[]string{"not an IP address"}},
		{"zone that would inject a block", kind, []Forward{{Zone: "x.org {\n", Resolvers: []string{"1.1.1.1"}}}, 0,
			[]string{"may only hold letters"}},
		{"no resolvers", kind, []Forward{{Zone: "example.dev"}}, 0,
			[]string{"example.dev", "no resolvers"}},
		{"zone twice", kind, []Forward{{Zone: "example.dev", Resolvers: []string{"1.1.1.1"}}, {Zone: "EXAMPLE.dev.", Resolvers: []string{"1.1.1.1"}}}, 0,
			[]string{"also forward 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forwards := tc.forwards
			if forwards == nil {
				forwards = defaultForwards
			}
			out, err := Edit([]byte(tc.src), forwards, defaultOptions)
			if err == nil {
				t.Fatalf("Edit succeeded, want an error; output:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var pe *ParseError
			var ce *ConflictError
			switch {
			case errors.As(err, &pe):
				if pe.Line != tc.line {
					t.Errorf("ParseError line = %d, want %d", pe.Line, tc.line)
				}
			case errors.As(err, &ce):
				if ce.Line != tc.line {
					t.Errorf("ConflictError line = %d, want %d", ce.Line, tc.line)
				}
			case tc.line != 0:
				t.Errorf("error %T, want a ParseError or ConflictError at line %d", err, tc.line)
			}
		})
	}
	if _, err := Edit([]byte(kind), defaultForwards, Options{CacheSeconds: -1}); err == nil {
		t.Error("negative cache seconds accepted")
	}
}

// TestEditNoConflict lists blocks for the same names that do not clash
// with marina's plain-DNS port-53 blocks, so Edit must accept them.
func TestEditNoConflict(t *testing.T) {
	for _, src := range []string{
		"demo.internal:5353 {\n forward . 10.0.0.1\n}\n",
		"tls://demo.internal {\n forward . 10.0.0.1\n}\n",
		"grpc://example.dev:53 {\n forward . 10.0.0.1\n}\n",
		"sub.demo.internal:53 {\n forward . 10.0.0.1\n}\n",
		"internal:53 {\n forward . 10.0.0.1\n}\n",
		"{$ZONE}:53 {\n forward . 10.0.0.1\n}\n",
		"[::1]:53 {\n whoami\n}\n",
		"(demo.internal) {\n forward . 10.0.0.1\n}\n",
	} {
		out, err := Edit([]byte(src), defaultForwards, defaultOptions)
		if err != nil {
			t.Errorf("Edit(%q): %v", src, err)
			continue
		}
		checkEdit(t, []byte(src), out, defaultForwards, defaultOptions)
	}
}

// TestEditDuplicateManagedBlock checks that a user's comment lines
// around marina's blocks are kept, and that a duplicate marina block for
// one zone is folded into one.
func TestEditDuplicateManagedBlock(t *testing.T) {
	src := ".:53 {\n    whoami\n}\n\n# managed by marina: demo.internal\ndemo.internal:53 {\n    forward . 1.2.3.4\n}\n" +
		"# user note\n\n# managed by marina: demo.internal\ndemo.internal:53 {\n    forward . 5.6.7.8\n}\n"
	out, err := Edit([]byte(src), defaultForwards[:1], defaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := ".:53 {\n    whoami\n}\n\n# managed by marina: demo.internal\ndemo.internal:53 {\n    errors\n    cache 30\n    forward . 172.30.255.53\n}\n# user note\n"
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	checkEdit(t, []byte(src), out, defaultForwards[:1], defaultOptions)
}

func mustParse(t testing.TB, src []byte) *Corefile {
	t.Helper()
	cf, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return cf
}

func readInput(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "in", name+".Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEditStrayMarker checks the shapes where a marker comment must not
// make marina claim a block: a marina block whose closing brace shares its
// line with another block is not marina's, and removing a block never
// leaves a stray marker comment right above a user's block.
func TestEditStrayMarker(t *testing.T) {
	t.Run("closing brace shared with the next block", func(t *testing.T) {
		src := ".:53 {\n    whoami\n}\n# managed by marina: old.example\nold.example:53 {\n    forward . 1.2.3.4\n} user.example {\n    whoami\n}\n"
		cf := mustParse(t, []byte(src))
		if zones := cf.ManagedZones(); len(zones) != 0 {
			t.Fatalf("managed zones = %v, want none", zones)
		}
		out, err := Edit([]byte(src), defaultForwards, defaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, []byte(src)) {
			t.Fatalf("existing text changed:\n%s", out)
		}
		checkEdit(t, []byte(src), out, defaultForwards, defaultOptions)
	})
	t.Run("stray marker above a removed block", func(t *testing.T) {
		src := ".:53 {\n    whoami\n}\n# managed by marina: x.example\n# managed by marina: y.example\ny.example:53 {\n    forward . 1.2.3.4\n}\nuser.example:53 {\n    whoami\n}\n"
		out, err := Edit([]byte(src), nil, defaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		want := ".:53 {\n    whoami\n}\n# managed by marina: x.example\n\nuser.example:53 {\n    whoami\n}\n"
		if string(out) != want {
			t.Fatalf("got:\n%q\nwant:\n%q", out, want)
		}
		if zones := mustParse(t, out).ManagedZones(); len(zones) != 0 {
			t.Fatalf("after removal, managed zones = %v: the user's block was claimed", zones)
		}
		checkEdit(t, []byte(src), out, nil, defaultOptions)
	})
}
