package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/core/termsafe"
)

// printConfigFields writes the fields (pluginset.ConfigFields) as `plugin
// info` shows them: one line per field (path, type, rules, default), its
// description indented below. Everything the plugin sent is cleaned for
// the terminal.
func printConfigFields(w io.Writer, fields []pluginset.ConfigField) {
	for _, f := range fields {
		attrs := append([]string{f.Type}, f.Rules...)
		if f.Default != "" {
			attrs = append(attrs, "default "+termsafe.Excerpt(f.Default, 60))
		}
		fmt.Fprintf(w, "  %s (%s)\n", termsafe.Line(f.Path), termsafe.Line(strings.Join(attrs, "; ")))
		if f.Description != "" {
			fmt.Fprintf(w, "      %s\n", termsafe.Line(f.Description))
		}
	}
}
