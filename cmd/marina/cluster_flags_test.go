package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/exitcode"
)

func TestPluginExclusions(t *testing.T) {
	known := []string{"coredns", "externaldns", "localdns", "metallb", "registries"}
	tests := []struct {
		name       string
		only, skip []string
		want       []string
		wantErr    []string
	}{
		{name: "neither", want: nil},
		{name: "skip", skip: []string{"metallb"}, want: []string{"metallb"}},
		{name: "only", only: []string{"registries", "coredns"}, want: []string{"externaldns", "localdns", "metallb"}},
		{name: "only all", only: known, want: nil},
		{name: "typo in skip", skip: []string{"metalb"}, wantErr: []string{`--no-plugin "metalb"`, "did you mean metallb?"}},
		{name: "unknown in only", only: []string{"istio", "coredns"}, wantErr: []string{`--plugins "istio"`, "plugins: coredns, externaldns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pluginExclusions(known, tt.only, tt.skip)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestLabelEdits: -l k=v sets, -l k- removes ("-"), and every bad edit is a
// usage error naming the flag value.
func TestLabelEdits(t *testing.T) {
	got, err := labelEdits([]string{"team=a", "example.com/tier-", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"team": "a", "example.com/tier": "-", "empty": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{nil, "at least one -l"},
		{[]string{"novalue"}, `-l "novalue": use key=value`},
		{[]string{"=v"}, `-l "=v"`},
		{[]string{"bad key=x"}, "bad key"},
		{[]string{"k=bad value"}, "bad value"},
	} {
		_, err := labelEdits(tc.labels)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("labelEdits(%q) = %v, want an error with %q", tc.labels, err, tc.want)
		}
		if exitcode.Of(err) != exitcode.Usage {
			t.Errorf("labelEdits(%q): exit code %d, want %d", tc.labels, exitcode.Of(err), exitcode.Usage)
		}
	}
}

// TestClusterLabelUsage: bad `cluster label` command lines exit 2 before
// the lab is read.
func TestClusterLabelUsage(t *testing.T) {
	home := t.TempDir()
	env := []string{"MARINA_VM_DRIVER=host"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev"}, "at least one -l"},
		{[]string{"dev", "-l", "novalue"}, "use key=value"},
		{[]string{"dev", "-l", "bad key=x"}, "bad key"},
		{[]string{"Bad_Name", "-l", "a=b"}, "Bad_Name"},
		{[]string{"-l", "a=b"}, "accepts 1 arg"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := marina(t, home, env, append([]string{"cluster", "label"}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want 2 with %q\nstdout: %s\nstderr: %s", r.code, tc.want, r.stdout, r.stderr)
			}
		})
	}
}
