// Package homeenv makes sure $HOME names a directory, and that the current
// user can be looked up, before any other package of marina's reads them at
// init time. Lima's limayaml package computes its defaults in a package
// variable and panics when $HOME is unset or empty, and Lima's osutil package
// panics when os/user.Current fails (a uid the user database does not know,
// e.g. a container's arbitrary uid); without this every marina command —
// `version` and `--help` included — panicked.
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
// need a home refuse with it. When $USER is unset, it is set from the user
// database, or to "uid<N>" for an unknown uid: os/user's pure-Go Current
// (marina's Linux builds are CGO_ENABLED=0) then succeeds from $USER and
// $HOME. A cgo build asks the C library, which cannot be told; there init
// exits with a clear error instead of letting Lima panic.
//
// os/user caches its first Current answer for the whole process, and
// LookupId asks Current first: so /etc/passwd is read directly, and Current
// is called only once $USER and $HOME hold at least a fallback.
package homeenv

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
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

func init() {
	Problem, Derived = ensure(os.Getenv, os.Setenv, passwdEntry, user.Current)
	if !cgoLookup {
		return
	}
	if _, err := user.Current(); err != nil {
		// Only a cgo build gets here (see the package comment): Lima's
		// osutil would panic on this error during its own init.
		uid := os.Getuid()
		fmt.Fprintf(os.Stderr, "marina: the user database does not know uid %d (%v), and this marina was built with cgo, whose user lookup cannot be told who you are.\nFix: run as a user listed in /etc/passwd (or add uid %d there), or use a marina built with CGO_ENABLED=0 (the Linux release and `make build` on Linux are).\n", uid, err, uid)
		os.Exit(2)
	}
}

// passwdEntry returns the user name and home directory of the current uid in
// /etc/passwd (what os/user's pure-Go lookup reads), ok=false when absent.
func passwdEntry() (name, home string, ok bool) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return "", "", false
	}
	uid := strconv.Itoa(os.Getuid())
	for _, line := range strings.Split(string(b), "\n") {
		// name:password:uid:gid:gecos:home:shell
		f := strings.Split(line, ":")
		if len(f) >= 7 && f[2] == uid {
			return f[0], f[5], true
		}
	}
	return "", "", false
}

// ensure is init's logic with its inputs passed in (tests): passwd reads
// /etc/passwd, current is os/user.Current (which may ask the C library's
// user database, e.g. LDAP, in a cgo build).
func ensure(getenv func(string) string, setenv func(string, string) error, passwd func() (string, string, bool), current func() (*user.User, error)) (problem, derived string) {
	homeSet, userSet := getenv("HOME") != "", getenv("USER") != ""
	if homeSet && userSet {
		return "", ""
	}
	name, home, ok := passwd()
	if !userSet {
		if !ok || name == "" {
			name = "uid" + strconv.Itoa(os.Getuid())
		}
		_ = setenv("USER", name)
	}
	if homeSet {
		return "", ""
	}
	if ok && home != "" {
		if err := setenv("HOME", home); err == nil {
			return "", home
		}
	}
	// Not in /etc/passwd: a placeholder first, so that Current (pure Go)
	// cannot fail and cache the failure, then the C library's answer if
	// this is a cgo build that knows the user.
	_ = setenv("HOME", Unusable)
	u, err := current()
	if err == nil && u.HomeDir != "" && u.HomeDir != Unusable {
		if err := setenv("HOME", u.HomeDir); err == nil {
			return "", u.HomeDir
		}
	}
	why := "the user database has no home directory for this user"
	if !ok && (err != nil || u.HomeDir == Unusable) {
		why = fmt.Sprintf("the user database does not know this user (uid %d)", os.Getuid())
	}
	return fmt.Sprintf("$HOME is not set and %s; marina keeps its state in ~/.marina: set HOME to your home directory (e.g. HOME=/home/you marina ...)", why), ""
}
