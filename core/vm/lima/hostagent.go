package lima

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// HostAgentArgs is a host agent invocation, as Lima's instance start writes
// it: `<program> [--debug] hostagent --pidfile P --socket S [--run-gui]
// [--guestagent G] [--nerdctl-archive N] [--progress] INSTANCE`.
type HostAgentArgs struct {
	Debug          bool
	PIDFile        string
	Socket         string
	RunGUI         bool
	GuestAgent     string
	NerdctlArchive string
	Progress       bool
	Instance       string
}

// IsHostAgentInvocation reports whether args (os.Args[1:]) is Lima asking
// this program to be a VM's host agent. marina-lima's main
// (limaengine.Main) checks it before anything else and hands such
// invocations to limaengine.RunHostAgent.
func IsHostAgentInvocation(args []string) bool {
	if len(args) > 0 && args[0] == "--debug" {
		args = args[1:]
	}
	return len(args) > 0 && args[0] == "hostagent"
}

// ParseHostAgentArgs parses a host agent invocation (os.Args[1:]).
func ParseHostAgentArgs(args []string) (HostAgentArgs, error) {
	var a HostAgentArgs
	if len(args) > 0 && args[0] == "--debug" {
		a.Debug, args = true, args[1:]
	}
	if len(args) == 0 || args[0] != "hostagent" {
		return a, errors.New("not a host agent invocation: expected `[--debug] hostagent ...`")
	}
	fs := flag.NewFlagSet("hostagent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.PIDFile, "pidfile", "", "write the PID to this file")
	fs.StringVar(&a.PIDFile, "p", "", "write the PID to this file")
	fs.StringVar(&a.Socket, "socket", "", "path of the host agent socket")
	fs.BoolVar(&a.RunGUI, "run-gui", false, "run the GUI in the host agent")
	fs.StringVar(&a.GuestAgent, "guestagent", "", "the guest agent binary")
	fs.StringVar(&a.NerdctlArchive, "nerdctl-archive", "", "the nerdctl archive")
	fs.BoolVar(&a.Progress, "progress", false, "show provisioning progress")
	if err := fs.Parse(args[1:]); err != nil {
		return a, fmt.Errorf("hostagent: %w", err)
	}
	if fs.NArg() != 1 {
		return a, fmt.Errorf("hostagent: want exactly one instance name, got %q", fs.Args())
	}
	a.Instance = fs.Arg(0)
	if a.Socket == "" {
		return a, errors.New("hostagent: --socket is required (Lima version mismatch?)")
	}
	return a, nil
}
