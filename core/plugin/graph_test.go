package plugin

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
)

// graph builds descriptions from "name:dep,dep?" specs (? = optional,
// @constraint after a dependency, =version after the name).
func graph(specs ...string) ([]string, map[string]*sdk.Description) {
	var names []string
	descs := map[string]*sdk.Description{}
	for _, s := range specs {
		name, deps, _ := strings.Cut(s, ":")
		version := "1.0.0"
		if n, v, ok := strings.Cut(name, "="); ok {
			name, version = n, v
		}
		d := &sdk.Description{Name: name, Version: version}
		for _, dep := range strings.Split(deps, ",") {
			if dep == "" {
				continue
			}
			dd := sdk.Dependency{Name: strings.TrimSuffix(dep, "?"), Optional: strings.HasSuffix(dep, "?")}
			if n, c, ok := strings.Cut(dd.Name, "@"); ok {
				dd.Name, dd.Version = n, c
			}
			d.Dependencies = append(d.Dependencies, dd)
		}
		names = append(names, name)
		descs[name] = d
	}
	return names, descs
}

func TestCheckGraph(t *testing.T) {
	tests := []struct {
		name  string
		specs []string
		want  []string // error messages, in order (substrings)
	}{
		{"empty", nil, nil},
		{"chain", []string{"a", "b:a", "c:b,a"}, nil},
		{"optional absent", []string{"a:zz?"}, nil},
		{"missing", []string{"a:zz", "b:yy,a"}, []string{"plugin a requires plugin zz,", "plugin b requires plugin yy,"}},
		{"self loop ignored", []string{"a:a"}, nil},
		{"two-cycle", []string{"b:a", "a:b"}, []string{"plugin dependency cycle: a -> b -> a"}},
		{"optional edges count", []string{"a:b?", "b:a?"}, []string{"cycle: a -> b -> a"}},
		{"three-cycle plus tail", []string{"d:c", "c:a", "a:b", "b:c"}, []string{"cycle: a -> b -> c -> a"}},
		{"two cycles", []string{"a:b", "b:a", "x:y", "y:x"}, []string{"cycle: a -> b -> a", "cycle: x -> y -> x"}},
		{"constraint ok", []string{"a:b@^1.2", "b=1.4.0"}, nil},
		{"constraint fails", []string{"a:b@^2", "b=1.4.0"}, []string{"plugin a requires b ^2, but b 1.4.0 is selected"}},
		{"bad constraint", []string{"a:b@nope", "b"}, []string{`version "nope", which is not a semver constraint`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names, descs := graph(tc.specs...)
			errs := checkGraph(names, descs)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors = %v, want %d", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want %q", i, errs[i], w)
				}
			}
		})
	}
}

func TestPredecessors(t *testing.T) {
	tests := []struct {
		name         string
		specs        []string
		participants []string
		want         map[string][]string
	}{
		{"independent", []string{"a", "b"}, []string{"a", "b"}, map[string][]string{"a": nil, "b": nil}},
		{"chain", []string{"a", "b:a", "c:b"}, []string{"a", "b", "c"}, map[string][]string{"a": nil, "b": {"a"}, "c": {"a", "b"}}},
		{"through a non-participant", []string{"a", "e:a", "g:e"}, []string{"a", "g"}, map[string][]string{"a": nil, "g": {"a"}}},
		{"absent optional", []string{"a:zz?", "b:a?"}, []string{"a", "b"}, map[string][]string{"a": nil, "b": {"a"}}},
		{"diamond", []string{"a", "b:a", "c:a", "d:b,c"}, []string{"a", "b", "c", "d"}, map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"a", "b", "c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, descs := graph(tc.specs...)
			got := predecessors(tc.participants, descs)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("predecessors = %v, want %v", got, tc.want)
			}
		})
	}
}
