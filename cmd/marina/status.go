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
	"github.com/bcollard/marina/core/vm/statuscache"
)

// newStatusCmd is `marina status` for a lab whose machine certainly does
// not run: the lima driver's VM was never created (its instance directory
// does not exist) or is stopped exactly as marina-core last found it
// (core/vm/statuscache: nothing in its instance directory, Lima's config,
// marina's config or build changed since), or no Docker engine can be
// listening at the host driver's endpoint (dockerprobe). Every other lab
// is marina-core's (only Lima's own reader knows a VM's state).
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
			limaHome := vm.LimaHome(home)
			instDir := filepath.Join(limaHome, cfg.VM.Name)
			_, err = os.Lstat(instDir)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				m.State = vm.Absent
			case err != nil:
				return cli.ErrHandOver
			default:
				// A created VM: marina-core's last answer, if it found the
				// VM stopped in the very files there are now.
				fp, err := statuscache.FingerprintVM(limaHome, cfg.VM.Name)
				if err != nil {
					return cli.ErrHandOver
				}
				st, ok := statuscache.Lookup(statuscache.Path(home, cfg.VM.Name), cfg, fp)
				if !ok {
					return cli.ErrHandOver
				}
				m = st
			}
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
