package hostnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/term"
)

// Runner runs one command, given as argv (never a shell string), with stdin
// (may be nil) and returns its standard output. A command that cannot start
// or exits non-zero is an error; [ExecRunner] returns a [*CommandError].
type Runner interface {
	Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error)
}

// ExecRunner runs commands on this machine with os/exec. Standard error is
// captured into the returned [*CommandError]; sudo still prompts on the
// terminal, because it talks to /dev/tty, not to stdin or stderr.
type ExecRunner struct{}

// Run runs argv, bounded by ctx.
func (ExecRunner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("hostnet: empty command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return out.Bytes(), &CommandError{Argv: argv, Stderr: strings.TrimSpace(errb.String()), Err: err}
	}
	return out.Bytes(), nil
}

// CommandError is a command that could not start or exited non-zero.
type CommandError struct {
	// Argv is the command as run.
	Argv []string
	// Stderr is its trimmed standard error.
	Stderr string
	// Err is the underlying error (an *exec.ExitError for a non-zero exit).
	Err error
}

// Error renders the command shell-quoted, the cause and stderr.
func (e *CommandError) Error() string {
	s := QuoteArgv(e.Argv) + ": " + e.Err.Error()
	if e.Stderr != "" {
		s += ": " + e.Stderr
	}
	return s
}

// Unwrap returns the underlying error.
func (e *CommandError) Unwrap() error { return e.Err }

// Cmd is one privileged command: argv plus optional standard input (how
// files are written: `tee <path>` with the content on stdin).
type Cmd struct {
	Argv  []string
	Stdin []byte
}

// String renders the command for copy-paste into a POSIX shell (without
// sudo), see [Cmd.Render].
func (c Cmd) String() string { return c.Render(false) }

// Render renders the command as one line for copy-paste into a POSIX shell:
// argv shell-quoted, prefixed with "sudo " when sudo is true. A command with
// stdin is fed by printf: `printf '%s\n' 'line 1' 'line 2' | sudo tee
// /path >/dev/null` (its output goes to /dev/null, as marina discards it
// too). The rendering is for people only: marina itself always runs argv.
func (c Cmd) Render(sudo bool) string {
	s := QuoteArgv(c.Argv)
	if sudo {
		s = "sudo " + s
	}
	if c.Stdin == nil {
		return s
	}
	body := string(c.Stdin)
	var feed []string
	if strings.HasSuffix(body, "\n") {
		feed = append([]string{"printf", `%s\n`}, strings.Split(strings.TrimSuffix(body, "\n"), "\n")...)
	} else {
		feed = []string{"printf", "%s", body}
	}
	return QuoteArgv(feed) + " | " + s + " >/dev/null"
}

// QuoteArgv renders argv as one POSIX shell command line that runs exactly
// argv: words made only of safe characters stay bare, others are
// single-quoted.
func QuoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// Quote quotes one word for a POSIX shell.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Privileged runs commands as root on this machine, always showing them
// first. Build it with [NewPrivileged] or fill the fields (tests inject a
// fake Runner).
type Privileged struct {
	// Runner runs every command (sudo included). Read-only probes that need
	// no root (route lookups) also use it directly.
	Runner Runner
	// IsRoot: marina already runs as root, commands run without sudo.
	IsRoot bool
	// Interactive: standard input is a terminal, so sudo may ask for a
	// password there. When false marina never lets sudo prompt.
	Interactive bool
	// Out receives the announcement printed before any command runs; nil
	// means os.Stderr.
	Out io.Writer
}

// NewPrivileged returns a Privileged for this process: the exec Runner,
// IsRoot from the effective uid, Interactive when stdin is a terminal.
func NewPrivileged(out io.Writer) *Privileged {
	return &Privileged{
		Runner:      ExecRunner{},
		IsRoot:      os.Geteuid() == 0,
		Interactive: term.IsTerminal(int(os.Stdin.Fd())),
		Out:         out,
	}
}

