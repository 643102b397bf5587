// Command marina is marina's front, the program users run. It answers
// version, config path, config view, the status of a lab whose machine
// certainly does not run and the plugin list of a lab whose plugins are all
// built in itself, and replaces itself (execve) with marina-core, found
// beside it, for every other command line: same process, arguments,
// environment, standard streams, signals and exit status, so nothing
// downstream can tell. The front links only light
// packages (core/cli and what it needs; TestFrontImportGraph keeps it so),
// so what it answers starts like a small CLI; marina-core links Docker's
// and Kubernetes' clients, gRPC and the built-in plugins (issue 14).
//
// When in doubt it hands over: help in any form, --debug, an unknown
// command or a command it does not serve. A command line whose first word
// is not one of its commands is handed over before its packages initialize
// (internal/dispatch).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	// Its init hands a command line that is certainly marina-core's over
	// before the other packages initialize (see the package).
	"github.com/bcollard/marina/cmd/marina/internal/dispatch"
	"github.com/bcollard/marina/core/buildinfo"
	"github.com/bcollard/marina/core/cli"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/homeenv"
	"github.com/bcollard/marina/core/pluginlist"
)

func main() {
	args := os.Args[1:]
	root := newRoot()
	if !answers(root, args) {
		os.Exit(handOver(args))
	}
	root.SetArgs(args)
	err := root.Execute()
	if errors.Is(err, cli.ErrHandOver) {
		os.Exit(handOver(args))
	}
	os.Exit(cli.Report(err, os.Stderr))
}

// newRoot is the front's command tree: the root with its global flags and
// the commands the front answers.
func newRoot() *cobra.Command {
	g := &cli.Global{}
	root := cli.NewRoot(os.Stdin, os.Stdout, os.Stderr, g)
	config := cli.NewConfigCmd()
	config.AddCommand(cli.NewConfigPathCmd(os.Stdout, os.Stderr, g), cli.NewConfigViewCmd(os.Stdout, os.Stderr, g))
	plugin := cli.NewPluginCmd()
	plugin.AddCommand(pluginlist.NewCmd(os.Stdout, pluginRows(g, os.Stderr)))
	root.AddCommand(cli.NewVersionCmd(os.Stdout), config, plugin, newStatusCmd(os.Stdout, os.Stderr, g))
	return root
}

// answers reports whether the front runs args itself: they name one of its
// runnable commands, and ask for no help and no debug output (marina-core
// has every command's help, and the debug details of its start).
func answers(root *cobra.Command, args []string) bool {
	if dispatch.CoreOnly(args) {
		return false
	}
	c, _, err := root.Find(args)
	return err == nil && c != root && c.Runnable()
}

// handOver replaces this process with marina-core running args. It returns
// only when that fails, with the exit status to leave with.
func handOver(args []string) int {
	core, tried, err := dispatch.Find()
	var usage *dispatch.UsageError
	switch {
	case errors.As(err, &usage):
		return cli.Report(exitcode.NewUsage(usage.Err), os.Stderr)
	case err != nil:
		return cli.Report(err, os.Stderr)
	case core == "":
		return cli.Report(notFound(tried), os.Stderr)
	}
	err = syscall.Exec(core, append([]string{core}, args...), homeenv.Original)
	return cli.Report(fmt.Errorf("starting %s: %w", core, err), os.Stderr)
}

// notFound says marina-core is missing and how to install it.
func notFound(tried []string) error {
	v := buildinfo.Version
	if !strings.HasPrefix(v, "v") {
		v = "latest" // a development build: no tag to match
	}
	return fmt.Errorf("%s, the program behind every marina command but version, config path and config view, "+
		"is not at %s. It ships beside marina in every release, and `make build` and `make install` build both; "+
		"after `go install`, install it too, at the same version: "+
		"go install github.com/bcollard/marina/cmd/marina@%s github.com/bcollard/marina/cmd/%s@%s "+
		"(or set %s to its path)", dispatch.CoreName, strings.Join(tried, " or "), v, dispatch.CoreName, v, dispatch.CoreEnv)
}
