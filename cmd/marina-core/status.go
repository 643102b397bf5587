package main

import (
	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/cli"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/labstatus"
	"github.com/bcollard/marina/core/vm"
)

func newStatusCmd(a *app) *cobra.Command {
	return cli.NewStatusCmd(func(cmd *cobra.Command, output string) error {
		lb, err := a.statusLab()
		if err != nil {
			return err
		}
		st, err := lb.Status(cmd.Context())
		if err != nil {
			return err
		}
		v := labstatus.View{Status: st, Clusters: []lab.ClusterInfo{}}
		if st.Machine.State == vm.Running {
			if c, err := a.clusters(cmd.Context(), lb, nil); err == nil {
				if list, err := lb.ListClusters(cmd.Context(), c); err == nil {
					v.Clusters = list
				}
			}
		}
		if output != "text" {
			return cli.PrintStructured(a.out, output, v)
		}
		labstatus.Print(a.out, v)
		return nil
	})
}
