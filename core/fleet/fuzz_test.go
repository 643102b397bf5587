package fleet

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the whole pipeline a user's manifest
// goes through. It must never panic; a rejected manifest yields an *Error
// whose every problem has a path, a message and a line; an accepted one is
// either rejected by Validate the same way, or plans (or fails to plan with
// an *Error) and then runs to completion with every cluster created or
// existing.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "manifests", "*.yaml"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed manifests: %v", err)
	}
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(head + "spec:\n  clusters:\n  - {name: a, num: 1}\n  - {name: b, num: 11, dependsOn: [a]}\n"))
	f.Add([]byte(head + "spec: {defaults: {plugins: {metallb: {config: {a: [1, {b: null}], c: 1.5}}}}, clusters: [a]}\n"))
	f.Add([]byte(head + "x: &x [a, b]\nspec: {clusters: *x}\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := Parse(data, "fuzz.yaml")
		if err != nil {
			checkLocated(t, "Parse", err)
			return
		}
		if err := Validate(fl, testCtx); err != nil {
			checkLocated(t, "Validate", err)
			return
		}
		p, err := Plan(fl, LiveState{Clusters: map[string]LiveCluster{"a": {Slot: 2, Complete: true, Fleet: "f"}}}, PlanOptions{})
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || len(fe.Problems) == 0 {
				t.Fatalf("Plan of a valid fleet: %v (%T)", err, err)
			}
			return
		}
		if err := p.Table(io.Discard); err != nil {
			t.Fatal(err)
		}
		sum := Run(context.Background(), p, RunOptions{
			Create: func(context.Context, PlannedCluster) error { return nil },
			Adopt:  func(context.Context, PlannedCluster) error { return nil },
		})
		if !sum.OK() {
			t.Fatalf("a valid plan did not run to completion: %v", sum.Failure())
		}
	})
}

func checkLocated(t *testing.T, stage string, err error) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) || len(fe.Problems) == 0 {
		t.Fatalf("%s: got %v (%T), want *fleet.Error with problems", stage, err, err)
	}
	for _, p := range fe.Problems {
		if p.Path == "" || p.Message == "" || p.Line <= 0 {
			t.Fatalf("%s: problem without path, message or line: %+v", stage, p)
		}
	}
	_ = fe.Error()
}
