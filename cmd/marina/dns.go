package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/lab"
)

func newDNSCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dns",
		GroupID: "lab",
		Short:   "Query the lab's local DNS zone",
	}
	cmd.AddCommand(newDNSLookupCmd(a))
	return cmd
}

func newDNSLookupCmd(a *app) *cobra.Command {
	var output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "lookup NAME",
		Short: "Resolve NAME with the lab's DNS server directly (bypassing this machine's resolver)",
		Long: `Resolve NAME by asking the lab's DNS server (dns.serverIP) directly. Use it to tell a
missing record from a host resolver that does not send the zone to marina: when
this answers and your browser does not, check marina doctor's resolver line.

Exit status: 0 when the name has addresses, 1 when it does not exist or the server
does not answer.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.loadConfig()
			if err != nil {
				return err
			}
			name := strings.TrimSuffix(args[0], ".")
			server := l.Config.DNS.ServerIP
			addrs, err := lab.LookupVia(cmd.Context(), server, name, timeout)
			if err != nil {
				var dnsErr *net.DNSError
				if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
					return fmt.Errorf("%s: no such name in the lab's DNS (server %s)", name, server)
				}
				return fmt.Errorf("%s: the lab's DNS server %s did not answer: %w (is the lab up? marina doctor)", name, server, err)
			}
			if output != "text" {
				return PrintStructured(a.out, output, map[string]any{"name": name, "server": server, "addresses": addrs})
			}
			for _, ad := range addrs {
				fmt.Fprintln(a.out, ad)
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	cmd.PreRunE = ChainPreRun(cmd.PreRunE, func(*cobra.Command, []string) error {
		if timeout <= 0 {
			return exitcode.NewUsage(errors.New("--timeout must be positive, e.g. 3s"))
		}
		return nil
	})
	return cmd
}
