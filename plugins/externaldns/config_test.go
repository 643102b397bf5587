package externaldns

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestConfigDefaults: the defaults are valid and are what the README says.
func TestConfigDefaults(t *testing.T) {
	var c Config
	if err := sdk.DecodeConfig(nil, defaultConfig(), &c); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if strings.Join(c.Sources, ",") != "service" || strings.Join(c.ServiceTypes, ",") != "LoadBalancer" ||
		c.Interval != time.Second || c.MinEventSyncInterval != 500*time.Millisecond || c.Policy != "sync" || !c.StrictlyOwned || !c.WaitReady || c.ReadyTimeout != 3*time.Minute {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

// TestConfigValidate runs user configs through the plugin's ValidateConfig
// RPC (as marina does before anything changes) and checks each error names
// its field.
func TestConfigValidate(t *testing.T) {
	h := plugintest.New(t, New())
	tests := []struct {
		name      string
		config    string
		wantPaths []string // empty: valid
		wantText  string
	}{
		{name: "empty is the defaults", config: ``},
		{name: "ingress and service, durations as strings", config: `{"sources":["service","ingress"],"interval":"1m","readyTimeout":"30s"}`},
		{name: "every service type", config: `{"serviceTypes":["LoadBalancer","NodePort","ClusterIP","ExternalName"]}`},
		{name: "ingress only needs no service types", config: `{"sources":["ingress"],"serviceTypes":[]}`},
		{name: "no wait ignores readyTimeout", config: `{"waitReady":false,"readyTimeout":"0s"}`},
		{name: "unknown source", config: `{"sources":["service","crd"]}`, wantPaths: []string{"sources[1]"}, wantText: "service, ingress"},
		{name: "duplicate source", config: `{"sources":["service","service"]}`, wantPaths: []string{"sources[1]"}, wantText: "twice"},
		{name: "no source", config: `{"sources":[]}`, wantPaths: []string{"sources"}},
		{name: "service type case", config: `{"serviceTypes":["loadbalancer"]}`, wantPaths: []string{"serviceTypes[0]"}, wantText: `did you mean "LoadBalancer"? (values are case-sensitive)`},
		{name: "service source without types", config: `{"serviceTypes":[]}`, wantPaths: []string{"serviceTypes"}},
		{name: "interval too short", config: `{"interval":"500ms"}`, wantPaths: []string{"interval"}, wantText: "at least 1s"},
		{name: "min event sync interval too short", config: `{"minEventSyncInterval":"10ms"}`, wantPaths: []string{"minEventSyncInterval"}, wantText: "between 100ms"},
		{name: "min event sync interval above interval", config: `{"interval":"2s","minEventSyncInterval":"3s"}`, wantPaths: []string{"minEventSyncInterval"}, wantText: "interval (2s)"},
		{name: "bad policy", config: `{"policy":"delete-all"}`, wantPaths: []string{"policy"}, wantText: "upsert-only"},
		{name: "ready timeout zero", config: `{"readyTimeout":"0s"}`, wantPaths: []string{"readyTimeout"}},
		{name: "typo", config: `{"intervall":"5s"}`, wantPaths: []string{"intervall"}, wantText: "interval"},
		{name: "wrong type", config: `{"waitReady":"yes"}`, wantPaths: []string{"waitReady"}},
		{name: "several at once", config: `{"policy":"x","interval":"0s"}`, wantPaths: []string{"interval", "policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []sdk.Diagnostic
			for _, d := range h.ValidateConfig(tt.config) {
				if d.Severity != sdk.SeverityWarning {
					errs = append(errs, d)
				}
			}
			var paths []string
			var text []string
			for _, d := range errs {
				paths = append(paths, d.Path)
				text = append(text, d.Summary)
			}
			if strings.Join(paths, " ") != strings.Join(tt.wantPaths, " ") {
				t.Fatalf("error paths = %q, want %q (%q)", paths, tt.wantPaths, text)
			}
			if tt.wantText != "" && !strings.Contains(strings.Join(text, " "), tt.wantText) {
				t.Fatalf("errors %q do not mention %q", text, tt.wantText)
			}
		})
	}
}

// TestHookRejectsBadConfig: a hook run with an invalid config fails before
// touching anything, with a *sdk.ConfigError.
func TestHookRejectsBadConfig(t *testing.T) {
	h := plugintest.New(t, New())
	_, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"policy":"nope"}`))
	var ce *sdk.ConfigError
	if !errors.As(err, &ce) || ce.Diagnostics[0].Path != "policy" {
		t.Fatalf("err = %v, want a ConfigError about policy", err)
	}
}

// TestInfo: the plugin describes itself as the host needs it.
func TestInfo(t *testing.T) {
	d := plugintest.New(t, New()).Describe()
	if d.Name != Name || d.Version != Version {
		t.Fatalf("name/version = %s/%s", d.Name, d.Version)
	}
	if !d.Has(sdk.PostCluster) || !d.Has(sdk.PreClusterDelete) || d.Has(sdk.PostUp) {
		t.Fatalf("hooks = %+v, want PostCluster and PreClusterDelete", d)
	}
	if len(d.Dependencies) != 1 || d.Dependencies[0].Name != LocalDNS || d.Dependencies[0].Optional {
		t.Fatalf("dependencies = %+v, want a required localdns", d.Dependencies)
	}
}

// TestEnumsAreKnownValues: the enums of the config's field rules (what the
// SDK enforces and the schema shows) are the values the plugin renders.
func TestEnumsAreKnownValues(t *testing.T) {
	b, err := sdk.ConfigSchema(defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]struct {
			Items struct {
				Enum []string `json:"enum"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for field, known := range map[string][]string{"sources": knownSources, "serviceTypes": knownServiceTypes} {
		got := slices.Sorted(slices.Values(s.Properties[field].Items.Enum))
		if want := slices.Sorted(slices.Values(known)); !slices.Equal(got, want) {
			t.Errorf("%s: enum %q, known values %q", field, got, want)
		}
	}
}
