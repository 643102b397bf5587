package plugin

import (
	"fmt"
	"strings"

	"github.com/bcollard/marina/core/termsafe"
	"github.com/bcollard/marina/sdk"
)

// Kind classifies why a plugin call failed.
type Kind string

// The kinds of *Error.
const (
	// KindChecksum: the executable does not match the recorded sha256.
	KindChecksum Kind = "checksum"
	// KindStart: the plugin could not be started or did not complete the
	// handshake (not executable, exited early, start timeout).
	KindStart Kind = "start"
	// KindStdout: the plugin printed to stdout before the handshake.
	KindStdout Kind = "stdout"
	// KindProtocol: the plugin speaks a protocol version this marina does not.
	KindProtocol Kind = "protocol"
	// KindIdentity: the plugin's name or version is not the one expected.
	KindIdentity Kind = "identity"
	// KindTimeout: the call did not finish before its deadline.
	KindTimeout Kind = "timeout"
	// KindCancelled: the call was cancelled (Ctrl-C, or another plugin failed).
	KindCancelled Kind = "cancelled"
	// KindPanic: the plugin panicked while handling the call.
	KindPanic Kind = "panic"
	// KindExited: the plugin process exited while marina still needed it.
	KindExited Kind = "exited"
	// KindConnection: the connection to the plugin broke.
	KindConnection Kind = "connection"
	// KindHook: the plugin ran the call and returned an error.
	KindHook Kind = "hook"
	// KindStop: the plugin did not stop when asked and had to be killed.
	KindStop Kind = "stop"
	// KindOutput: the hook returned outputs over marina's limits (see
	// MaxOutputValue, MaxOutputKeys, MaxOutputsTotal); none was published.
	KindOutput Kind = "output"
	// KindCapability: the plugin declares a capability this marina does not
	// know, or its hook asked for a host change whose capability it does
	// not declare (none of the hook's host changes is applied).
	KindCapability Kind = "capability"
)

// Error is the error of every plugin start and call: it names the plugin,
// the hook (or operation) and the cause, and carries the plugin's last
// stderr lines. Its message reads, for example:
//
//	plugin acme 1.2.0, hook PostCluster: timed out after 2s
//	  last stderr lines of acme:
//	    INFO installing acme cluster=dev
type Error struct {
	// Plugin and Version identify the plugin (Version may be empty before
	// the plugin described itself).
	Plugin  string
	Version string
	// Hook is the hook being run, or the operation: "start", "Describe",
	// "ValidateConfig", "stop".
	Hook string
	// Kind classifies the failure.
	Kind Kind
	// Cause says what happened, e.g. "timed out after 2s", "panicked: boom".
	// It may hold the plugin's own message, raw: Error() cleans it.
	Cause string
	// Detail holds extra text not shown in Error(), e.g. a panic's stack.
	Detail string
	// Stderr holds the plugin's last stderr lines (at most 20), raw: Error()
	// cleans them; Debug records count only when marina's logger is at Debug.
	Stderr []string
	// Err is the underlying error, if any (context.Canceled, a gRPC status...).
	Err error
}

// maxCause caps the cause an *Error shows: a plugin's error message can be
// of any size.
const maxCause = 4096

// Error renders the error with the plugin's last stderr lines. Everything
// in it that came from the plugin (its version, its error message, its
// stderr) is cleaned of terminal control sequences and capped in length.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("plugin ")
	b.WriteString(termsafe.Line(e.Plugin))
	if e.Version != "" {
		b.WriteString(" " + termsafe.Excerpt(termsafe.Line(e.Version), 100))
	}
	if e.Hook != "" {
		if _, err := sdk.ParseHook(e.Hook); err == nil {
			b.WriteString(", hook " + e.Hook)
		} else {
			b.WriteString(", " + termsafe.Line(e.Hook))
		}
	}
	b.WriteString(": ")
	b.WriteString(termsafe.Excerpt(termsafe.Text(e.Cause), maxCause))
	if len(e.Stderr) > 0 {
		fmt.Fprintf(&b, "\n  last stderr lines of %s:", termsafe.Line(e.Plugin))
		for _, l := range e.Stderr {
			b.WriteString("\n    ")
			b.WriteString(summarize(l))
		}
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ConfigError reports a plugin's config problems, each with its field path.
type ConfigError struct {
	Plugin      string
	Diagnostics []sdk.Diagnostic
}

// Error lists every problem, one per line: "plugin acme: config field
// replicas: must be 0 or more". The plugin's text is cleaned of terminal
// control sequences and capped in length.
func (e *ConfigError) Error() string {
	lines := make([]string, 0, len(e.Diagnostics))
	for _, d := range e.Diagnostics {
		s := "plugin " + termsafe.Line(e.Plugin) + ": config"
		if d.Path != "" {
			s += " field " + termsafe.Excerpt(termsafe.Line(d.Path), 200)
		}
		s += ": " + termsafe.Excerpt(termsafe.Line(d.Summary), maxCause)
		if d.Detail != "" {
			s += " (" + termsafe.Excerpt(termsafe.Line(d.Detail), maxCause) + ")"
		}
		lines = append(lines, s)
	}
	return strings.Join(lines, "\n")
}

// DependencyError reports a problem in the plugins' dependency graph: a
// missing required dependency, a version that does not satisfy a
// dependency's constraint, or a cycle.
type DependencyError struct {
	// Plugin is the plugin whose dependency is the problem (empty for a cycle).
	Plugin string
	// Cycle lists the plugins of a cycle, first repeated last: a, b, a.
	Cycle []string
	// Message says what is wrong and how to fix it.
	Message string
}

// Error returns the message (it quotes plugins' descriptions: cleaned of
// terminal control sequences).
func (e *DependencyError) Error() string { return termsafe.Text(e.Message) }
