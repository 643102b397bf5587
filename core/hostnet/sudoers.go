package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// SudoersPath is where `marina sudoers --install` puts its drop-in. sudo
// reads every file in /etc/sudoers.d whose name has no '.' and does not end
// in '~' (macOS: `#includedir /private/etc/sudoers.d`).
const SudoersPath = "/etc/sudoers.d/marina"

// sudoersHeader is the first line of marina's drop-in: marina removes only
// a file that starts with it.
const sudoersHeader = "# managed by marina: `marina sudoers` writes this file; do not edit it."

// Absolute paths of the tools the install runs as root, present at these
// paths on macOS and on Linux (usr-merged /bin), so that neither PATH nor
// sudo's secure_path decides which binary runs.
const (
	teePath    = "/usr/bin/tee"
	visudoPath = "/usr/sbin/visudo"
	chmodPath  = "/bin/chmod"
	mvPath     = "/bin/mv"
	rmPath     = "/bin/rm"
)

// SudoersSpec says whom the drop-in lets run marina's route commands, and
// for which bridge CIDR.
type SudoersSpec struct {
	// CIDR is the bridge network (network.bridgeCIDR).
	CIDR string
	// User is the one user the rule is for (the user who runs marina).
	// Exactly one of User and Group is set.
	User string
	// Group is a group whose members the rule is for (Lima's `%admin`
	// style), without the '%'.
	Group string
}

// sudoersName is what sudoers accepts unquoted as a user or group name; a
// name with anything else (spaces, ',', ':', '=', '\', '#') would need
// escaping, so it is refused rather than escaped.
var sudoersName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`) })

// principal renders the rule's subject: "alice" or "%admin".
func (s SudoersSpec) principal() (string, error) {
	switch {
	case s.User != "" && s.Group != "":
		return "", errors.New("sudoers: set a user or a group, not both")
	case s.User != "":
		if !sudoersName().MatchString(s.User) {
			return "", fmt.Errorf("sudoers: user name %q has characters marina does not write into a sudoers rule", s.User)
		}
		if s.User == "root" {
			return "", errors.New("sudoers: root needs no sudoers rule; run marina sudoers as the user who runs marina (or pass --user)")
		}
		return s.User, nil
	case s.Group != "":
		if !sudoersName().MatchString(s.Group) {
			return "", fmt.Errorf("sudoers: group name %q has characters marina does not write into a sudoers rule", s.Group)
		}
		return "%" + s.Group, nil
	}
	return "", errors.New("sudoers: a user or a group is required")
}

// DarwinRouteCommands are the command patterns the drop-in allows: the
// exact commands [Route] runs on macOS for the CIDR, with the gateway as a
// pattern. sudoers matches arguments with fnmatch(3), where '*' (and '?')
// also match spaces, so `... 172.30.0.0/16 *` would allow any further
// arguments (`-ifscope`, `-netmask`, ...). Instead the gateway is spelled
// out as every dotted quad of 1 to 3 digits per octet, in bracket classes
// that match one digit each: 81 patterns that together match exactly one
// word of the form d.d.d.d. The delete takes no gateway (Route deletes the
// CIDR's route whatever it points at), so it is allowed verbatim. `route
// change` is not allowed: marina does not run it.
func DarwinRouteCommands(cidr string) ([]string, error) {
	pfx, err := parseBridgeCIDR(cidr)
	if err != nil {
		return nil, err
	}
	base := darwinRoute + " -n "
	cmds := []string{base + "delete -net " + pfx.String()}
	octets := []string{"[0-9]", "[0-9][0-9]", "[0-9][0-9][0-9]"}
	for _, a := range octets {
		for _, b := range octets {
			for _, c := range octets {
				for _, d := range octets {
					cmds = append(cmds, base+"add -net "+pfx.String()+" "+a+"."+b+"."+c+"."+d)
				}
			}
		}
	}
	return cmds, nil
}

// Sudoers renders marina's sudoers drop-in: NOPASSWD for exactly the route
// commands marina runs on macOS for spec.CIDR, as root, for spec's user or
// group (as Lima's `limactl sudoers` writes /etc/sudoers.d/lima: one rule,
// NOPASSWD:NOSETENV, arguments spelled out). The content depends only on
// spec, so `marina sudoers --check` compares bytes.
func Sudoers(spec SudoersSpec) ([]byte, error) {
	who, err := spec.principal()
	if err != nil {
		return nil, err
	}
	cmds, err := DarwinRouteCommands(spec.CIDR)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(sudoersHeader + "\n")
	fmt.Fprintf(&b, "#\n# Lets %s route the docker bridge %s to the VM's address without a\n", who, spec.CIDR)
	b.WriteString("# password, so that the VM's host agent can move the route when the address\n")
	b.WriteString("# changes (sleep/wake, network change). It allows nothing else: the delete\n")
	b.WriteString("# of that route and its add through one IPv4 gateway (a dotted quad, spelled\n")
	b.WriteString("# as digit classes because sudoers' '*' would also match extra arguments).\n")
	b.WriteString("# Regenerate after changing network.bridgeCIDR: marina sudoers --install\n")
	b.WriteString("# Verify: marina sudoers --check   Remove: marina sudoers --remove\n\n")
	fmt.Fprintf(&b, "%s ALL=(root) NOPASSWD:NOSETENV: \\\n", who)
	for i, c := range cmds {
		sep := ", \\"
		if i == len(cmds)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s%s\n", c, sep)
	}
	return []byte(b.String()), nil
}

