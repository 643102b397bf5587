package fleet_test

import (
	"context"
	"fmt"
	"os"

	"github.com/bcollard/marina/core/fleet"
)

// The whole of `marina fleet create -f fleet.yaml`: parse, validate, plan
// against the live clusters, print the plan, run it, print the summary.
func Example() {
	manifest := []byte(`apiVersion: marina.dev/v1alpha1
kind: Fleet
metadata: {name: demo}
spec:
  defaults: {registries: [docker-io]}
  clusters:
  - hub
  - {name: east, num: 3, dependsOn: [hub], region: us-east1}
  - {name: west, dependsOn: [hub], registries: none}
`)
	f, err := fleet.Parse(manifest, "fleet.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := fleet.Validate(f, fleet.ValidateContext{KnownMirrors: []string{"docker-io"}}); err != nil {
		fmt.Println(err)
		return
	}
	live := fleet.LiveState{Clusters: map[string]fleet.LiveCluster{
		"hub": {Slot: 1, Complete: true, Fleet: "demo"},
	}}
	plan, err := fleet.Plan(f, live, fleet.PlanOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = plan.Table(os.Stdout)
	fmt.Println()
	sum := fleet.Run(context.Background(), plan, fleet.RunOptions{
		Create: func(ctx context.Context, c fleet.PlannedCluster) error {
			if c.Name == "west" {
				return fmt.Errorf("kind create cluster %s: port 7002 is taken", c.Name)
			}
			return nil
		},
	})
	_ = sum.Write(os.Stdout)
	// Output:
	// fleet demo: 3 clusters (2 create, 1 skip), strategy FailFast, max parallel 4
	// NAME  SLOT  ACTION  DEPENDS-ON  OPTIONS
	// hub   1     skip    -           mirrors=docker-io
	// east  3     create  hub         region=us-east1 mirrors=docker-io
	// west  2     create  hub         mirrors=none
	// hub: skip: exists, member of this fleet
	//
	// NAME  SLOT  ACTION  OUTCOME   DETAIL
	// hub   1     skip    existing  exists, member of this fleet
	// east  3     create  created   -
	// west  2     create  failed    kind create cluster west: port 7002 is taken
	// fleet demo: 1 created, 1 existing, 1 failed
}
