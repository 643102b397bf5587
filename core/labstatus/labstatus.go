// Package labstatus is what `marina status` reports and how it prints it:
// the lab's machine, bridge network, host checks, service containers and
// clusters. core/lab fills it in marina-core; the front (cmd/marina) fills
// it for a lab whose machine is certainly not running, without Docker's
// client, and both print it with the functions here, so the two cannot
// differ. Types only and text: no I/O beyond the writer given.
package labstatus

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/bcollard/marina/core/cli"
	"github.com/bcollard/marina/core/vm"
)

// Status is what `marina status` reports.
type Status struct {
	Machine  vm.Status       `json:"machine"`
	Network  NetworkStatus   `json:"network"`
	Services []ServiceStatus `json:"services"`
	// Route is the host route to the bridge (lima driver only).
	Route *Check `json:"route,omitempty"`
	// Resolver says whether the host sends the zone to the lab's DNS.
	Resolver *Check `json:"resolver,omitempty"`
}

// NetworkStatus is the bridge network's state.
type NetworkStatus struct {
	Name    string `json:"name"`
	Subnet  string `json:"subnet"`
	IPRange string `json:"ipRange,omitempty"`
	Present bool   `json:"present"`
	// Problem says how the live network differs from the config.
	Problem string `json:"problem,omitempty"`
	Bridge  string `json:"bridge,omitempty"`
}

// ServiceStatus is one container marina's plugins run on the Docker host
// (registry mirrors, the local DNS pair, ...).
type ServiceStatus struct {
	Name      string `json:"name"`
	Component string `json:"component,omitempty"`
	Image     string `json:"image"`
	State     string `json:"state"`
	Running   bool   `json:"running"`
	IP        string `json:"ip,omitempty"`
}

// CheckStatus is the outcome of one check (doctor's, or status' route and
// resolver lines).
type CheckStatus string

// The outcomes.
const (
	OK   CheckStatus = "OK"
	Warn CheckStatus = "WARN"
	Fail CheckStatus = "FAIL"
)

// Check is one doctor finding.
type Check struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	Detail string      `json:"detail,omitempty"`
	// Fix is the command or action that repairs a WARN or FAIL.
	Fix string `json:"fix,omitempty"`
	// Instructions are longer steps behind Fix (several lines, e.g. the
	// resolver files to add by hand), shown after the table.
	Instructions string `json:"instructions,omitempty"`
}

// ClusterInfo is one row of `marina cluster list`.
type ClusterInfo struct {
	Name    string `json:"name"`
	Slot    int    `json:"slot"`
	APIPort int    `json:"apiPort"`
	Nodes   int    `json:"nodes"`
	Ready   int    `json:"ready"`
	Version string `json:"version,omitempty"`
	Fleet   string `json:"fleet,omitempty"`
	// Labels are the control-plane node's labels (what -l selects on).
	Labels   map[string]string `json:"labels,omitempty"`
	Complete bool              `json:"complete"`
	// CreatedAt is when the cluster was completed (its marker), or else
	// when its control-plane node registered; RFC 3339, UTC.
	CreatedAt string `json:"createdAt,omitempty"`
	// Age is the time since CreatedAt, as kubectl shows it (5m, 3h, 2d).
	Age        string `json:"age,omitempty"`
	Kubeconfig string `json:"kubeconfig"`
	// Problem says why the cluster could not be read.
	Problem string `json:"problem,omitempty"`
}

// View is `marina status -o json|yaml`: the lab and its clusters.
type View struct {
	*Status
	Clusters []ClusterInfo `json:"clusters"`
}

// Print renders v as `marina status` text.
func Print(w io.Writer, v View) {
	printStatus(w, v.Status)
	printClusters(w, v.Clusters, v.Machine.State == vm.Running)
}

// printClusters renders the clusters' lines of status.
func printClusters(w io.Writer, list []ClusterInfo, running bool) {
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
func printStatus(w io.Writer, st *Status) {
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
	for _, x := range []struct {
		label string
		c     *Check
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
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.Name, cli.Dash(s.Component), s.State, cli.Dash(s.IP), s.Image)
	}
	_ = tw.Flush()
}
