//go:build unix && !linux && !darwin

package sdk

// becomeSubreaper does nothing on this OS.
func becomeSubreaper() {}

// listProcs returns nothing: there is no process-table reader for this OS,
// so killDescendants has nothing to kill (marina kills the process group).
func listProcs() []proc { return nil }
