package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk/dockertest"
)

// TestClusterE2EUsage: bad arguments exit 2 before anything is contacted
// (the end-to-end behaviour is tested in core/lab against real controllers).
func TestClusterE2EUsage(t *testing.T) {
	home := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "e2e"}, "accepts 1 arg(s), received 0"},
		{[]string{"cluster", "e2e", "Bad_Name"}, `cluster name "Bad_Name"`},
		{[]string{"cluster", "e2e", "dev", "--timeout", "0s"}, "--timeout 0s: must be positive"},
		{[]string{"cluster", "e2e", "dev", "--port", "0"}, "--port 0: must be 1-65535"},
		{[]string{"cluster", "e2e", "dev", "--path", "healthz"}, `--path "healthz": must start with /`},
		{[]string{"cluster", "e2e", "dev", "-o", "xml"}, `--output "xml" is not supported`},
		{[]string{"cluster", "e2e", "dev", "--progress", "fancy"}, `--progress "fancy": use auto, plain or json`},
	} {
		r := marina(t, home, nil, tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
			t.Errorf("marina %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tt.args, " "), r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

// TestClusterE2EUnknownClusterJSON: a failed check exits 1 and still prints
// the result, with progress on stderr so stdout stays JSON.
func TestClusterE2EUnknownClusterJSON(t *testing.T) {
	dockertest.Require(t) // the host driver reads the clusters from Docker
	r := marina(t, t.TempDir(), nil, "cluster", "e2e", "nope", "-o", "json", "--progress", "plain")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		Cluster string `json:"cluster"`
		Passed  bool   `json:"passed"`
		Checks  []struct {
			Name, Status, Error string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, r.stdout)
	}
	if res.Cluster != "nope" || res.Passed || len(res.Checks) == 0 || res.Checks[0].Status != "failed" ||
		!strings.Contains(res.Checks[0].Error, "no cluster named nope (see marina cluster list") {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(r.stderr, "Find cluster nope: FAILED") || !strings.Contains(r.stderr, "Error: cluster e2e: step 1/9") {
		t.Errorf("stderr lacks the progress or the error:\n%s", r.stderr)
	}
}
