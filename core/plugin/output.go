package plugin

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/bcollard/marina/core/termsafe"
	"github.com/bcollard/marina/sdk"
)

// Limits on the outputs a plugin publishes (Result.Outputs). Outputs are
// small values for the plugins that depend on this one (an endpoint, a
// namespace, a pool of addresses); bulk data belongs in a file under
// Env.StateDir, with its path as the output.
const (
	// MaxOutputKeys is how many outputs one hook may return.
	MaxOutputKeys = 64
	// MaxOutputValue is the size of one output value, in bytes.
	MaxOutputValue = 64 << 10
	// MaxOutputsTotal is the size of all of one plugin's published outputs
	// (keys and values, across the hooks of a run), in bytes.
	MaxOutputsTotal = 1 << 20
)

// checkOutputs decides what marina accepts of the outputs a hook of
// plugin n returned, given the outputs it published before (prev): only
// the keys its description declares (the others are returned in dropped,
// sorted), within the limits above. Over a limit, nothing is accepted and
// cause says which limit and how to fix it.
func checkOutputs(desc *sdk.Description, prev, outputs map[string]string) (accepted map[string]string, dropped []string, cause string) {
	if len(outputs) == 0 {
		return nil, nil, ""
	}
	declared := "none"
	if len(desc.Outputs) > 0 {
		declared = strings.Join(desc.Outputs, ", ")
	}
	if len(outputs) > MaxOutputKeys {
		return nil, nil, fmt.Sprintf("returned %d outputs; marina takes at most %d per hook, and only those the plugin's description declares (sdk.Info.Outputs: %s)", len(outputs), MaxOutputKeys, termsafe.Line(declared))
	}
	keys := make([]string, 0, len(outputs))
	for k := range outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	accepted = map[string]string{}
	for _, k := range keys {
		v := outputs[k]
		if !slices.Contains(desc.Outputs, k) {
			dropped = append(dropped, k)
			continue
		}
		if len(v) > MaxOutputValue {
			return nil, nil, fmt.Sprintf("returned output %q of %s; marina takes at most %s per output value (%s for all of a plugin's outputs): publish a reference instead, e.g. the path of a file in Env.StateDir", termsafe.Line(k), byteSize(len(v)), byteSize(MaxOutputValue), byteSize(MaxOutputsTotal))
		}
		accepted[k] = v
	}
	total := 0
	for k, v := range prev {
		if _, replaced := accepted[k]; !replaced {
			total += len(k) + len(v)
		}
	}
	for k, v := range accepted {
		total += len(k) + len(v)
	}
	if total > MaxOutputsTotal {
		return nil, nil, fmt.Sprintf("published outputs of %s in all; marina takes at most %s for all of a plugin's outputs (%s per value): publish a reference instead, e.g. the path of a file in Env.StateDir", byteSize(total), byteSize(MaxOutputsTotal), byteSize(MaxOutputValue))
	}
	return accepted, dropped, ""
}

// droppedOutputsWarning is the warning for outputs a plugin returned but
// does not declare: a few of their names, cleaned and capped.
func droppedOutputsWarning(desc *sdk.Description, dropped []string) string {
	const show = 5
	names := make([]string, 0, show)
	for _, k := range dropped[:min(len(dropped), show)] {
		names = append(names, fmt.Sprintf("%q", termsafe.Excerpt(termsafe.Line(k), 64)))
	}
	list := strings.Join(names, ", ")
	if len(dropped) > show {
		list += fmt.Sprintf(" and %d more", len(dropped)-show)
	}
	declared := "none"
	if len(desc.Outputs) > 0 {
		declared = strings.Join(desc.Outputs, ", ")
	}
	return fmt.Sprintf("plugin returned outputs its description does not declare: %s; dropped, so no plugin sees them (declared: %s). The plugin should declare them in sdk.Info.Outputs or stop returning them", list, termsafe.Line(declared))
}

// cleanDiagnostics cleans the text of a plugin's diagnostics (warnings of
// a hook or a config check) of terminal control sequences, capped.
func cleanDiagnostics(diags []sdk.Diagnostic) {
	for i := range diags {
		d := &diags[i]
		d.Path = termsafe.Excerpt(termsafe.Line(d.Path), 200)
		d.Summary = termsafe.Excerpt(termsafe.Line(d.Summary), maxCause)
		d.Detail = termsafe.Excerpt(termsafe.Text(d.Detail), maxCause)
	}
}