// sudoersTemp is where the install writes the new content before checking
// it: next to the target, with a '.' in its name so that sudo never reads
// it even if the install stops half-way.
func sudoersTemp(path string) string { return path + ".tmp" }

// SudoersInstallCmds are the privileged commands that install content at
// path: write it to a temporary file sudo ignores, check it with visudo,
// make it root's and read-only (0440, what visudo expects of sudoers
// files), then rename it over path in one step, so sudo never sees a
// partial or invalid file.
func SudoersInstallCmds(path string, content []byte) ([]Cmd, error) {
	if err := checkSudoersPath(path); err != nil {
		return nil, err
	}
	tmp := sudoersTemp(path)
	return []Cmd{
		{Argv: []string{teePath, tmp}, Stdin: content},
		{Argv: []string{visudoPath, "-c", "-f", tmp}},
		{Argv: []string{chmodPath, "0440", tmp}},
		{Argv: []string{mvPath, "-f", tmp, path}},
	}, nil
}

// SudoersRemoveCmds is the privileged command that removes path.
func SudoersRemoveCmds(path string) ([]Cmd, error) {
	if err := checkSudoersPath(path); err != nil {
		return nil, err
	}
	return []Cmd{{Argv: []string{rmPath, "-f", "--", path}}}, nil
}

func checkSudoersPath(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("sudoers: %q is not a clean absolute path", path)
	}
	if strings.Contains(filepath.Base(path), ".") || strings.HasSuffix(path, "~") {
		return fmt.Errorf("sudoers: sudo ignores %s in sudoers.d (a '.' in the name, or a trailing '~'): choose a name without them", path)
	}
	return nil
}

// SudoersState is what is installed at a path.
type SudoersState struct {
	// Exists: a file is there (false also when it cannot be looked at).
	Exists bool
	// Readable: this process could read it (a 0440 root file in a 0750
	// directory is not readable by the user on Linux).
	Readable bool
	// Ours: it starts with marina's header.
	Ours bool
	// Current: its content is exactly the wanted content.
	Current bool
}

// CheckSudoers compares the file at path with want, without privileges.
func CheckSudoers(path string, want []byte) (SudoersState, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return SudoersState{Exists: true, Readable: true,
			Ours: strings.HasPrefix(string(b), sudoersHeader+"\n"), Current: string(b) == string(want)}, nil
	case errors.Is(err, fs.ErrNotExist):
		return SudoersState{}, nil
	case errors.Is(err, fs.ErrPermission):
		// The file may exist; whether it does cannot be told without root
		// when the directory is not searchable either.
		_, serr := os.Stat(path)
		return SudoersState{Exists: serr == nil || errors.Is(serr, fs.ErrPermission)}, nil
	}
	return SudoersState{}, fmt.Errorf("sudoers: read %s: %w", path, err)
}

// SudoAllows asks sudo, without a password (`sudo -n -l`), whether this
// user may run each of argvs as root without one: sudo lists a command it
// allows and exits 1 for one it does not. A NOPASSWD rule is enough for
// `sudo -l` not to ask (sudo's default listpw=any). It returns the first
// refused command, or nil when all are allowed.
func SudoAllows(ctx context.Context, r Runner, argvs ...[]string) ([]string, error) {
	for _, argv := range argvs {
		if _, err := r.Run(ctx, append([]string{"sudo", "-n", "-l", "--"}, argv...), nil); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var ce *CommandError
			if errors.As(err, &ce) {
				var ee *exec.ExitError
				if errors.As(ce.Err, &ee) || ce.Stderr != "" {
					return argv, nil
				}
			}
			return nil, err
		}
	}
	return nil, nil
}

// VisudoCheck checks content with `visudo -c -f` when visudo is installed
// (it reports whether it ran); the file is a temporary one.
func VisudoCheck(ctx context.Context, content []byte) (bool, error) {
	visudo, err := exec.LookPath("visudo")
	if err != nil {
		if _, serr := os.Stat(visudoPath); serr != nil {
			return false, nil
		}
		visudo = visudoPath
	}
	dir, err := os.MkdirTemp("", "marina-sudoers-")
	if err != nil {
		return true, err
	}
	defer os.RemoveAll(dir)
	f := filepath.Join(dir, "marina")
	if err := os.WriteFile(f, content, 0o440); err != nil {
		return true, err
	}
	if _, err := (ExecRunner{}).Run(ctx, []string{visudo, "-c", "-f", f}, nil); err != nil {
		return true, fmt.Errorf("visudo rejects the sudoers content: %w", err)
	}
	return true, nil
}
