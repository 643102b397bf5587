// Command marina brings up a Lima VM with Docker and a shared bridge, and
// runs many kind clusters on it that are reachable from the host by IP and
// DNS name. It is the one CLI program: every command is answered here; the
// built-in plugins and the kind helper are marina re-executed, and the Lima
// engine is marina-lima (cmd/marina-lima), found beside it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/bcollard/marina/core/exitcode"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/pluginset"
)

func main() {
	// Built-in plugins: marina re-executed as `marina plugin-server NAME`.
	// Served before any signal handling so the plugin behaves like any
	// third-party plugin binary (SIGTERM ends it).
	if len(os.Args) == 3 && os.Args[1] == pluginset.ServeArg {
		os.Exit(servePlugin(os.Args[2], os.Stderr))
	}
	// kind runs in a child (`marina kind-helper`) so only that child gets the
	// lab's DOCKER_HOST and network, and cancellation kills its docker calls.
	if len(os.Args) == 2 && os.Args[1] == kind.HelperArg {
		os.Exit(kind.ServeHelper(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one marina command line and returns its exit status.
// The first SIGINT/SIGTERM cancels the command's context (running steps stop
// and report); a second one exits at once.
func run(args []string, stdin *os.File, stdout, stderr *os.File) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "marina: interrupted twice, exiting now")
			os.Exit(exitcode.Interrupted)
		case <-ctx.Done():
		}
	}()

	root := newRootCmd(&streams{in: stdin, out: stdout, err: stderr})
	root.SetArgs(args)
	code := report(root.ExecuteContext(ctx), stderr)
	if code == exitcode.OK && ctx.Err() != nil {
		code = exitcode.Interrupted
	}
	return code
}
