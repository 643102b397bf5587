package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/migrate"
)

// migrateOutput is the structured output of `marina migrate -o json|yaml`.
type migrateOutput struct {
	DryRun bool            `json:"dryRun"`
	Plan   *migrate.Plan   `json:"plan"`
	Result *migrate.Result `json:"result,omitempty"`
	// Error is why nothing was changed (a refusal) or which steps failed.
	Error string `json:"error,omitempty"`
}

func newMigrateCmd(a *app) *cobra.Command {
	var dryRun, force bool
	var output, klimaxConfig string
	cmd := &cobra.Command{
		Use:     "migrate",
		GroupID: "setup",
		Short:   "Take over a klimax installation: config, registry cache, kubeconfigs, VM",
		Long: `klimax is now marina. migrate imports ~/.klimax/config.yaml into marina's config
(listing every klimax key, what it becomes and why; passwords show as "(set)"), moves
the registry cache to ~/.marina/registry-cache, copies the per-cluster kubeconfigs to
~/.kube/marina/ (the originals are kept), and adopts klimax's VM into marina's
LIMA_HOME (~/.marina/lima) when it is stopped, or says exactly what to do instead.
klimax's clusters cannot be taken over: the plan says how to recreate them.

The plan is shown first as a table (WHAT FROM TO NOTE); --dry-run stops there and
changes nothing. Every step checks again before it acts, and a second run reports
what is already done. An existing marina config that differs is kept unless --force
(the old file is saved as <file>.bak). The config is written where marina reads it:
--config, $MARINA_CONFIG, or ~/.marina/config.yaml.

Exit status: 0 when every step is done or left to you (the "by hand" rows), 1 when a
step failed (its source is kept), 2 when nothing was changed because marina's config
exists (use --force) or there is no klimax installation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("cannot find the home directory holding ~/.klimax: %w", err)
			}
			cfgPath, _, err := config.ResolvePath(a.global.ConfigPath, home)
			if err != nil {
				return err
			}
			opts := migrate.Options{ConfigPath: cfgPath, KlimaxConfig: klimaxConfig, Force: force}
			// Planning only reads, so it runs without the lock: a dry run, a
			// refusal and "nothing to migrate" leave the disk exactly as it
			// was (the lock file included). Applying plans again under the lock.
			p, err := migrate.NewPlan(home, opts)
			if err != nil {
				return err
			}
			if dryRun {
				return a.showMigration(output, &migrateOutput{DryRun: true, Plan: p}, nil)
			}
			if err := p.Refusal(); err != nil {
				return a.showMigration(output, &migrateOutput{Plan: p}, err)
			}
			return a.withLock(cmd.Context(), func() error {
				p, err := migrate.NewPlan(home, opts)
				if err != nil {
					return err
				}
				out := &migrateOutput{Plan: p}
				if err := p.Refusal(); err != nil {
					return a.showMigration(output, out, err)
				}
				var progress func(migrate.StepResult)
				if output == "table" {
					if err := p.WriteTable(a.out); err != nil {
						return err
					}
					fmt.Fprintln(a.out)
					progress = func(r migrate.StepResult) {
						if r.Outcome == migrate.OutcomeManual {
							// Said once, in full, under "Left to you".
							fmt.Fprintf(a.out, "%-13s %s: see below\n", r.Outcome.Word(), r.What())
							return
						}
						fmt.Fprintln(a.out, r.Line(home))
					}
				}
				res, err := migrate.Apply(cmd.Context(), p, progress)
				out.Result = res
				if output == "table" {
					if res != nil {
						printMigrationSummary(a, res)
					}
					return err
				}
				return a.showMigration(output, out, err)
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the plan, change nothing")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing marina config that differs (the old file is kept as <file>.bak)")
	cmd.Flags().StringVar(&klimaxConfig, "klimax-config", "", "klimax's config file (default ~/.klimax/config.yaml; klimax's -c)")
	OutputFlag(cmd, &output, "table", "table", "json", "yaml")
	return cmd
}

// showMigration prints a plan (dry run or refusal) or a plan and its result
// in the chosen format, and returns err with its exit status kept.
func (a *app) showMigration(format string, out *migrateOutput, err error) error {
	if format != "table" {
		if err != nil {
			out.Error = err.Error()
		}
		if perr := PrintStructured(a.out, format, out); perr != nil {
			return perr
		}
		if err != nil {
			return &silentError{err}
		}
		return nil
	}
	if werr := out.Plan.WriteTable(a.out); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if out.DryRun {
		fmt.Fprintf(a.out, "\nDry run: nothing was changed (%s).", out.Plan.Summary())
		if rerr := out.Plan.Refusal(); rerr != nil {
			fmt.Fprintf(a.out, " `marina migrate` would change nothing either: %v\n", rerr)
		} else {
			fmt.Fprintln(a.out, " Run `marina migrate` to carry it out.")
		}
	}
	return nil
}

// printMigrationSummary ends an applied migration: counts, then what is
// left to the user.
func printMigrationSummary(a *app, res *migrate.Result) {
	fmt.Fprintf(a.out, "\nMigration: %s.\n", res.Summary())
	if manual := res.Manual(); len(manual) > 0 {
		fmt.Fprintln(a.out, "Left to you:")
		for _, s := range manual {
			fmt.Fprintf(a.out, "  - %s: %s\n", s.What(), s.Note)
		}
	}
}
