package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/bcollard/marina/core/lifecycle"
)

// A two-step pipeline: the first step finds the VM missing and creates it,
// the second finds the route already in place and is skipped.
func ExampleRun() {
	vmExists := false
	steps := []lifecycle.Step{
		lifecycle.NewStep("Create VM",
			func(ctx context.Context) ([]lifecycle.Change, error) {
				if vmExists {
					return nil, nil // converged: Apply is not called
				}
				return []lifecycle.Change{{Action: "create", Target: "VM marina"}}, nil
			},
			func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
				r.Progress("booting")
				vmExists = true
				return nil
			}),
		lifecycle.NewStep("Add host route",
			func(ctx context.Context) ([]lifecycle.Change, error) { return nil, nil },
			nil),
	}

	// A fixed clock keeps this example's output stable; real callers leave Now nil.
	fixed := time.Date(2026, 12, 3, 8, 40, 1, 0, time.UTC)
	r := lifecycle.NewPlainRenderer(os.Stdout)
	defer r.Close()
	report, err := lifecycle.Run(context.Background(), "up", steps, lifecycle.Options{
		Renderer: r,
		Now:      func() time.Time { return fixed },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("converged:", report.Done())
	// Output:
	// 2026-12-03T08:40:01Z [up] 1/2 Create VM: started
	// 2026-12-03T08:40:01Z [up] 1/2 Create VM: booting
	// 2026-12-03T08:40:01Z [up] 1/2 Create VM: done in 0ms
	// 2026-12-03T08:40:01Z [up] 2/2 Add host route: started
	// 2026-12-03T08:40:01Z [up] 2/2 Add host route: unchanged
	// converged: [Create VM Add host route]
}
