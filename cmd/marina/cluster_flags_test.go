package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// TestClusterCreateFlagsRefused: bad values of the flags a Fleet manifest
// entry also sets are refused by the manifest's rules, every one in one
// run, with exit 2 before anything happens — with --dry-run and without
// (DOCKER_HOST leads nowhere: nothing may reach Docker either way).
func TestClusterCreateFlagsRefused(t *testing.T) {
	env := []string{"MARINA_VM_DRIVER=host", "DOCKER_HOST=unix:///nonexistent/docker.sock"}
	bad := []string{"cluster", "create", "x", "--workers", "-1", "--slot", "100", "--node-version", "v1;rm", "--region", "Bad Region", "--wait", "-5s"}
	problems := []string{
		"5 problems with the command line; nothing was done:",
		"\n  --slot: must be between 1 and 99, got 100; pin a slot in that range, or leave it out for the lowest free one\n",
		"\n  --node-version: \"v1;rm\" must look like v1.37.0 (a kindest/node tag)\n",
		"\n  --workers: must be between 0 and 10, got -1 (worker nodes besides the control plane)\n",
		"\n  --region: \"Bad Region\" cannot be a node label value (",
		"\n  --wait: must be more than 0, got -5s; give a duration such as 5m\n",
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dry-run", append(append([]string(nil), bad...), "--dry-run")},
		{"for real", bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			r := marina(t, home, env, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			for _, p := range problems {
				if !strings.Contains(r.stderr, p) {
					t.Errorf("stderr lacks %q:\n%s", p, r.stderr)
				}
			}
			for _, p := range []string{".marina/state/slots", ".kube/marina/x.kubeconfig", ".kube/config"} {
				if _, err := os.Lstat(filepath.Join(home, p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("~/%s exists after a refused create (%v)", p, err)
				}
			}
		})
	}
}

// TestClusterCreateFlagBounds: each bound of the flags, alone; the
// extremes that are allowed pass the checks and reach the lab (which,
// with DOCKER_HOST leading nowhere, is stopped: exit 1).
func TestClusterCreateFlagBounds(t *testing.T) {
	home := t.TempDir()
	env := []string{"MARINA_VM_DRIVER=host", "DOCKER_HOST=unix:///nonexistent/docker.sock"}
	for _, tc := range []struct {
		args []string
		want string // "" = accepted: on to the lab
	}{
		{[]string{"--workers", "11"}, "Error: --workers: must be between 0 and 10, got 11"},
		{[]string{"--slot", "0"}, "Error: --slot: must be between 1 and 99, got 0"},
		{[]string{"--wait", "0s"}, "Error: --wait: must be more than 0, got 0s"},
		{[]string{"--zone", "-z"}, `Error: --zone: "-z" cannot be a node label value`},
		{[]string{"--node-version", "1.37.0"}, `Error: --node-version: "1.37.0" must look like v1.37.0`},
		{[]string{"Bad_Name", "--workers", "11"}, `2 problems with the command line; nothing was done:` + "\n  cluster name \"Bad_Name\""},
		{[]string{"--workers", "10", "--slot", "99", "--node-version", "v1.37.0", "--region", "us-east1", "--zone", "us-east1-c", "--wait", "1s"}, ""},
		{[]string{"--workers", "0", "--slot", "1"}, ""},
		{[]string{"--node-image", "Marina/Node:v1"}, `Error: --node-image "Marina/Node:v1" is not an image reference; write it like kindest/node:v1.37.0`},
		{[]string{"--node-image", ""}, `Error: --node-image "" is not an image reference`},
		{[]string{"--node-image", "kindest/node:v1.37.0", "--node-version", "v1.37.0"}, "Error: --node-image and --node-version do not mix"},
		{[]string{"--node-image", "marina-test/kind-node:v1.37.2"}, ""},
		{[]string{"--node-image", "localhost:5000/team/node@sha256:" + strings.Repeat("a", 64)}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := []string{"cluster", "create", "--dry-run"}
			if !strings.HasPrefix(tc.args[0], "-") {
				args = append(args, tc.args...)
			} else {
				args = append(append(args, "dev"), tc.args...)
			}
			r := marina(t, home, env, args...)
			if tc.want == "" {
				if r.code != 1 || !strings.Contains(r.stderr, "the lab's machine is stopped") {
					t.Fatalf("exit %d, want 1 from the stopped lab\nstderr: %s", r.code, r.stderr)
				}
				return
			}
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want 2 with %q\nstderr: %s", r.code, tc.want, r.stderr)
			}
		})
	}
}