// NeedPrivilegeError says that marina needed root, had no terminal to let
// sudo ask for a password, and changed nothing. Its message lists the exact
// commands the user can run instead. The command layer maps it to an exit
// status.
type NeedPrivilegeError struct {
	// Reason completes "marina needs administrator rights to ...".
	Reason string
	// Commands are the commands marina would have run, in order.
	Commands []Cmd
	// Cause is why sudo could not run without a password (the `sudo -n
	// true` failure).
	Cause error
}

// Error explains the situation and lists the commands, one per line, ready
// to paste into a terminal.
func (e *NeedPrivilegeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "marina needs administrator rights to %s, but sudo needs a password and there is no terminal to ask for it", e.Reason)
	if e.Cause != nil {
		fmt.Fprintf(&b, " (%v)", e.Cause)
	}
	b.WriteString(".\nNothing was changed. Run these commands in a terminal, then run marina again:\n")
	for _, c := range e.Commands {
		b.WriteString("  " + c.Render(true))
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Unwrap returns the cause.
func (e *NeedPrivilegeError) Unwrap() error { return e.Cause }

// Do runs cmds as root, in order, stopping at the first failure. It first
// prints "marina needs administrator rights to <reason>:" and every command
// to Out, so the user sees them before sudo asks for a password. When not
// root and not interactive, it first asks `sudo -n -l -- <command>` for each
// command; if sudo would need a password for any, it runs nothing and returns
// a *NeedPrivilegeError. No commands
// means nothing is printed or run.
func (p *Privileged) Do(ctx context.Context, reason string, cmds ...Cmd) error {
	if len(cmds) == 0 {
		return nil
	}
	for i, c := range cmds {
		if len(c.Argv) == 0 || c.Argv[0] == "" {
			return fmt.Errorf("hostnet: privileged command %d for %q is empty", i, reason)
		}
	}
	if p.Runner == nil {
		return errors.New("hostnet: Privileged.Runner is nil")
	}
	if !p.IsRoot && !p.Interactive {
		// Ask sudo about each command (`sudo -n -l -- argv`), not about
		// `true`: a sudoers drop-in that allows exactly these commands
		// without a password (`marina sudoers --install`) allows nothing
		// else.
		for _, c := range cmds {
			if _, err := p.Runner.Run(ctx, append([]string{"sudo", "-n", "-l", "--"}, c.Argv...), nil); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return &NeedPrivilegeError{Reason: reason, Commands: cmds, Cause: err}
			}
		}
	}
	out := p.Out
	if out == nil {
		out = os.Stderr
	}
	var b strings.Builder
	if p.IsRoot {
		fmt.Fprintf(&b, "marina runs these commands as root to %s:\n", reason)
	} else {
		fmt.Fprintf(&b, "marina needs administrator rights to %s:\n", reason)
	}
	for _, c := range cmds {
		b.WriteString("  " + c.Render(!p.IsRoot))
		b.WriteString("\n")
	}
	if _, err := io.WriteString(out, b.String()); err != nil {
		return fmt.Errorf("hostnet: showing the privileged commands: %w", err)
	}
	for _, c := range cmds {
		if _, err := p.Runner.Run(ctx, p.argv(c.Argv), c.Stdin); err != nil {
			return fmt.Errorf("%s: %w", reason, err)
		}
	}
	return nil
}

// nonInteractive is p as used without a terminal: sudo never prompts.
func nonInteractive(p *Privileged) *Privileged {
	q := *p
	q.Interactive = false
	return &q
}

// argv prefixes sudo when needed; without a terminal sudo gets -n, so it
// fails instead of prompting even if its credential cache expired since the
// `sudo -n -l` probe.
func (p *Privileged) argv(argv []string) []string {
	switch {
	case p.IsRoot:
		return argv
	case p.Interactive:
		return append([]string{"sudo", "--"}, argv...)
	default:
		return append([]string{"sudo", "-n", "--"}, argv...)
	}
}
