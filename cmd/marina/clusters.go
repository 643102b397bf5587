package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/vm"
)

// nodeFilesDir is where plugins' node files live on the Docker host (kept
// across reboots; not /tmp).
const nodeFilesDir = "/var/lib/marina/nodefiles"

// KindHelperEnv names a program that speaks marina's kind-helper protocol
// (core/kind.ServeHelperWith) to run instead of marina's own kind: the
// seam where marina's end-to-end tests put their stand-in for kind
// (test/standin), the one part that cannot run on a CI machine. Unset, marina
// runs kind's library in a child process of itself.
const KindHelperEnv = "MARINA_KIND_HELPER"

// clusters builds what cluster operations need for the running lab.
func (a *app) clusters(ctx context.Context, lb *lab.Lab, progress func(string)) (*lab.Clusters, error) {
	st, err := lb.Driver.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st.State != vm.Running {
		return nil, fmt.Errorf("the lab's machine is %s: run marina up first", st.State)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	dir, err := marinaDir()
	if err != nil {
		return nil, err
	}
	target := kubeconfig.DefaultTarget(home)
	c := &lab.Clusters{
		Provider: &kind.KindProvider{Executable: os.Getenv(KindHelperEnv), DockerHost: st.DockerHost, Network: lb.Config.Network.Name, Log: progress},
		Slots: func(ctx context.Context) (map[string]int, error) {
			dc, err := docker.Open(ctx, st.DockerHost)
			if err != nil {
				return nil, err
			}
			defer dc.Close()
			return dc.ClusterSlots(ctx, lb.Config.Network.Name)
		},
		BusyPorts: func(ctx context.Context) (map[int]string, error) {
			dc, err := docker.Open(ctx, st.DockerHost)
			if err != nil {
				return nil, err
			}
			defer dc.Close()
			return dc.APIPortHolders(ctx, lb.Config.Network.Name)
		},
		StateDir:     filepath.Join(dir, "state"),
		Home:         home,
		Target:       &target,
		NodeFilesDir: nodeFilesDir,
	}
	if lb.Driver.Name() == "lima" {
		c.APIServerAddress = st.GuestIP
	}
	return c, nil
}

// labClusters is the lab (read-only: no plugin is started) and what cluster
// operations need, for the commands that read or label clusters.
func (a *app) labClusters(ctx context.Context) (*lab.Lab, *lab.Clusters, error) {
	lb, err := a.statusLab()
	if err != nil {
		return nil, nil, err
	}
	c, err := a.clusters(ctx, lb, nil)
	if err != nil {
		return nil, nil, err
	}
	return lb, c, nil
}
