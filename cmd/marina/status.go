package main

import (
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/cli"
	"github.com/bcollard/marina/core/dockerprobe"
	"github.com/bcollard/marina/core/labstatus"
	"github.com/bcollard/marina/core/vm"
)

// newStatusCmd is `marina status` for a lab whose machine certainly does
// not run: the lima driver's VM was never created (its instance directory
// does not exist), or no Docker engine can be listening at the host
// driver's endpoint (dockerprobe). Every other lab, a created VM included
// (only Lima's own reader knows its state), is marina-core's.
func newStatusCmd(out, errw io.Writer, g *cli.Global) *cobra.Command {
	return cli.NewStatusCmd(func(_ *cobra.Command, output string) error {
		l, err := cli.LoadConfig(g, errw)
		if err != nil {
			return err
		}
		cfg := l.Config
		driver, err := vm.Resolve(cfg.VM.Driver)
		if err != nil {
			return cli.ErrHandOver
		}
		m := vm.Status{Driver: driver, Name: cfg.VM.Name}
		switch driver {
		case "host":
			m.DockerHost, m.Arch, m.CPUs = dockerprobe.DefaultHost(), runtime.GOARCH, runtime.NumCPU()
			absent := dockerprobe.Absent(m.DockerHost)
			if absent == nil {
				return cli.ErrHandOver
			}
			m.State, m.Detail = vm.Stopped, absent.Error()
		case "lima":
			home, err := os.UserHomeDir()
			if err != nil {
				return cli.ErrHandOver
			}
			if _, err := os.Lstat(filepath.Join(vm.LimaHome(home), cfg.VM.Name)); !errors.Is(err, fs.ErrNotExist) {
				return cli.ErrHandOver
			}
			m.State = vm.Absent
		default:
			return cli.ErrHandOver
		}
		// The bridge's subnet, as marina-core's lab.Bridge reads it: the
		// config loaded, so network.bridgeCIDR is an IPv4 /16 already.
		cidr, err := netip.ParsePrefix(cfg.Network.BridgeCIDR)
		if err != nil {
			return cli.ErrHandOver
		}
		v := labstatus.View{
			Status: &labstatus.Status{
				Machine:  m,
				Network:  labstatus.NetworkStatus{Name: cfg.Network.Name, Subnet: cidr.String()},
				Services: []labstatus.ServiceStatus{},
			},
			Clusters: []labstatus.ClusterInfo{},
		}
		if output != "text" {
			return cli.PrintStructured(out, output, v)
		}
		labstatus.Print(out, v)
		return nil
	})
}
