// Package exitcode defines marina's process exit statuses and maps errors to them.
//
//	0   success
//	1   failure (the operation was attempted and failed)
//	2   usage or configuration error (bad flag, argument, config file, manifest); nothing was changed
//	130 interrupted (Ctrl-C / SIGINT); the command says what was done and left undone
package exitcode

import (
	"context"
	"errors"
	"strings"
)

// The exit statuses marina uses.
const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	Interrupted = 130
)

// Coder is implemented by errors that carry their own exit status.
type Coder interface{ ExitCode() int }

// UsageError marks an error as a usage or configuration problem (exit 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode returns Usage.
func (e *UsageError) ExitCode() int { return Usage }

// NewUsage wraps err as a usage error; nil stays nil.
func NewUsage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// Of returns the exit status for err: 0 for nil, the status an error in the
// chain carries, 130 for cancellation, 2 for cobra's own usage errors, else 1.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	if errors.Is(err, context.Canceled) {
		return Interrupted
	}
	msg := err.Error()
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(msg, p) {
			return Usage
		}
	}
	return Failure
}

// cobraUsagePrefixes are the messages cobra produces for bad command lines.
var cobraUsagePrefixes = []string{
	"unknown command",
	"unknown flag",
	"unknown shorthand flag",
	"accepts ",
	"requires at least",
	"requires at most",
	"invalid argument",
	"flag needs an argument",
	"invalid args",
	"required flag",
}
