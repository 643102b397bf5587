package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/hostnet"
)

// sudoersOptions is one `marina sudoers` run; the command fills it from
// flags and the machine, tests fill it by hand (a fake Runner in Priv).
type sudoersOptions struct {
	spec    hostnet.SudoersSpec
	path    string
	install bool
	check   bool
	remove  bool
	goos    string
	priv    *hostnet.Privileged
	out     io.Writer
}

func newSudoersCmd(a *app) *cobra.Command {
	var o sudoersOptions
	var userName, group string
	cmd := &cobra.Command{
		Use:     "sudoers [--install | --check | --remove]",
		GroupID: "setup",
		Short:   "Print, install, check or remove /etc/sudoers.d/marina: the route changes without a password (macOS)",
		Long: `The sudoers drop-in lets you (or a group) run, without a password, exactly the route
commands marina runs on macOS for network.bridgeCIDR: the delete of that route and its add
through one IPv4 gateway. With it, the VM's host agent moves the route when the VM's lima0
address changes (sleep/wake, another network) instead of leaving it stale until the next
marina up; marina up itself stops asking for a password for the route.

Without a flag the content is printed and nothing is changed. --install writes it (the
commands are shown first; sudo asks for your password once), checked with visudo before
it takes effect. --check verifies the installed file; --remove deletes it. Run it again
after changing network.bridgeCIDR. Like limactl sudoers, it is for the user who runs
marina: do not run it with sudo (it would be for root, who needs no rule).`,
		Example: `  marina sudoers                 # show the drop-in
  marina sudoers --install       # write /etc/sudoers.d/marina (asks for sudo once)
  marina sudoers --check         # is it installed and current?
  marina sudoers --group admin   # for every member of admin, as Lima's %admin rule`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{o.install, o.check, o.remove} {
				if b {
					n++
				}
			}
			if n > 1 {
				return exitcode.NewUsage(errors.New("--install, --check and --remove do not mix: choose one"))
			}
			if userName != "" && group != "" {
				return exitcode.NewUsage(errors.New("--user and --group do not mix: the rule is for one user or one group"))
			}
			l, err := a.loadConfig()
			if err != nil {
				return err
			}
			o.spec = hostnet.SudoersSpec{CIDR: l.Config.Network.BridgeCIDR, User: userName, Group: group}
			if userName == "" && group == "" {
				if o.spec.User, err = invokingUser(); err != nil {
					return err
				}
			}
			o.goos, o.out, o.priv = hostOS(), a.out, hostnet.NewPrivileged(a.err)
			return runSudoers(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.install, "install", false, "write the drop-in (shows the sudo commands first)")
	f.BoolVar(&o.check, "check", false, "verify that the installed drop-in is marina's current one; exit 1 when not")
	f.BoolVar(&o.remove, "remove", false, "delete the drop-in")
	f.StringVar(&o.path, "path", hostnet.SudoersPath, "where the drop-in lives")
	f.StringVar(&userName, "user", "", "the user the rule is for (default: you)")
	f.StringVar(&group, "group", "", "a group the rule is for instead of a user, e.g. admin")
	return cmd
}

// invokingUser is the user marina runs as; under sudo, the user who ran
// sudo (the rule is for them, not for root).
func invokingUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("who runs marina: %w; pass --user", err)
	}
	if u.Uid == "0" {
		if su := os.Getenv("SUDO_USER"); su != "" && su != "root" {
			return su, nil
		}
		return "", exitcode.NewUsage(errors.New("marina sudoers writes a rule for the user who runs marina, and root needs none: " +
			"run it as that user (without sudo), or pass --user NAME or --group NAME"))
	}
	return u.Username, nil
}

// sudoersProbe is the gateway `--check` asks sudo about when it cannot read
// the file: any dotted quad the rule must allow.
const sudoersProbe = "192.168.64.3"

