package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/fleet"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/userfile"
)

func newFleetCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "fleet",
		GroupID: "lab",
		Short:   "Fleets of clusters from a Fleet manifest: create (dependencies, parallelism), list, describe, label, delete, adopt",
	}
	cmd.AddCommand(newFleetCreateCmd(a), newFleetListCmd(a), newFleetDescribeCmd(a), newFleetLabelCmd(a), newFleetDeleteCmd(a), newFleetAdoptCmd(a))
	return cmd
}

// readManifest reads -f (a path, or - for stdin).
func readManifest(a *app, path string) ([]byte, string, error) {
	if path == "-" {
		b, err := userfile.Read(a.in, "<stdin>", fleet.MaxManifestSize)
		return b, "<stdin>", err
	}
	b, err := userfile.ReadFile(path, fleet.MaxManifestSize)
	if err != nil {
		return nil, path, exitcode.NewUsage(fmt.Errorf("fleet manifest: %w", err))
	}
	return b, path, nil
}

func newFleetCreateCmd(a *app) *cobra.Command {
	var file string
	var dryRun, adopt bool
	var maxParallel int
	cmd := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Plan and create a fleet: create/skip/adopt/recreate per cluster, then a DAG scheduler",
		Long: `Read a Fleet manifest (apiVersion marina.dev/v1alpha1, kind Fleet), validate it (every
problem with its line), print the plan — per cluster: create, skip (exists and complete),
adopt (--adopt: a cluster outside the fleet) or recreate (left half-made by a failed
run) with its slot and options — and, unless --dry-run, run it: a cluster starts once
its dependencies are done, at most --max-parallel at once; spec.strategy FailFast stops
starting new clusters after the first failure, ContinueOnError goes on with independent
ones. Ends with a summary; exit 1 when a cluster failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			if file == "" {
				errs = append(errs, errors.New("-f FILE is required (- reads stdin)"))
			}
			if msg := fleet.CheckMaxParallel(maxParallel); msg != "" { // spec.maxParallel's rule
				errs = append(errs, fmt.Errorf("--max-parallel: %s", msg))
			}
			if err := usageProblems(errs); err != nil {
				return err
			}
			lb, l, closeLab, err := a.openLab(cmd.Context(), withPlugins)
			if err != nil {
				return err
			}
			defer closeLab()
			f, err := loadFleetManifest(a, file, l.Config)
			if err != nil {
				return err
			}
			bridge, err := netip.ParsePrefix(l.Config.Network.BridgeCIDR)
			if err != nil {
				return err
			}
			c, err := lb.OpenClusters(cmd.Context())
			if err != nil {
				if dryRun {
					// A plan needs the live clusters; without a running lab it
					// is the plan of an empty lab.
					c = nil
				} else {
					return err
				}
			}
			live := fleet.LiveState{Clusters: map[string]fleet.LiveCluster{}}
			var busy map[int]string
			if c != nil {
				infos, err := lb.ListClusters(cmd.Context(), c)
				if err != nil {
					return err
				}
				live = lab.LiveState(infos)
				if busy, err = c.BusyPorts(cmd.Context()); err != nil {
					return err
				}
			}
			plan, err := fleet.Plan(f, live, fleet.PlanOptions{Adopt: adopt, MaxParallel: maxParallel, Bridge: bridge, BusyPorts: busy})
			if err != nil {
				return exitcode.NewUsage(err)
			}
			if err := plan.Table(a.out); err != nil {
				return err
			}
			if dryRun {
				return nil
			}
			var mu sync.Mutex // one cluster's progress lines at a time
			r, err := a.renderer(pipelineFlags{output: "plain"})
			if err != nil {
				return err
			}
			defer r.Close()
			sum := fleet.Run(cmd.Context(), plan, fleet.RunOptions{
				Create: func(ctx context.Context, pc fleet.PlannedCluster) error {
					if pc.Action == fleet.ActionRecreate {
						if err := lb.DeleteCluster(ctx, c, pc.Name, lifecycle.Options{}); err != nil {
							return fmt.Errorf("delete the half-created %s: %w", pc.Name, err)
						}
					}
					_, err := lb.CreateCluster(ctx, c, specOf(pc, l.Config), lifecycle.Options{Renderer: lockedRenderer{r, &mu}})
					return err
				},
				Adopt: func(ctx context.Context, pc fleet.PlannedCluster) error {
					return lb.SetFleet(ctx, c, pc.Name, pc.Fleet)
				},
				OnEvent: func(ev fleet.Event) {
					mu.Lock()
					defer mu.Unlock()
					fmt.Fprintf(a.err, "fleet %s: %s %s %s\n", f.Metadata.Name, ev.Result.Name, ev.Kind, ev.Result.Outcome)
				},
			})
			fmt.Fprintln(a.out)
			if err := sum.Write(a.out); err != nil {
				return err
			}
			return sum.Failure()
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "Fleet manifest (- for stdin)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan, change nothing")
	cmd.Flags().BoolVar(&adopt, "adopt", false, "make complete clusters of the manifest that belong to no fleet members")
	cmd.Flags().IntVar(&maxParallel, "max-parallel", 0, fmt.Sprintf("clusters created at once, 0 or more (overrides spec.maxParallel; 0 = spec.maxParallel, else %d)", fleet.DefaultMaxParallel))
	return cmd
}

// lockedRenderer serializes the renderer between concurrent creates.
type lockedRenderer struct {
	r  lifecycle.Renderer
	mu *sync.Mutex
}

func (l lockedRenderer) Handle(ev lifecycle.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r.Handle(ev)
}

func (l lockedRenderer) Close() {}

// knownPlugins are the plugin names a manifest may switch per cluster.
func knownPlugins(cfg *config.Config) []string {
	names := map[string]bool{}
	for n := range builtins() {
		names[n] = true
	}
	for n := range cfg.Plugins {
		names[n] = true
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// specOf turns a planned fleet member into a cluster spec.
func specOf(pc fleet.PlannedCluster, cfg *config.Config) lab.ClusterSpec {
	spec := lab.ClusterSpec{Name: pc.Name, Slot: pc.Slot, Region: pc.Region, Zone: pc.Zone, Labels: pc.Labels,
		Workers: pc.Workers, Fleet: pc.Fleet}
	if pc.NodeVersion != "" {
		spec.NodeImage = "kindest/node:" + pc.NodeVersion
	}
	switch pc.Registries.Mode {
	case fleet.RegistriesNone:
		spec.Exclude = append(spec.Exclude, "registries")
	case fleet.RegistriesSubset:
		if len(pc.Registries.Names) == 0 {
			spec.Exclude = append(spec.Exclude, "registries")
		} else {
			spec.Mirrors = pc.Registries.Names
		}
	}
	for name, ps := range pc.Plugins {
		if ps.Enabled != nil && !*ps.Enabled {
			spec.Exclude = append(spec.Exclude, name)
		}
	}
	sort.Strings(spec.Exclude)
	return spec
}
