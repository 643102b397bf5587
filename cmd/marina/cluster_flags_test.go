package main

import (
	"slices"
	"strings"
	"testing"
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
