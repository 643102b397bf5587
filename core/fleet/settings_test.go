package fleet

import (
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// TestCheckSettings: each bad value gives exactly one problem, with the
// setting's name and the exact text that both a manifest and
// `cluster create`'s flags show; good values (and unset ones) pass.
func TestCheckSettings(t *testing.T) {
	long := strings.Repeat("r", 70)
	bad := []struct {
		name string
		s    Settings
		path string
		msg  string
	}{
		{"num 0", Settings{Num: ptr(0)}, "num", "must be between 1 and 99, got 0; pin a slot in that range, or leave it out for the lowest free one"},
		{"num 100", Settings{Num: ptr(100)}, "num", "must be between 1 and 99, got 100; pin a slot in that range, or leave it out for the lowest free one"},
		{"num -1", Settings{Num: ptr(-1)}, "num", "must be between 1 and 99, got -1; pin a slot in that range, or leave it out for the lowest free one"},
		{"version injection", Settings{NodeVersion: "v1;rm"}, "nodeVersion", `"v1;rm" must look like v1.37.0 (a kindest/node tag)`},
		{"version without v", Settings{NodeVersion: "1.37.0"}, "nodeVersion", `"1.37.0" must look like v1.37.0 (a kindest/node tag)`},
		{"version short", Settings{NodeVersion: "v1.37"}, "nodeVersion", `"v1.37" must look like v1.37.0 (a kindest/node tag)`},
		{"version with a digest", Settings{NodeVersion: "v1.37.0@sha256:x"}, "nodeVersion", `"v1.37.0@sha256:x" must look like v1.37.0 (a kindest/node tag)`},
		{"workers -1", Settings{Workers: ptr(-1)}, "workers", "must be between 0 and 10, got -1 (worker nodes besides the control plane)"},
		{"workers 11", Settings{Workers: ptr(11)}, "workers", "must be between 0 and 10, got 11 (worker nodes besides the control plane)"},
		{"region with a space", Settings{Region: "Bad Region"}, "region", `"Bad Region" cannot be a node label value (a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')); use letters, digits, '-', '_' or '.', e.g. us-east1`},
		{"zone long", Settings{Zone: long}, "zone", `"` + long[:64] + `"... (70 bytes) cannot be a node label value (must be no more than 63 bytes); use letters, digits, '-', '_' or '.', e.g. us-east1`},
		{"wait negative", Settings{Wait: ptr(-5 * time.Second)}, "wait", "must be more than 0, got -5s; give a duration such as 5m"},
		{"wait zero", Settings{Wait: ptr(time.Duration(0))}, "wait", "must be more than 0, got 0s; give a duration such as 5m"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckSettings(tt.s)
			if len(got) != 1 || got[0].Path != tt.path || got[0].Message != tt.msg || got[0].Line != 0 {
				t.Fatalf("got %+v\nwant [{%s %s}]", got, tt.path, tt.msg)
			}
		})
	}

	good := []Settings{
		{},
		{Num: ptr(1), NodeVersion: "v1.37.0", Workers: ptr(0), Region: "europe-west1", Zone: "europe-west1-b", Wait: ptr(time.Nanosecond)},
		{Num: ptr(99), NodeVersion: "v1.30.10", Workers: ptr(10), Region: "us_east.1", Wait: ptr(5 * time.Minute)},
	}
	for _, s := range good {
		if got := CheckSettings(s); got != nil {
			t.Errorf("CheckSettings(%+v) = %v, want nil", s, got)
		}
	}
}

// TestCheckSettingsAll: every bad setting is reported, in field order.
func TestCheckSettingsAll(t *testing.T) {
	got := CheckSettings(Settings{Num: ptr(100), NodeVersion: "v1;rm", Workers: ptr(-1), Region: "Bad Region", Zone: "Bad Zone", Wait: ptr(-5 * time.Second)})
	var paths []string
	for _, p := range got {
		paths = append(paths, p.Path)
	}
	if want := "num nodeVersion workers region zone wait"; strings.Join(paths, " ") != want {
		t.Fatalf("paths %v, want %s", paths, want)
	}
}

func TestCheckMaxParallel(t *testing.T) {
	for n, want := range map[int]string{
		-5: "must be 0 (the default, 4 at once) or more, got -5",
		-1: "must be 0 (the default, 4 at once) or more, got -1",
		0:  "",
		1:  "",
		64: "",
	} {
		if got := CheckMaxParallel(n); got != want {
			t.Errorf("CheckMaxParallel(%d) = %q, want %q", n, got, want)
		}
	}
}
