package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/lifecycle"
)

func newClusterE2ECmd(a *app) *cobra.Command {
	var opts lab.E2EOptions
	var output, progress string
	cmd := &cobra.Command{
		Use:   "e2e NAME",
		Short: "Check a cluster end to end: a LoadBalancer Service answers by IP and by DNS name from this machine",
		Long: `Check a cluster the way its users reach it. In a new namespace marina-e2e-<random>,
deploy an HTTP server (` + lab.DefaultE2EImage + `, netexec on port 8080; the
cluster pulls it like any image, through a registry mirror when one serves its registry)
behind a LoadBalancer Service "echo" on port 80, then:

  1. wait for the Deployment to be available and the Service to get an address;
  2. check the address is in the cluster slot's MetalLB pool;
  3. GET http://<address>/ from this machine;
  4. resolve echo.<namespace>.<cluster>.<zone> with the lab's DNS server (dns.serverIP,
     not this machine's resolver) until it answers that address;
  5. GET http://<name>/, dialling the address the lab's DNS server gave.

The namespace is deleted afterwards, also when a check fails or on Ctrl-C; --keep leaves
it (and prints how to reach and delete it). --timeout bounds steps 1-5 together. Each
failed check says what it expected, what it saw and the likely fix. The DNS steps are
skipped when the localdns or externaldns plugin is disabled.

--image runs another image instead: it must serve HTTP on --port and answer 2xx on --path
(it gets no arguments).

Exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments,
130 when interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := kind.ValidateName(name); err != nil {
				return exitcode.NewUsage(err)
			}
			if opts.Timeout <= 0 {
				return exitcode.NewUsage(fmt.Errorf("--timeout %v: must be positive, e.g. 3m", opts.Timeout))
			}
			if opts.Port < 1 || opts.Port > 65535 {
				return exitcode.NewUsage(fmt.Errorf("--port %d: must be 1-65535", opts.Port))
			}
			if !strings.HasPrefix(opts.Path, "/") {
				return exitcode.NewUsage(fmt.Errorf("--path %q: must start with /, e.g. /healthz", opts.Path))
			}
			// Progress goes to stderr when stdout carries the JSON or YAML result.
			w := a.out
			if output != "text" {
				w = a.err
			}
			renderer, err := lifecycle.NewRenderer(w, progress, lifecycle.IsTerminal(w))
			if err != nil {
				return exitcode.NewUsage(fmt.Errorf("--progress %q: use auto, plain or json", progress))
			}
			lb, c, err := a.labClusters(cmd.Context())
			if err != nil {
				return err
			}
			opts.Renderer = renderer
			res, runErr := lb.ClusterE2E(cmd.Context(), c, name, opts)
			renderer.Close()
			if res == nil {
				return runErr
			}
			if output != "text" {
				if err := PrintStructured(a.out, output, res); err != nil {
					return errors.Join(runErr, err)
				}
				return runErr
			}
			printE2E(a.out, res)
			return runErr
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.Keep, "keep", false, "leave the namespace and its workload in place (also when a check fails)")
	fl.DurationVar(&opts.Timeout, "timeout", lab.DefaultE2ETimeout, "bound of the checks, from the namespace's creation to the last answer")
	fl.StringVar(&opts.Image, "image", "", "image of the HTTP server (default "+lab.DefaultE2EImage+" running netexec)")
	fl.IntVar(&opts.Port, "port", lab.DefaultE2EPort, "container port the Service targets")
	fl.StringVar(&opts.Path, "path", lab.DefaultE2EPath, "path the HTTP checks GET (2xx expected)")
	fl.StringVar(&progress, "progress", "auto", "progress output: auto (live on a terminal, plain lines otherwise), plain, or json (one event per line); on stderr with -o json|yaml")
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// printE2E writes the result's summary after the progress lines.
func printE2E(w io.Writer, res *lab.E2EResult) {
	if res.Passed {
		fmt.Fprintf(w, "\nCluster %s passed e2e in %s:\n", res.Cluster, (time.Duration(res.DurationMS) * time.Millisecond).Round(100*time.Millisecond))
		fmt.Fprintf(w, "  %s answered from this machine (VIP in slot %d's pool %s)\n", res.URL, res.Slot, strings.Join(res.Pool, ", "))
		if res.DNSSkipped == "" {
			fmt.Fprintf(w, "  %s resolved via %s and answered\n", res.DNSName, res.DNSServer)
		}
	}
	if res.DNSSkipped != "" {
		fmt.Fprintf(w, "  DNS checks skipped: %s\n", res.DNSSkipped)
	}
	switch {
	case res.Kept:
		fmt.Fprintf(w, "\nKept namespace %s in cluster %s (--keep). Reach it:\n", res.Namespace, res.Cluster)
		for _, r := range res.Reach {
			fmt.Fprintf(w, "  %s\n", r)
		}
		fmt.Fprintf(w, "Delete it:\n  %s\n", res.Delete)
	case res.Cleanup == "deleted" && res.Passed:
		fmt.Fprintf(w, "  namespace %s deleted\n", res.Namespace)
	}
}
