package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/lifecycle"
)

func newDownCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var removeRoute bool
	cmd := &cobra.Command{
		Use:     "down",
		GroupID: "lab",
		Short:   "Stop the lab's VM, keeping everything in it (marina up starts it again)",
		Long: `Stop the lab: run every plugin's PreDown hook, then stop the VM. Clusters, services,
caches and kubeconfigs are kept; marina up brings everything back.

With vm.driver host there is no VM to stop: the Docker engine belongs to this
machine, and the services keep running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withLock(cmd.Context(), func() error {
				lb, _, closeLab, err := a.openLab(cmd.Context(), withPlugins)
				if err != nil {
					return err
				}
				defer closeLab()
				steps, err := lb.DownSteps(cmd.Context(), removeRoute)
				if err != nil {
					return err
				}
				_, err = a.runPipeline(cmd.Context(), "down", steps, f)
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&removeRoute, "remove-route", false, "also remove the host route to the bridge (asks for sudo)")
	return cmd
}

func newDestroyCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var yes, purgeCache bool
	cmd := &cobra.Command{
		Use:     "destroy",
		GroupID: "lab",
		Short:   "Delete the lab: services, bridge network, host changes and the VM",
		Long: `Delete the lab: every plugin's PreDestroy hook (services removed, their host changes
undone), the bridge network, and the VM with everything in it. The host registry
cache (~/.marina/registry-cache) is kept unless --purge-cache.

Asks for confirmation on a terminal; without one, --yes is required (nothing is
deleted otherwise, and the exit status is 2).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes && !f.dryRun {
				ok, err := confirm(a, "Delete the marina lab and everything in it?")
				if err != nil {
					return err
				}
				if !ok {
					return exitcode.NewUsage(errors.New("not confirmed; nothing was deleted"))
				}
			}
			return a.withLock(cmd.Context(), func() error {
				lb, _, closeLab, err := a.openLab(cmd.Context(), withPlugins)
				if err != nil {
					return err
				}
				defer closeLab()
				steps, err := lb.DestroySteps(cmd.Context())
				if err != nil {
					return err
				}
				// Clusters first (their cleanup hooks need the services).
				if c, err := lb.OpenClusters(cmd.Context()); err == nil {
					steps = append([]lifecycle.Step{lb.StepDeleteClusters(c)}, steps...)
				}
				if purgeCache {
					dir := lb.Runtime.RegistryCacheDir
					steps = append(steps, lifecycle.NewStep("Purge registry cache",
						func(ctx2 context.Context) ([]lifecycle.Change, error) {
							if _, err := os.Stat(dir); err != nil {
								return nil, nil
							}
							return []lifecycle.Change{{Action: "delete", Target: dir}}, nil
						},
						func(ctx2 context.Context, _ lifecycle.Reporter, _ []lifecycle.Change) error {
							return os.RemoveAll(filepath.Clean(dir))
						}))
				}
				_, err = a.runPipeline(cmd.Context(), "destroy", steps, f)
				if ha, ok := lb.Host.(*hostApplier); ok && err == nil && f.output != "json" {
					for _, m := range ha.Manual() {
						fmt.Fprintf(a.out, "\n%s", m)
					}
				}
				if err == nil && f.output != "json" {
					if manual := lb.ManualHostChanges(); len(manual) > 0 {
						fmt.Fprintln(a.out, "\nUndo these host changes by hand if you made them:")
						for _, c := range manual {
							fmt.Fprintf(a.out, "  %s\n", c)
						}
					}
				}
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required without a terminal)")
	cmd.Flags().BoolVar(&purgeCache, "purge-cache", false, "also delete the host registry cache")
	return cmd
}

// confirm asks a yes/no question on the terminal. Without a terminal it
// fails (exit 2) with the flag to pass, rather than guessing an answer.
func confirm(a *app, question string) (bool, error) {
	in := terminalInput(a)
	if in == nil {
		return false, exitcode.NewUsage(errors.New("no terminal to confirm on: pass --yes to proceed"))
	}
	return confirmOn(in, a.err, question), nil
}
