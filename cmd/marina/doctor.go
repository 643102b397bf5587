package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/pluginset"
)

// errChecksFailed makes doctor exit 1 without printing another error line.
var errChecksFailed = errors.New("")

func newDoctorCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "doctor",
		GroupID: "lab",
		Short:   "Check the lab and say how to fix what is wrong (exit 1 when a check fails)",
		Long: `Check the lab: the machine and its Docker engine, the bridge network, every service
container, the local DNS server answering for the zone, each registry mirror answering,
this machine's routes over the lab (a VPN's route over network.bridgeCIDR fails: it
takes the lab's traffic; one over a cluster's service or pod subnet warns), the lab CA
(present, covering the lab, trusted by this machine), the proxy (each answers), the company
CAs of trust.extraCAs (expired or expiring within 30 days warns), free disk space and the
installed plugins' checksums. Each check is OK, WARN or FAIL,
with the command that fixes it.

Exit status: 0 when no check failed (warnings allowed), 1 when one did, 2 when the
config is invalid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, _, _, err := a.openLab(cmd.Context(), readOnly)
			if err != nil {
				return err
			}
			dir, err := marinaDir()
			if err != nil {
				return err
			}
			l := &config.Loaded{Config: lb.Config}
			checks := lb.Doctor(cmd.Context(), lab.DoctorOptions{StateDir: dir, Extra: []func(context.Context) lab.Check{
				func(context.Context) lab.Check {
					entries, store, err := a.resolvePlugins(l)
					if err == nil {
						err = pluginset.Verify(store, entries)
					}
					if err != nil {
						return lab.Check{Name: "plugins", Status: lab.Fail, Detail: err.Error(), Fix: "marina plugin verify; reinstall the plugin named above"}
					}
					return lab.Check{Name: "plugins", Status: lab.OK, Detail: "checksums match the lock file"}
				},
			}})
			if output != "text" {
				if err := PrintStructured(a.out, output, checks); err != nil {
					return err
				}
			} else {
				printChecks(a.out, checks)
			}
			if lab.Failed(checks) {
				return errChecksFailed
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func printChecks(w io.Writer, checks []lab.Check) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	failed, warned := 0, 0
	for _, c := range checks {
		fmt.Fprintf(tw, "[%s]\t%s\t%s\n", c.Status, c.Name, c.Detail)
		if c.Fix != "" && c.Status != lab.OK {
			fmt.Fprintf(tw, "\t  fix:\t%s\n", c.Fix)
		}
		switch c.Status {
		case lab.Fail:
			failed++
		case lab.Warn:
			warned++
		}
	}
	_ = tw.Flush()
	for _, c := range checks {
		if c.Instructions != "" && c.Status != lab.OK {
			fmt.Fprintf(w, "\n%s:\n%s", c.Name, c.Instructions)
		}
	}
	switch {
	case failed > 0:
		fmt.Fprintf(w, "\n%d of %d checks failed.\n", failed, len(checks))
	case warned > 0:
		fmt.Fprintf(w, "\nNo check failed; %d warning(s).\n", warned)
	default:
		fmt.Fprintf(w, "\nAll %d checks passed.\n", len(checks))
	}
}
