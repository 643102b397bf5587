package sdk

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wireConfig's Validate says things only the wire can object to.
type wireConfig struct {
	Say string `json:"say"`
}

func (c *wireConfig) Validate() []Diagnostic {
	switch c.Say {
	case "binary":
		return []Diagnostic{{Severity: SeverityWarning, Path: "say", Summary: "not text: \xff\xfe"}}
	case "panic":
		panic("validate exploded")
	}
	return []Diagnostic{{Severity: SeverityWarning, Path: "say", Summary: "said " + c.Say}}
}

// overGRPC returns the host client of p served through go-plugin's gRPC
// plumbing: what ValidateConfig must answer like.
func overGRPC(t *testing.T, p Plugin) *HostClient {
	t.Helper()
	srv, err := NewServer(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{PluginName: &GRPCPlugin{Impl: srv}})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*HostClient)
}

// TestValidateConfigMatchesTheRPC: the in-process check answers exactly
// what the served plugin answers over gRPC, for valid configs, schema
// problems with did-you-mean, the config's own Validate (a diagnostic
// without severity is an error on the wire, so here too), warnings, a
// plugin that takes no config, a panic, and text the wire cannot carry.
func TestValidateConfigMatchesTheRPC(t *testing.T) {
	cases := []struct {
		name    string
		plugin  Plugin
		configs []string
	}{
		{"schema and Validate", &scripted{info: Info{Name: "scripted", Version: "0.1.0", Config: testDefaults()}}, []string{
			``, `null`, `{}`, `{"replicas":3}`, `{"replicas":-1}`, `{"replicas":12}`, `{"image":"acme:latest"}`,
			`{"pools":[{"nmae":"x"}],"wait":"never"}`, `{"replicas":"three"}`, `[1,2]`, `{"nested":{"port":70000}}`, `not json`,
		}},
		{"no config", &scripted{info: Info{Name: "bare", Version: "1.0.0"}}, []string{``, `{}`, `{"x":1}`}},
		{"wire limits", &scripted{info: Info{Name: "wire", Version: "1.0.0", Config: &wireConfig{}}}, []string{
			`{"say":"hello"}`, `{"say":"binary"}`, `{"say":"panic"}`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			host := overGRPC(t, c.plugin)
			for _, cfg := range c.configs {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				want, werr := host.ValidateConfig(ctx, []byte(cfg))
				cancel()
				got, gerr := ValidateConfig(c.plugin, []byte(cfg))
				if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
					t.Errorf("config %q: in-process %#v, over gRPC %#v", cfg, got, want)
				}
				if (gerr == nil) != (werr == nil) || status.Code(gerr) != status.Code(werr) {
					t.Errorf("config %q: in-process error %v, over gRPC %v", cfg, gerr, werr)
				}
			}
		})
	}
}

func TestValidateConfigDetails(t *testing.T) {
	p := &scripted{info: Info{Name: "scripted", Version: "0.1.0", Config: testDefaults()}}
	got, err := ValidateConfig(p, []byte(`{"replicas":-1,"pools":[{"nmae":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Diagnostic{
		{Severity: SeverityError, Path: "pools[0].nmae", Summary: `unknown field "nmae"; did you mean "name"?`},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) { // schema problems stop before Validate
		t.Errorf("ValidateConfig = %+v, want %+v", got, want)
	}
	got, err = ValidateConfig(p, []byte(`{"replicas":-1}`))
	if err != nil || len(got) != 1 || got[0].Severity != SeverityError || got[0].Path != "replicas" {
		t.Errorf("Validate's diagnostic without severity: %+v, %v; want an error on replicas", got, err)
	}

	_, err = ValidateConfig(&scripted{info: Info{Name: "wire", Version: "1.0.0", Config: &wireConfig{}}}, []byte(`{"say":"panic"}`))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "panicked in ValidateConfig") || !strings.Contains(err.Error(), "validate exploded") {
		t.Errorf("panicking Validate: %v, want an Internal error with the panic", err)
	}
	_, err = ValidateConfig(&scripted{info: Info{Name: "wire", Version: "1.0.0", Config: &wireConfig{}}}, []byte(`{"say":"binary"}`))
	if status.Code(err) != codes.Internal {
		t.Errorf("a diagnostic that is not UTF-8: %v, want an Internal error as over the wire", err)
	}
	if _, err := ValidateConfig(&scripted{info: Info{Name: "Bad Name", Version: "1"}}, nil); err == nil || !strings.Contains(err.Error(), "invalid Info") {
		t.Errorf("invalid Info: %v", err)
	}
}
