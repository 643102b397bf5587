package main

import (
	"fmt"
	"text/tabwriter"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
)

func newRegistryCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "registry",
		GroupID: "lab",
		Short:   "List the pull-through registry mirrors and clean their caches",
	}
	cmd.AddCommand(newRegistryListCmd(a), newRegistryCleanCmd(a))
	return cmd
}

func newRegistryListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the registry mirrors: name, port, upstream, status, cache size",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, _, _, err := a.openLab(cmd.Context(), readOnly)
			if err != nil {
				return err
			}
			mirrors, err := lb.Mirrors(cmd.Context())
			if err != nil {
				return err
			}
			if output != "text" {
				return PrintStructured(a.out, output, mirrors)
			}
			if len(mirrors) == 0 {
				fmt.Fprintln(a.out, "No registry mirrors (is the registries plugin enabled, and marina up done?)")
				return nil
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPORT\tUPSTREAM\tSTATUS\tCACHE\tSIZE")
			for _, m := range mirrors {
				size := "?"
				if m.CacheBytes >= 0 {
					size = units.HumanSize(float64(m.CacheBytes))
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.Name, m.Port, m.Upstream, m.State, m.Cache, size)
			}
			return tw.Flush()
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func newRegistryCleanCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "clean-cache [NAME]",
		Short: "Delete a mirror's cache (all mirrors without NAME); marina up recreates the mirror empty",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withLock(cmd.Context(), func() error {
				lb, _, _, err := a.openLab(cmd.Context(), readOnly)
				if err != nil {
					return err
				}
				name := ""
				if len(args) == 1 {
					name = args[0]
				}
				cleaned, err := lb.CleanCache(cmd.Context(), name)
				for _, n := range cleaned {
					fmt.Fprintf(a.out, "cleaned %s (container and cache removed)\n", n)
				}
				if err != nil {
					return err
				}
				if len(cleaned) > 0 {
					fmt.Fprintln(a.out, "Run marina up to start the mirrors again with empty caches.")
				}
				return nil
			})
		},
	}
}
