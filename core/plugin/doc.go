// Package plugin is marina's host-side plugin runtime: it launches plugin
// processes, supervises them, and dispatches lifecycle hooks across them.
// It does not find or install plugins (package pluginstore does); it is
// handed a Spec per plugin.
//
// # Launching
//
// Start runs one plugin with hashicorp/go-plugin: gRPC only, peer
// credentials (sdk/peercred; AutoMTLS where the kernel cannot name a Unix
// socket's peer), protocol negotiation through sdk.HostPluginSets (VersionedPlugins), a
// fresh go-plugin Client per start (a failed client is never reused), and
// an explicit logger (never go-plugin's default Trace logger). Before exec
// the executable's sha256 is checked when the Spec records one. After the
// handshake the plugin's Describe is checked: its name and version must be
// the Spec's, its protocol major must be sdk.ProtocolMajor and its minor
// at most sdk.ProtocolMinor.
//
// # Supervision
//
// Every plugin runs in its own process group (Setpgid; on Linux also
// Pdeathsig=SIGTERM, and marina is a child subreaper while plugins run, so
// a marina killed outright leaves nothing behind; the SDK's Serve watches
// its parent on every platform and tears down its own descendants). Its
// stdin is /dev/null and marina reaps it itself, so an exit is noticed even
// while a grandchild still holds the plugin's stderr. go-plugin's socket
// directory lives under marina's run directory (Options.RunDir) and a dead
// marina's are swept at the next start.
//
// Stopping a plugin (Close, or after a failed call) is bounded and always
// ends with the plugin's whole tree gone — its process group, and every
// descendant found through the process table even if it left the group
// (setsid) or was re-parented to marina as an orphan:
//
//  1. the plugin is asked to shut down (go-plugin's Shutdown RPC; an SDK
//     plugin then exits) and gets Options.KillGrace to exit;
//  2. its process group gets SIGTERM, and KillGrace more;
//  3. its process group gets SIGKILL, and the plugin is reaped;
//  4. whatever is left of the tree (children the plugin spawned, in the
//     group or not) gets SIGTERM, KillGrace, then SIGKILL.
//
// Every hook call has a deadline (the plugin's declared default, or the
// user's override). When it passes, or ctx is cancelled, the gRPC call is
// cancelled (the plugin's ctx ends with it) and the plugin is stopped as
// above before RunHook returns, so the caller never waits more than about
// deadline + 2×KillGrace. A plugin that timed out, was cancelled, panicked
// or exited is marked failed and never called again: later calls return
// the original error. An error the hook returns itself leaves the plugin
// usable.
//
// Every failure is an *Error naming the plugin, its version, the hook (or
// operation) and the cause — "timed out after 2s", "panicked: boom",
// "exited unexpectedly (exit status 3)", "was cancelled", "printed to
// stdout before the handshake: ...", "speaks protocol 2, this marina
// speaks protocol 1.0: ..." — followed by the plugin's last stderr lines.
//
// # Logs
//
// A plugin logs to stderr in hclog's JSON format (the SDK's logger does
// this). Each record is re-logged on marina's slog logger at its own level
// with plugin=<name>, so the user's level filters plugin output (Info by
// default; a plain stderr line counts as Info, a Go panic trace as Error).
// go-plugin's own messages are logged at Debug. Every stderr line also goes
// to Options.LogFile, prefixed "[name] ". Output on stdout after the
// handshake is logged as a warning; before the handshake it breaks the
// protocol, and Start says so.
//
// # Plugin output is untrusted
//
// Everything a plugin sends that marina shows (log records and their
// attributes, error messages, diagnostics, progress, host-change reasons)
// is cleaned of terminal control sequences (package termsafe) and capped in
// length. A plugin's stderr is capped per hook: fileBudget to the log file,
// then a line saying how much was left out and the last tailBudget of it;
// termBudget to the logger, then a warning. Outputs a hook returns that the
// plugin's description does not declare are dropped with a warning; outputs
// over MaxOutputKeys, MaxOutputValue or MaxOutputsTotal fail the hook
// (KindOutput).
//
// # Dispatch
//
// A Dispatcher runs a hook over the configured plugins: it checks the
// dependency graph first (a missing required dependency, an unsatisfied
// version constraint or a cycle is an error before any hook runs, and
// before any process starts when descriptions are cached), starts only the
// plugins that implement the hook, in parallel, runs each after the
// plugins it depends on and independent ones concurrently, hands each the
// outputs its dependencies published (accumulated across hooks), and on
// the first failure cancels the rest.
//
// The package supports Unix hosts (macOS, Linux).
package plugin
