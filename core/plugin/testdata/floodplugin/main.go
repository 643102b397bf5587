// Command floodplugin is a marina plugin whose PostUp hook returns hostile
// output on request, for the tests of what marina trusts of plugin output
// (package core/plugin, output_test.go). Its config says what to send:
//
//	stderrBytes: write about this many bytes of log lines, carrying terminal
//	  escape sequences, to stderr; then a last line "last line of the flood"
//	outputs: key -> size, published as that many "x" (declared: small, big)
//	progress, warning, error: sent as a progress message, a warning, and the
//	  hook's error (when set)
//	reason: the Reason of a host change (a resolver for flood.test)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/bcollard/marina/sdk"
)

// Config says what the hook sends.
type Config struct {
	StderrBytes int            `json:"stderrBytes"`
	Outputs     map[string]int `json:"outputs,omitempty"`
	Progress    string         `json:"progress,omitempty"`
	Warning     string         `json:"warning,omitempty"`
	Error       string         `json:"error,omitempty"`
	Reason      string         `json:"reason,omitempty"`
}

// floodLine is one line of the flood: an OSC title, colours, a cursor move.
const floodLine = "\x1b]0;pwned\x07\x1b[31mflood\x1b[0m line \x1b[1A\x1b[2K%08d padding padding padding padding padding padding\n"

type flood struct{}

func (flood) Info() sdk.Info {
	return sdk.Info{Name: "flood", Version: "1.0.0", Description: "sends hostile output", Config: &Config{}, Outputs: []string{"small", "big"}, Capabilities: []string{sdk.CapHostResolver}}
}

func (flood) PostUp(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	var b strings.Builder
	for i := 0; b.Len() < cfg.StderrBytes; i++ {
		fmt.Fprintf(&b, floodLine, i)
		if b.Len() >= 1<<20 {
			_, _ = os.Stderr.WriteString(b.String())
			cfg.StderrBytes -= b.Len()
			b.Reset()
		}
	}
	_, _ = os.Stderr.WriteString(b.String())
	if cfg.StderrBytes > 0 {
		_, _ = os.Stderr.WriteString("last line of the flood\n")
	}
	if cfg.Progress != "" {
		req.Progress("%s", cfg.Progress)
	}
	if cfg.Error != "" {
		return nil, errors.New(cfg.Error)
	}
	res := &sdk.Result{Outputs: map[string]string{}}
	for k, n := range cfg.Outputs {
		res.Outputs[k] = strings.Repeat("x", n)
	}
	if cfg.Reason != "" {
		res.HostChanges = []sdk.HostChange{{Reason: cfg.Reason, Resolver: &sdk.ResolverChange{Domain: "flood.test", Nameservers: []string{"127.0.0.1"}}}}
	}
	if cfg.Warning != "" {
		res.Warnings = []sdk.Diagnostic{{Severity: sdk.SeverityWarning, Summary: cfg.Warning}}
	}
	return res, nil
}

func main() { sdk.Serve(flood{}) }
