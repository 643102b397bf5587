package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
)

// OutputFlag adds -o/--output with the given choices to cmd.
func OutputFlag(cmd *cobra.Command, dst *string, def string, choices ...string) {
	cmd.Flags().StringVarP(dst, "output", "o", def, fmt.Sprintf("output format: one of %v", choices))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return choices, cobra.ShellCompDirectiveNoFileComp
	})
	cmd.PreRunE = ChainPreRun(cmd.PreRunE, func(*cobra.Command, []string) error {
		if !slices.Contains(choices, *dst) {
			return exitcode.NewUsage(fmt.Errorf("--output %q is not supported; use one of %v", *dst, choices))
		}
		return nil
	})
}

// ChainPreRun returns a PreRunE that runs prev, then next.
func ChainPreRun(prev, next func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	if prev == nil {
		return next
	}
	return func(c *cobra.Command, args []string) error {
		if err := prev(c, args); err != nil {
			return err
		}
		return next(c, args)
	}
}

// PrintStructured writes v as indented JSON or as YAML.
func PrintStructured(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		// Through JSON, so YAML has the same keys (json tags) in the same
		// order as -o json.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var node yaml.Node
		if err := yaml.Unmarshal(b, &node); err != nil {
			return err
		}
		blockStyle(&node)
		config.GuardYAML(&node)
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(&node); err != nil {
			return err
		}
		return enc.Close()
	}
	return fmt.Errorf("unknown structured format %q", format)
}

// blockStyle turns JSON's flow style into YAML block style, keeping the
// quoting of strings that need it.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle {
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
