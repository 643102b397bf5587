// Package scaffold writes a new plugin project (`marina plugin new NAME`): a
// Go module that builds, passes its own tests with the SDK's harness, and
// installs with `marina plugin install`.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/Masterminds/semver/v3"
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
	// SDKVersion is the marina module version to require (a release such as v0.3.0).
	SDKVersion string
	// SDKPath, if set, builds against a local marina checkout (a replace directive).
	SDKPath string
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Write creates the project and returns the files written (relative to Dir).
func Write(o Options) ([]string, error) {
	if !nameRE.MatchString(o.Name) {
		return nil, fmt.Errorf("plugin name %q: use lower-case letters, digits and '-', starting with a letter (e.g. acme-metrics)", o.Name)
	}
	if o.Module == "" {
		o.Module = "example.com/marina-plugin-" + o.Name
	}
	if o.Description == "" {
		o.Description = "The " + o.Name + " marina plugin."
	}
	o.Description = strings.ReplaceAll(o.Description, `"`, `'`)
	switch {
	case o.SDKPath != "":
		abs, err := filepath.Abs(o.SDKPath)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(abs, "sdk", "sdk.go")); err != nil {
			return nil, fmt.Errorf("--sdk %s is not a marina checkout (no sdk/sdk.go)", o.SDKPath)
		}
		o.SDKPath = abs
		if o.SDKVersion == "" {
			o.SDKVersion = "v0.0.0"
		}
	case o.SDKVersion == "":
		return nil, errors.New("no SDK version: this marina is a development build; pass --sdk /path/to/marina/checkout (or --sdk-version vX.Y.Z)")
	default:
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(o.SDKVersion, "v")); err != nil || !strings.HasPrefix(o.SDKVersion, "v") {
			return nil, fmt.Errorf("SDK version %q must look like v1.2.3", o.SDKVersion)
		}
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
	// Render everything first: nothing is written if a template fails.
	rendered := map[string][]byte{}
	for src, dst := range files {
		t, err := template.ParseFS(templates, "template/"+src)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, o); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", dst, err)
		}
		rendered[dst] = b.Bytes()
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
