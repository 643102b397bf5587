package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// frontModules are the modules the front may link besides the standard
// library: cobra and what core/config needs (viper and its decoders, yaml).
// Not Masterminds/semver: its package init (two regular expressions
// compiled) was a third of the front's (config.CheckConstraint). Each costs start-up on every command the front answers;
// issue 14's goal is the front at most 3x a hello-world program.
var frontModules = []string{
	"github.com/bcollard/marina",
	"github.com/docker/go-units",
	"github.com/fsnotify/fsnotify",
	"github.com/go-viper/mapstructure/v2",
	"github.com/pelletier/go-toml/v2",
	"github.com/sagikazarmark/locafero",
	"github.com/sourcegraph/conc",
	"github.com/spf13/afero",
	"github.com/spf13/cast",
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"github.com/spf13/viper",
	"github.com/subosito/gotenv",
	"go.yaml.in/yaml/v3",
	"golang.org/x/sys",
	"golang.org/x/text",
}

// frontPackages are marina's own packages the front may link: none starts
// a process, opens a connection or does work at init.
var frontPackages = []string{
	"github.com/bcollard/marina/cmd/marina",
	"github.com/bcollard/marina/cmd/marina/internal/dispatch",
	"github.com/bcollard/marina/core/atomicfile",
	"github.com/bcollard/marina/core/buildinfo",
	"github.com/bcollard/marina/core/cli",
	"github.com/bcollard/marina/core/config",
	"github.com/bcollard/marina/core/dockerprobe",
	"github.com/bcollard/marina/core/exitcode",
	"github.com/bcollard/marina/core/homeenv",
	"github.com/bcollard/marina/core/labstatus",
	"github.com/bcollard/marina/core/pluginlist",
	"github.com/bcollard/marina/core/pluginsign",
	"github.com/bcollard/marina/core/slot",
	"github.com/bcollard/marina/core/suggest",
	"github.com/bcollard/marina/core/termsafe",
	"github.com/bcollard/marina/core/userfile",
	"github.com/bcollard/marina/core/vm",
	"github.com/bcollard/marina/core/vm/statuscache",
	"github.com/bcollard/marina/core/yamlsafe",
}

// TestFrontImportGraph: the front's import graph, as released for Linux
// (no cgo) and macOS (cgo), holds only the modules and marina packages
// above. A package that brings Docker's or Kubernetes' clients, gRPC,
// go-plugin or Lima in fails here, with its import chain.
func TestFrontImportGraph(t *testing.T) {
	for _, p := range []struct{ goos, goarch, cgo string }{{"linux", "amd64", "0"}, {"darwin", "arm64", "1"}} {
		t.Run(p.goos, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{.Standard}}|{{with .Module}}{{.Path}}{{end}}|{{join .Imports \" \"}}", ".")
			cmd.Env = append(cmd.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED="+p.cgo)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			imports := map[string][]string{}
			var outside []string
			seen := 0
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.SplitN(line, "|", 4)
				if len(f) != 4 {
					t.Fatalf("go list line %q", line)
				}
				seen++
				imports[f[0]] = strings.Fields(f[3])
				if f[1] == "true" {
					continue
				}
				if !slices.Contains(frontModules, f[2]) ||
					f[2] == "github.com/bcollard/marina" && !slices.Contains(frontPackages, f[0]) {
					outside = append(outside, f[0])
				}
			}
			if !slices.ContainsFunc(frontModules, func(m string) bool { _, ok := imports[m]; return ok }) || seen < 50 {
				t.Fatalf("go list listed %d packages, none of the front's modules: the output was not read right", seen)
			}
			for _, pkg := range outside {
				t.Errorf("%s is in the front's import graph on %s/%s:\n    %s\nThe front (cmd/marina) answers version and config "+
					"itself and must start like a small CLI: move what needs it to marina-core (cmd/marina-core), or, if "+
					"the package is light (GODEBUG=inittrace=1 shows its init), add it to frontModules/frontPackages in "+
					"cmd/marina/importgraph_test.go.", pkg, p.goos, p.goarch, strings.Join(chain(imports, "github.com/bcollard/marina/cmd/marina", pkg), "\n -> "))
			}
		})
	}
}

// chain is an import path from "from" to "to" in imports (breadth first).
func chain(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var c []string
			for ; p != ""; p = prev[p] {
				c = append([]string{p}, c...)
			}
			return c
		}
		for _, q := range imports[p] {
			if _, ok := prev[q]; !ok {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{from, "...", to}
}
