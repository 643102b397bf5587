// Package homeenv makes sure $HOME names a directory before any other package
// of marina's reads it at init time. Lima's limayaml package computes its
// defaults in a package variable and panics when $HOME is unset or empty, so
// without this every marina command — `version` and `--help` included —
// panicked without a home.
//
// Go initializes packages in import-path order among those whose imports are
// initialized (the spec's rule since Go 1.21); this package imports only the
// standard library and its path sorts before github.com/lima-vm/..., so
// importing it from main runs its init before Lima's.
//
// When $HOME is unset or empty, init sets it from the user database (the
// home of the current uid, as login would). When that fails too, it sets a
// directory that does not exist, so that nothing panics, and records the
// problem: Problem says what happened and how to fix it, and commands that
// need a home refuse with it.
package homeenv

import (
	"fmt"
	"os"
	"os/user"
)

// Unusable is the $HOME set when no home directory could be found; nothing
// is ever created there.
const Unusable = "/nonexistent/marina-has-no-home"

// Problem is empty when $HOME was set or found; otherwise it says why marina
// has no home directory and how to give it one.
var Problem string

// Derived is the home directory taken from the user database when $HOME was
// unset or empty ("" otherwise).
var Derived string

func init() { Problem, Derived = ensure(os.Getenv, os.Setenv, user.Current) }

// ensure is init's logic with its inputs passed in (tests).
func ensure(getenv func(string) string, setenv func(string, string) error, current func() (*user.User, error)) (problem, derived string) {
	if getenv("HOME") != "" {
		return "", ""
	}
	u, err := current()
	if err == nil && u.HomeDir != "" {
		if err := setenv("HOME", u.HomeDir); err == nil {
			return "", u.HomeDir
		}
	}
	why := "the user database has no home directory for this user"
	if err != nil {
		why = fmt.Sprintf("the user database does not know this user (uid %d): %v", os.Getuid(), err)
	}
	_ = setenv("HOME", Unusable)
	return fmt.Sprintf("$HOME is not set and %s; marina keeps its state in ~/.marina: set HOME to your home directory (e.g. HOME=/home/you marina ...)", why), ""
}
