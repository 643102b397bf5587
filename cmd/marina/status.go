package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/bcollard/marina/core/config"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/vm"
)

func newStatusCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "status",
		Aliases: []string{"st"},
		GroupID: GroupLab,
		Short:   "Show the machine, the bridge network and the services marina runs",
		Long: `Show the lab's state without changing anything: the machine (VM or this host's Docker),
the shared bridge network (and whether it matches the config), and every service
container marina's plugins run (registry mirrors, the local DNS pair, ...).

Exit status is 0 when the status could be read, whatever it says; use
marina doctor for a pass/fail check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.status(cmd, output) },
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// status is `marina status -o output`.
func (a *app) status(cmd *cobra.Command, output string) error {
	lb, _, _, err := a.openLab(cmd.Context(), readOnly)
	if err != nil {
		return err
	}
	st, err := lb.Status(cmd.Context())
	if err != nil {
		return err
	}
	v := lab.View{Status: st, Clusters: []lab.ClusterInfo{}}
	if st.Machine.State == vm.Running {
		if c, err := lb.ClustersOn(st.Machine); err == nil {
			if list, err := lb.ListClusters(cmd.Context(), c); err == nil {
				v.Clusters = list
			}
		}
	}
	if output != "text" {
		return PrintStructured(a.out, output, v)
	}
	printStatusView(a.out, v)
	return nil
}

// Print renders v as `marina status` text.
func printStatusView(w io.Writer, v lab.View) {
	printStatus(w, v.Status)
	printClusters(w, v.Clusters, v.Machine.State == vm.Running)
}

// printClusters renders the clusters' lines of status.
func printClusters(w io.Writer, list []lab.ClusterInfo, running bool) {
	if !running {
		return
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "Clusters: none (marina cluster create NAME)")
		return
	}
	fmt.Fprintln(w, "Clusters:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSLOT\tAPI\tREADY\tSTATUS")
	for _, c := range list {
		status := "complete"
		switch {
		case c.Problem != "":
			status = c.Problem
		case !c.Complete:
			status = "incomplete"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d/%d\t%s\n", c.Name, c.Slot, c.APIPort, c.Ready, c.Nodes, status)
	}
	_ = tw.Flush()
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
	printProxy(w, st.Proxy)
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
	for _, x := range []struct {
		label string
		c     *lab.Check
	}{{"Route:", st.Route}, {"Resolver:", st.Resolver}} {
		if x.c == nil {
			continue
		}
		line := fmt.Sprintf("%-9s %s %s", x.label, x.c.Status, x.c.Detail)
		if x.c.Fix != "" {
			line += " (fix: " + x.c.Fix + ")"
		}
		fmt.Fprintln(w, line)
	}
	if len(st.Services) == 0 {
		fmt.Fprintln(w, "Services: none")
		return
	}
	fmt.Fprintln(w, "Services:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tCOMPONENT\tSTATE\tIP\tIMAGE")
	for _, s := range st.Services {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.Name, Dash(s.Component), s.State, Dash(s.IP), s.Image)
	}
	_ = tw.Flush()
}

// printProxy says which proxy the lab's traffic out takes, from where.
func printProxy(w io.Writer, p config.EffectiveProxy) {
	if !p.Set() {
		fmt.Fprintln(w, "Proxy:    none (proxy.http/https in the config, or $HTTP_PROXY/$HTTPS_PROXY, set one)")
		return
	}
	for _, x := range []struct{ key, url string }{{"http", p.HTTP}, {"https", p.HTTPS}} {
		if x.url != "" {
			fmt.Fprintf(w, "Proxy:    %s via %s (%s)\n", x.key, x.url, p.Sources[x.key])
		}
	}
	fmt.Fprintf(w, "No proxy: %d entries, the lab's included (-o json lists them)\n", len(p.NoProxy))
}
