package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/buildinfo"
)

func newVersionCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print marina's version, commit, build date, Go version and platform",
		GroupID: "setup",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			i := buildinfo.Get()
			if output != "text" {
				return printStructured(a.out, output, i)
			}
			fmt.Fprintf(a.out, "marina %s\n  commit:     %s\n  built:      %s\n  go:         %s\n  platform:   %s/%s\n",
				i.Version, i.Commit, i.BuildDate, i.GoVersion, i.OS, i.Arch)
			return nil
		},
	}
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}
