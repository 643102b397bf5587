// Package dispatch finds marina-core and replaces the front with it. Its
// init hands over, before the front's other packages initialize, a command
// line that is certainly marina-core's: its first word is not one of the
// front's commands. It imports only standard packages that initialize
// early (not path/filepath or strings), and Go initializes packages in
// import-path order as soon as their imports are (the spec's rule since Go
// 1.21), so its init runs before cobra's, viper's and the YAML packages',
// which the handed-over command would otherwise pay for in vain
// (TestDispatchFirst checks the order in the built front).
// A command line that names a front command is left to the front's main,
// which decides for certain (it may still hand over).
package dispatch

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// CoreName is the program the front hands over to, beside the front.
const CoreName = "marina-core"

// CoreEnv names a marina-core to use instead of the one beside the front
// (a development checkout's `go run ./cmd/marina`).
const CoreEnv = "MARINA_CORE"

// FrontCommands are the first words of the command lines the front may
// answer itself (version, config path|view, status|st, plugin list|ls).
var FrontCommands = []string{"version", "config", "status", "st", "plugin"}

func init() {
	if CoreOnly(os.Args[1:]) {
		if core, _, err := Find(); err == nil && core != "" {
			_ = syscall.Exec(core, append([]string{core}, os.Args[1:]...), os.Environ())
		}
		// Not found, or exec failed: main finds the same and says so.
	}
}

// CoreOnly reports whether args are certainly marina-core's: help or debug
// output asked for anywhere, or a first word (after the global flags) that
// is not one of FrontCommands. false means the front's main decides.
func CoreOnly(args []string) bool {
	for _, a := range args {
		if a == "help" || a == "-h" || a == "--help" || hasPrefix(a, "--help=") ||
			a == "--debug" || hasPrefix(a, "--debug=") || a == "--" {
			return true
		}
	}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c", a == "--config", a == "--set":
			i++ // the flag's value
		case hasPrefix(a, "-"):
			// --no-wait, --config=..., -cFILE, --set=..., or a flag the front
			// does not know: main's parser decides
		default:
			for _, c := range FrontCommands {
				if a == c {
					return false
				}
			}
			return true
		}
	}
	return true // no command: marina-core's help
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Find finds marina-core: $MARINA_CORE when set (a *UsageError when it
// names no program), else beside the front's real file (what a Homebrew
// symlink points to), else beside the symlink; never from PATH, where a
// marina-core of another version could answer for this marina. When it is
// in none of them, path is "" and tried lists where it looked.
func Find() (path string, tried []string, err error) {
	if p := os.Getenv(CoreEnv); p != "" {
		if err := isProgram(p); err != nil {
			return "", nil, &UsageError{fmt.Errorf("%s=%s: %v; unset it to use the %s beside marina", CoreEnv, p, err, CoreName)}
		}
		return p, nil, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("finding %s: %v", CoreName, err)
	}
	dirs := []string{dir(self)}
	if real := resolve(self); dir(real) != dirs[0] {
		dirs = append([]string{dir(real)}, dirs...)
	}
	for _, d := range dirs {
		p := d + "/" + CoreName
		if isProgram(p) == nil {
			return p, nil, nil
		}
		tried = append(tried, p)
	}
	return "", tried, nil
}

// resolve follows p's symbolic links (a bounded number): path/filepath's
// EvalSymlinks would make this package initialize after the front's others.
func resolve(p string) string {
	for range 32 {
		target, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if target == "" || target[0] != '/' {
			target = dir(p) + "/" + target
		}
		p = target
	}
	return p
}

// dir is p up to its last slash ("." for none).
func dir(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			if i == 0 {
				return "/"
			}
			return p[:i]
		}
	}
	return "."
}

// UsageError is a $MARINA_CORE that names no program (exit status 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// isProgram returns nil when p is an executable regular file.
func isProgram(p string) error {
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return errors.New("not a regular file")
	case st.Mode()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}