func runSudoers(ctx context.Context, o sudoersOptions) error {
	content, err := hostnet.Sudoers(o.spec)
	if err != nil {
		return exitcode.NewUsage(err)
	}
	if !o.install && !o.check && !o.remove {
		_, err := o.out.Write(content)
		return err
	}
	if o.goos != hostnet.Darwin {
		return fmt.Errorf("the drop-in allows macOS's /sbin/route commands; on this machine (%s) marina does not route the bridge through them: "+
			"the host driver needs no route, and the lima driver's `ip route` runs through sudo as usual", goosName(o.goos))
	}
	st, err := hostnet.CheckSudoers(o.path, content)
	if err != nil {
		return err
	}
	switch {
	case o.check:
		return checkSudoers(ctx, o, st)
	case o.remove:
		if !st.Exists {
			fmt.Fprintf(o.out, "%s is not there: nothing to remove\n", o.path)
			return nil
		}
		if st.Readable && !st.Ours {
			return fmt.Errorf("%s was not written by marina (no marina header): remove it yourself if you mean to", o.path)
		}
		cmds, err := hostnet.SudoersRemoveCmds(o.path)
		if err != nil {
			return err
		}
		if err := o.priv.Do(ctx, "remove marina's sudoers drop-in "+o.path, cmds...); err != nil {
			return err
		}
		fmt.Fprintf(o.out, "Removed %s: route changes ask for your password again\n", o.path)
		return nil
	}
	if st.Current {
		fmt.Fprintf(o.out, "%s is installed and current\n", o.path)
		return nil
	}
	if st.Readable && !st.Ours {
		return fmt.Errorf("%s exists and was not written by marina (no marina header): marina leaves it alone; choose another --path", o.path)
	}
	// Check the content before asking for privileges; the install checks
	// the written file again, as root, before it takes effect.
	if _, err := hostnet.VisudoCheck(ctx, content); err != nil {
		return err
	}
	cmds, err := hostnet.SudoersInstallCmds(o.path, content)
	if err != nil {
		return err
	}
	if err := o.priv.Do(ctx, "let the route to the VM change without a password ("+o.path+")", cmds...); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "Installed %s: the VM's host agent now moves the route %s when the VM's address changes\n", o.path, o.spec.CIDR)
	return nil
}

// checkSudoers: the file's bytes when it can be read; otherwise (0440 in a
// directory only root may read) sudo itself says whether it allows the
// route commands without a password.
func checkSudoers(ctx context.Context, o sudoersOptions, st hostnet.SudoersState) error {
	fix := "marina sudoers --install"
	switch {
	case st.Current:
		fmt.Fprintf(o.out, "%s is installed and current (%s)\n", o.path, o.spec.CIDR)
		return nil
	case st.Readable && !st.Ours:
		return fmt.Errorf("%s was not written by marina", o.path)
	case st.Readable:
		return fmt.Errorf("%s is out of date (another network.bridgeCIDR, user or marina version): run %s", o.path, fix)
	case !st.Exists:
		return fmt.Errorf("%s is not installed: run %s", o.path, fix)
	}
	cmds, err := hostnet.DarwinRouteCommands(o.spec.CIDR)
	if err != nil {
		return err
	}
	del := strings.Fields(cmds[0])
	add := append(strings.Fields(strings.Replace(cmds[0], "delete", "add", 1)), sudoersProbe)
	refused, err := hostnet.SudoAllows(ctx, o.priv.Runner, del, add)
	if err != nil {
		return err
	}
	if refused != nil {
		return fmt.Errorf("%s cannot be read without root, and sudo asks for a password for %s: run %s", o.path, hostnet.QuoteArgv(refused), fix)
	}
	fmt.Fprintf(o.out, "sudo runs marina's route commands for %s without a password (%s is readable only by root)\n", o.spec.CIDR, o.path)
	return nil
}

func goosName(goos string) string {
	if goos == "" {
		return "an OS marina makes no host changes on"
	}
	return goos
}
