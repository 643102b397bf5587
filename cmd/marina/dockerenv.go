package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/dockercontext"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/vm"
)

// labDockerHost returns the lab's Docker endpoint (the machine must run).
func (a *app) labDockerHost(cmd *cobra.Command) (string, string, error) {
	lb, _, _, err := a.openLab(cmd.Context(), readOnly)
	if err != nil {
		return "", "", err
	}
	st, err := lb.Machine(cmd.Context())
	if err != nil {
		return "", "", err
	}
	if st.State != vm.Running || st.DockerHost == "" {
		return "", "", fmt.Errorf("the lab's machine is %s: run marina up", st.State)
	}
	return st.DockerHost, lb.Config.VM.Name, nil
}

func newDockerEnvCmd(a *app) *cobra.Command {
	var unset bool
	cmd := &cobra.Command{
		Use:     "docker-env",
		GroupID: "lab",
		Short:   "Print the shell commands that point the docker CLI at the lab: eval $(marina docker-env)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if unset {
				fmt.Fprintln(a.out, "unset DOCKER_HOST")
				fmt.Fprintln(a.out, "unset DOCKER_TLS_VERIFY")
				return nil
			}
			host, _, err := a.labDockerHost(cmd)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "export DOCKER_HOST=%s\n", shellQuote(host))
			fmt.Fprintln(a.out, "# Run this command to configure your shell:")
			fmt.Fprintln(a.out, "# eval \"$(marina docker-env)\"")
			return nil
		},
	}
	cmd.Flags().BoolVar(&unset, "unset", false, "print the commands that undo it")
	return cmd
}

func newDockerContextCmd(a *app) *cobra.Command {
	var unset bool
	cmd := &cobra.Command{
		Use:     "docker-context",
		GroupID: "lab",
		Short:   "Create (or update) a docker CLI context named after the VM and make it current",
		Long: `Create or update the docker CLI context named vm.name (default marina), pointing at the
lab's Docker endpoint, and make it the current context. It writes the docker CLI's own
context store (~/.docker, or $DOCKER_CONFIG) directly: the docker CLI need not be
installed. --unset switches back to the default context (the marina context is kept).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := dockercontext.Default()
			if err != nil {
				return err
			}
			if unset {
				if err := store.Use("default"); err != nil {
					return err
				}
				fmt.Fprintln(a.out, "docker context: default")
				return nil
			}
			host, name, err := a.labDockerHost(cmd)
			if err != nil {
				return err
			}
			changed, err := store.Ensure(name, host, "marina lab "+name)
			if err != nil {
				return err
			}
			if err := store.Use(name); err != nil {
				return err
			}
			verb := "unchanged"
			if changed {
				verb = "written"
			}
			fmt.Fprintf(a.out, "docker context %s (%s): %s, now current\n", name, host, verb)
			return nil
		},
	}
	cmd.Flags().BoolVar(&unset, "unset", false, "switch the docker CLI back to the default context")
	return cmd
}

func newShellCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "shell [-- COMMAND [ARG...]]",
		Aliases: []string{"ssh"},
		GroupID: "lab",
		Short:   "An interactive shell on the machine that runs Docker (the VM), or a command after --",
		RunE: func(cmd *cobra.Command, args []string) error {
			lb, _, _, err := a.openLab(cmd.Context(), readOnly)
			if err != nil {
				return err
			}
			return lb.Driver.Shell(cmd.Context(), args, a.in, a.out, a.err)
		},
	}
}

// shellQuote quotes s for POSIX shells (for lines users paste).
func shellQuote(s string) string { return hostnet.Quote(s) }
