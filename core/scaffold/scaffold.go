// Package scaffold writes a new plugin project (`marina plugin new NAME`): a
// Go module that builds, passes its own tests with the SDK's harness, and
// installs with `marina plugin install`.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

//go:embed template/*.tmpl
var templates embed.FS

// Options configure a new plugin project.
type Options struct {
	// Name is the plugin's name (lower-case letters, digits, '-').
	Name string
	// Dir is where the project is written; it must not exist or be empty.
	Dir string
	// Module is the Go module path; default "example.com/marina-plugin-<name>".
	Module string
	// Description is one line about the plugin.
	Description string
	// SDKVersion is the version of the SDK module
	// (github.com/bcollard/marina/sdk) to require, a release such as v0.3.0.
	SDKVersion string
	// SDKPath, if set, builds against the SDK of a local marina checkout (a
	// replace directive to its sdk/ directory: relative to Dir when the two
	// share a directory below the root, absolute otherwise).
	SDKPath string
}

// data is what the templates see: the options, and the path the go.mod's
// replace directive gives (when SDKPath is set).
type data struct {
	Options
	// SDKReplace is the SDK's directory as go.mod's replace gives it: a
	// ./ or ../ path from the plugin's directory, or absolute.
	SDKReplace string
	// SDKReplaceRelative says SDKReplace is relative.
	SDKReplaceRelative bool
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`) })

// Write creates the project and returns the files written (relative to Dir).
func Write(o Options) ([]string, error) {
	if !nameRE().MatchString(o.Name) {
		return nil, fmt.Errorf("plugin name %q: use lower-case letters, digits and '-', starting with a letter (e.g. acme-metrics)", o.Name)
	}
	if o.Module == "" {
		o.Module = "example.com/marina-plugin-" + o.Name
	}
	if err := module.CheckImportPath(o.Module); err != nil {
		var ipe *module.InvalidPathError
		if errors.As(err, &ipe) {
			err = ipe.Err // the reason, without the whole (perhaps huge) path again
		}
		return nil, fmt.Errorf("--module %s is not a valid Go module path (%v): use slash-separated letters, digits and '-._~', e.g. github.com/you/marina-plugin-%s", excerpt(o.Module), err, o.Name)
	}
	if o.Description == "" {
		o.Description = "The " + o.Name + " marina plugin."
	}
	if err := checkDescription(o.Description); err != nil {
		return nil, err
	}
	switch {
	case o.SDKPath != "":
		abs, err := filepath.Abs(o.SDKPath)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(abs, "sdk", "go.mod")); err != nil {
			return nil, fmt.Errorf("--sdk %s is not a marina checkout (no sdk/go.mod, the SDK module)", o.SDKPath)
		}
		if strings.ContainsFunc(abs, unicode.IsControl) {
			return nil, fmt.Errorf("--sdk %s: the path contains control characters (a newline?); move the checkout to a plain path", excerpt(o.SDKPath))
		}
		o.SDKPath = filepath.Join(abs, "sdk")
		if o.SDKVersion == "" {
			o.SDKVersion = "v0.0.0"
		}
	case o.SDKVersion == "":
		return nil, errors.New("no SDK version: this marina is a development build; pass --sdk /path/to/marina/checkout (or --sdk-version vX.Y.Z)")
	}
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(o.SDKVersion, "v")); err != nil || !strings.HasPrefix(o.SDKVersion, "v") {
		return nil, fmt.Errorf("SDK version %s must look like v1.2.3", strconv.Quote(o.SDKVersion))
	}
	if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s already exists and is not empty; choose another directory", o.Dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	files := map[string]string{
		"go.mod.tmpl":         "go.mod",
		"main.go.tmpl":        "main.go",
		"plugin.go.tmpl":      "plugin.go",
		"plugin_test.go.tmpl": "plugin_test.go",
		"Makefile.tmpl":       "Makefile",
		"README.md.tmpl":      "README.md",
	}
	d := data{Options: o}
	if o.SDKPath != "" {
		d.SDKReplace, d.SDKReplaceRelative = replacePath(o.Dir, o.SDKPath)
	}
	// Render everything first: nothing is written if a template fails.
	rendered := map[string][]byte{}
	for src, dst := range files {
		out, err := render(src, d)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", dst, err)
		}
		rendered[dst] = out
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, dst := range []string{"go.mod", "main.go", "plugin.go", "plugin_test.go", "Makefile", "README.md"} {
		if err := os.WriteFile(filepath.Join(o.Dir, dst), rendered[dst], 0o644); err != nil {
			return written, err
		}
		written = append(written, dst)
	}
	return written, nil
}

// replacePath is the path from the plugin's directory dir to the SDK's
// directory sdk (absolute) for go.mod's replace directive: relative
// (./x or ../x, with slashes) when the two share a directory below the
// filesystem's root, so the plugin builds wherever it and the checkout are
// cloned side by side, or move together; absolute otherwise (a path that
// climbs to the root is no more portable, and it breaks where a directory
// on the way is a symbolic link, as /tmp and /var are on macOS).
func replacePath(dir, sdk string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil || !shareParent(abs, sdk) {
		return sdk, false
	}
	rel, err := filepath.Rel(abs, sdk)
	if err != nil {
		return sdk, false
	}
	rel = filepath.ToSlash(rel)
	if rel != ".." && !strings.HasPrefix(rel, "../") {
		rel = "./" + rel // go.mod reads a path without ./ or ../ as a module path
	}
	return rel, true
}

// shareParent reports whether the absolute paths a and b are on the same
// volume and have the same first directory below its root.
func shareParent(a, b string) bool {
	first := func(p string) string {
		p = strings.TrimLeft(p[len(filepath.VolumeName(p)):], string(filepath.Separator))
		if i := strings.IndexRune(p, filepath.Separator); i >= 0 {
			return p[:i]
		}
		return p
	}
	return filepath.VolumeName(a) == filepath.VolumeName(b) && first(a) != "" && first(a) == first(b)
}

// funcs quote user input for the language of the file it lands in: every
// string value in Go source goes through quote, every path in go.mod through
// modpath. Nothing the user types is pasted into code unquoted.
var funcs = template.FuncMap{
	"quote":   strconv.Quote,
	"modpath": modfile.AutoQuote,
}

// render executes one template; Go files must parse and are gofmt'ed, and
// go.mod must parse, so a scaffold that would not build is an error here
// rather than a surprise in the user's `go build`.
func render(src string, d data) ([]byte, error) {
	t, err := template.New(src).Funcs(funcs).ParseFS(templates, "template/"+src)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(src, ".go.tmpl"):
		return format.Source(b.Bytes())
	case src == "go.mod.tmpl":
		if _, err := modfile.Parse("go.mod", b.Bytes(), nil); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// maxDescription bounds --description: it is one line in `plugin list` and `plugin info`.
const maxDescription = 200

// checkDescription accepts one line of printable text. Quotes, backslashes
// and backticks are fine (they are quoted in the Go source); newlines,
// tabs and other control characters are not: the description is shown on
// one line in marina's listings and must not carry terminal escapes.
func checkDescription(d string) error {
	switch {
	case !utf8.ValidString(d):
		return errors.New("--description is not valid UTF-8; write one line of text")
	case utf8.RuneCountInString(d) > maxDescription:
		return fmt.Errorf("--description is %d characters long; keep it to one line of at most %d", utf8.RuneCountInString(d), maxDescription)
	case strings.ContainsFunc(d, unicode.IsControl):
		return fmt.Errorf("--description %s contains a newline, tab or other control character; write one line of plain text", excerpt(d))
	}
	return nil
}

// excerpt quotes s for an error message, cut to its first 60 characters.
func excerpt(s string) string {
	if r := []rune(s); len(r) > 60 {
		return strconv.Quote(string(r[:60])) + "…"
	}
	return strconv.Quote(s)
}
