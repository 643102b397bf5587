package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/vm"
)

func newStatusCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "status",
		Aliases: []string{"st"},
		GroupID: "lab",
		Short:   "Show the machine, the bridge network and the services marina runs",
		Long: `Show the lab's state without changing anything: the machine (VM or this host's Docker),
the shared bridge network (and whether it matches the config), and every service
container marina's plugins run (registry mirrors, the local DNS pair, ...).

Exit status is 0 when the status could be read, whatever it says; use
marina doctor for a pass/fail check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lb, err := a.statusLab()
			if err != nil {
				return err
			}
			st, err := lb.Status(cmd.Context())
			if err != nil {
				return err
			}
			if output != "text" {
				return printStructured(a.out, output, st)
			}
			printStatus(a.out, st)
			return nil
		},
	}
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// printStatus renders st as text.
func printStatus(w io.Writer, st *lab.Status) {
	m := st.Machine
	state := string(m.State)
	if m.Detail != "" {
		state += " (" + m.Detail + ")"
	}
	fmt.Fprintf(w, "Machine:  %s, driver %s: %s\n", m.Name, m.Driver, state)
	if m.DockerHost != "" {
		fmt.Fprintf(w, "Docker:   %s\n", m.DockerHost)
	}
	if m.GuestIP != "" {
		fmt.Fprintf(w, "Guest IP: %s\n", m.GuestIP)
	}
	for _, d := range m.Drift {
		fmt.Fprintf(w, "Drift:    %s\n", d)
	}
	if m.State != vm.Running {
		fmt.Fprintln(w, "\nThe machine is not running: run marina up.")
		return
	}
	n := st.Network
	switch {
	case !n.Present:
		fmt.Fprintf(w, "Network:  %s %s: missing (run marina up)\n", n.Name, n.Subnet)
	case n.Problem != "":
		fmt.Fprintf(w, "Network:  %s: differs from the config: %s\n", n.Name, n.Problem)
	default:
		fmt.Fprintf(w, "Network:  %s %s, ip-range %s, bridge %s: ok\n", n.Name, n.Subnet, n.IPRange, n.Bridge)
	}
	if len(st.Services) == 0 {
		fmt.Fprintln(w, "Services: none")
		return
	}
	fmt.Fprintln(w, "Services:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tCOMPONENT\tSTATE\tIP\tIMAGE")
	for _, s := range st.Services {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.Name, dash(s.Component), s.State, dash(s.IP), s.Image)
	}
	_ = tw.Flush()
}
