// Command treehost is a marina stand-in for the process-lifetime tests of
// core/plugin: it starts testdata/treeplugin through core/plugin, runs its
// PostCluster hook, prints "ready" once the hook's process tree is up, and
// waits to be killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/sdk"
)

func main() {
	bin := flag.String("plugin", "", "treeplugin binary")
	marker := flag.String("marker", "", "marker for the process table")
	dir := flag.String("dir", "", "directory for the tree's pid files")
	runDir := flag.String("rundir", "", "marina's run directory")
	raw := flag.Bool("raw", false, "run the plugin without the SDK's lifetime handling")
	flag.Parse()
	args := []string{"-marker", *marker, "-dir", *dir}
	if *raw {
		args = append(args, "-raw")
	}
	ctx := context.Background()
	inst, err := plugin.Start(ctx, plugin.Spec{Name: "tree", Path: *bin, Args: args},
		plugin.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), RunDir: *runDir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("pid", inst.Pid())
	call := sdk.HookCall{Hook: sdk.PostCluster, Cluster: &sdk.Cluster{Name: "dev", Slot: 1}, RunID: "run-1"}
	_, err = inst.RunHook(ctx, call, 10*time.Minute, func(msg string) {
		if strings.Contains(msg, "spawned") {
			fmt.Println("ready")
		}
	})
	fmt.Println("error:", err)
	os.Exit(1)
}
