// Command treeplugin is a marina plugin whose PostCluster hook leaves a
// process tree behind, for the process-lifetime tests of core/plugin and
// sdk/plugintest. Every process of the tree is this binary in another role
// (so each carries -marker in its arguments) except one `sleep 300`; each
// writes its pid to <dir>/<role>-<pid>.
//
// The hook starts:
//
//	child     stays, and starts `sleep 300` and a setsid(2) grandchild (leaf);
//	daemon    starts a setsid(2) grandchild (leaf) and exits at once (the
//	          classic daemon double fork: the grandchild is orphaned).
//
// Once the 5 pid files exist it reports the progress "spawned", then
// waits for its context to end (or returns at once with mode=return).
//
// With -raw the plugin is served by go-plugin directly, without the SDK's
// lifetime handling: nothing kills its descendants but marina.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/bcollard/marina/sdk"
)

var (
	role   = flag.String("role", "plugin", "plugin, child, daemon or leaf")
	marker = flag.String("marker", "", "marker for the process table")
	dir    = flag.String("dir", "", "directory for the pid files")
	raw    = flag.Bool("raw", false, "serve without the SDK's lifetime handling")
	mode   = flag.String("mode", "wait", "wait (for the hook's context) or return")
)

type tree struct{}

func (tree) Info() sdk.Info {
	return sdk.Info{Name: "tree", Version: "1.0.0", Description: "leaves a process tree behind"}
}

func (tree) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	for _, r := range []string{"child", "daemon"} {
		if err := spawn(r, false); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(*dir, "*-*"))
		if len(files) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the tree did not start within 20s: %v", files)
		}
		time.Sleep(10 * time.Millisecond)
	}
	req.Progress("spawned")
	if *mode == "return" {
		return &sdk.Result{}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// spawn starts this binary in role r, in a new session when setsid.
func spawn(r string, setsid bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-role", r, "-marker", *marker, "-dir", *dir)
	cmd.Stderr = os.Stderr
	if setsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	return cmd.Start()
}

func record(r string, pid int) {
	_ = os.WriteFile(filepath.Join(*dir, r+"-"+strconv.Itoa(pid)), nil, 0o644)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, *role+":", err)
	os.Exit(1)
}

func main() {
	flag.Parse()
	switch *role {
	case "child":
		sleep := exec.Command("sleep", "300")
		if err := sleep.Start(); err != nil {
			fail(err)
		}
		record("sleep", sleep.Process.Pid)
		if err := spawn("leaf", true); err != nil {
			fail(err)
		}
		record("child", os.Getpid())
		time.Sleep(time.Hour)
		return
	case "daemon":
		if err := spawn("leaf", true); err != nil {
			fail(err)
		}
		record("daemon", os.Getpid())
		return
	case "leaf":
		record("leaf", os.Getpid())
		time.Sleep(time.Hour)
		return
	}
	if !*raw {
		sdk.Serve(tree{})
		return
	}
	srv, err := sdk.NewServer(tree{}, sdk.NewLogger(os.Stderr, slog.LevelDebug))
	if err != nil {
		fail(err)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{sdk.ProtocolMajor: {sdk.PluginName: &sdk.GRPCPlugin{Impl: srv}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
	})
	os.Exit(0)
}
