package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/vm/limavm"
)

// pipelineFlags are the flags of every state-changing pipeline command.
type pipelineFlags struct {
	dryRun    bool
	reconcile bool
	output    string
}

func (f *pipelineFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "show what would change, change nothing")
	cmd.Flags().BoolVar(&f.reconcile, "reconcile", false, "apply every step even when its check finds nothing to change")
	cmd.Flags().StringVar(&f.output, "progress", "auto", "progress output: auto (live on a terminal, plain lines otherwise), plain, or json (one event per line)")
}

// renderer returns the progress renderer the flags and terminal call for.
func (a *app) renderer(f pipelineFlags) (lifecycle.Renderer, error) {
	r, err := lifecycle.NewRenderer(a.out, f.output, lifecycle.IsTerminal(a.out))
	if err != nil {
		return nil, exitcode.NewUsage(fmt.Errorf("--progress %q: use auto, plain or json", f.output))
	}
	return r, nil
}

// options are the lifecycle options of the flags.
func (f pipelineFlags) options(r lifecycle.Renderer) lifecycle.Options {
	return lifecycle.Options{DryRun: f.dryRun, ForceApply: f.reconcile, Renderer: r}
}

// runPipeline runs steps with the renderer the flags and terminal call for.
func (a *app) runPipeline(ctx context.Context, name string, steps []lifecycle.Step, f pipelineFlags) (*lifecycle.Report, error) {
	r, err := a.renderer(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return lifecycle.Run(ctx, name, steps, f.options(r))
}

func newUpCmd(a *app) *cobra.Command {
	var f pipelineFlags
	var restart, allowOverlap bool
	cmd := &cobra.Command{
		Use:     "up",
		GroupID: "lab",
		Short:   "Bring up the lab: VM, Docker, bridge network, host network, services (idempotent)",
		Long: `Bring up the lab. Every step checks live state first and changes only what differs,
so a second run with nothing to do changes nothing. A plugin whose last PostUp
left its containers running unchanged, with the same config and inputs, is not
started again: its recorded result is reused (--reconcile runs every hook).

Steps: check this machine's routes (a route as specific as network.bridgeCIDR or
more, typically a VPN's, would take the lab's traffic: up stops, naming the route,
its interface and a free bridgeCIDR, unless --allow-route-overlap; wider routes
are warnings), start the machine (a Lima VM on macOS; on Linux with vm.driver
host, the Docker engine of this machine), the shared bridge network, then every enabled
plugin's PostUp hook (registry mirrors, local DNS, ...), then the host changes
plugins request (the resolver for the local zone), shown before they are made.

The config and every plugin's config are validated before anything changes.

A changed vm.cpus, vm.memory or vm.disk is applied to the existing VM (Lima):
at once when it is stopped (the disk grows in place; it never shrinks), and
when it runs after asking on the terminal whether to restart it. Without a
terminal, or when the answer is no, the VM keeps running as it is and up says
how to apply the change later; --restart restarts it without asking.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withLock(cmd.Context(), func() error {
				lb, _, closeLab, err := a.openLab(cmd.Context(), withPlugins)
				if err != nil {
					return err
				}
				defer closeLab()
				// A plugin whose last PostUp left containers that still run
				// unchanged, with the same inputs, is not started again
				// (--reconcile runs every hook).
				if dir, err := marinaDir(); err == nil && lb.Plugins != nil {
					lb.Plugins.SkipSteady(lb.SteadyCache(filepath.Join(dir, "cache", "steady"), f.reconcile))
				}
				// --dry-run says which plugins would run and which recorded
				// results would be reused.
				lb.PlanPlugins = f.dryRun
				lb.AllowRouteOverlap = allowOverlap
				var waiting limavm.Resize
				if ld, ok := lb.Driver.(*limavm.Driver); ok {
					// Asked before the pipeline, whose live output a question
					// would break. A smaller vm.disk (an error here) is
					// reported by the machine step.
					if r, err := ld.PlanResize(cmd.Context()); err == nil {
						ld.Restart, waiting = restartDecision(r, restart, f.dryRun, terminalInput(a), a.err, lb.Config.VM.Name)
					}
				}
				rep, err := a.runPipeline(cmd.Context(), "up", lb.UpSteps(), f)
				for _, w := range lb.Warnings() {
					fmt.Fprintf(a.err, "Warning: %s\n", w)
				}
				if err != nil {
					return err
				}
				if !waiting.Empty() && f.output != "json" {
					if f.dryRun {
						fmt.Fprintf(a.out, "\nThe VM %s runs: `marina up` would ask to restart it to apply %s (%s restarts it without asking).\n", lb.Config.VM.Name, waiting, limavm.RestartCommand)
					} else {
						fmt.Fprintf(a.out, "\nNot applied: %s.\n", waiting.Note(lb.Config.VM.Name))
					}
				}
				if ha, ok := lb.Host.(*hostApplier); ok && f.output != "json" {
					printManual(a.out, ha.Manual(), rep.Changed())
				}
				if manual := lb.ManualHostChanges(); len(manual) > 0 && f.output != "json" {
					fmt.Fprintln(a.out, "\nmarina made no change on this machine for these plugin requests; make them by hand if you want them:")
					for _, c := range manual {
						fmt.Fprintf(a.out, "  %s\n", c)
					}
				}
				if !f.dryRun && f.output != "json" {
					fmt.Fprintf(a.out, "\nThe lab is up. Next: marina status, or marina cluster create NAME\n")
				}
				return nil
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&allowOverlap, "allow-route-overlap", false, "go on while a route of this machine (a VPN's) takes the bridge CIDR's traffic")
	cmd.Flags().BoolVar(&restart, "restart", false, "restart a running VM without asking, to apply a changed vm.cpus, vm.memory or vm.disk")
	return cmd
}

// restartDecision decides whether up restarts the running VM vmName to
// apply r (a changed size): yes with --restart (flag), else when the user
// answers yes on the terminal (in nil: no terminal, so no). A dry run asks
// nothing. waiting is the change left for later, for up to report.
func restartDecision(r limavm.Resize, flag, dryRun bool, in *bufio.Reader, w io.Writer, vmName string) (restart bool, waiting limavm.Resize) {
	if r.Empty() || !r.Running {
		return flag, limavm.Resize{}
	}
	if flag {
		return true, limavm.Resize{}
	}
	if !dryRun && in != nil && confirmOn(in, w, fmt.Sprintf("Restart the VM %s to apply %s?", vmName, r)) {
		return true, limavm.Resize{}
	}
	return false, r
}

// printManual shows the host changes marina left to the user (today: the
// resolver files on a Linux machine without systemd-resolved). The whole
// instructions appear when the run changed something (lifecycle's
// Report.Changed: a step whose check found a difference) — the moment the
// user looks at what up did; a run that changed nothing says so in one line,
// and `marina doctor` shows them again.
func printManual(w io.Writer, manual []string, changed bool) {
	if len(manual) == 0 {
		return
	}
	if !changed {
		fmt.Fprintln(w, "\nresolver: not configured — `marina doctor` explains")
		return
	}
	for _, m := range manual {
		fmt.Fprintf(w, "\n%s", m)
	}
}
