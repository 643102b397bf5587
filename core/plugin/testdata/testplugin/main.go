// Command testplugin is a marina plugin that misbehaves on request, for the
// real-process tests of package core/plugin.
//
// Identity and start-up behaviour come from flags (Describe has no config):
//
//	-name NAME -version V -deps "a,b?" (b optional) -hooks all|PostUp
//	-marker M (recorded in the process's args: the tests look for it)
//	-start stdout|exit|sleep (misbehave before sdk.Serve)
//	-wedge (after the plugin's server stops, block instead of exiting)
//	-touch FILE (append "NAME started" to FILE when the process starts)
//	-timeout D (declared default deadline of PostCluster)
//	-caps "docker,kubeconfig" (declared capabilities)
//
// What a hook does comes from the plugin's config (mode, see Config).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/bcollard/marina/sdk"
)

// Config chooses a hook's behaviour.
type Config struct {
	// Mode: ok, error, slow (honours ctx), hang (ignores ctx), panic, exit,
	// stdout (prints to stdout, then ok), child (spawns sleep 300, then
	// hangs), ignoreterm (ignores SIGTERM, then hangs).
	Mode string `json:"mode"`
	// Sleep is how long slow mode works.
	Sleep time.Duration `json:"sleep"`
	// ExitCode for exit mode.
	ExitCode int `json:"exitCode"`
	// Outputs are published as they are.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Replicas is only validated (>= 0), for config validation tests.
	Replicas int `json:"replicas"`
	// Touch is a file the hook appends "NAME HOOK" to, to prove it ran.
	Touch string `json:"touch,omitempty"`
	// FailOn makes only this hook fail (after touching), whatever Mode says.
	FailOn string `json:"failOn,omitempty"`
	// Steady is returned as the result's Steady (the containers are
	// made up: the host's check is the test's).
	Steady *sdk.Steady `json:"steady,omitempty"`
	// FailIfExists makes the hook fail while this file exists (a failure
	// that does not change the config).
	FailIfExists string `json:"failIfExists,omitempty"`
	// Report publishes what the hook was given that capabilities unlock
	// (outputs dockerHost, kubeconfig, mirrorPassword) and what its
	// process environment holds (envDocker, envKube).
	Report bool `json:"report,omitempty"`
	// Resolver, if set, is the domain of a resolver host change the hook
	// asks for.
	Resolver string `json:"resolver,omitempty"`
}

// Validate checks Replicas.
func (c *Config) Validate() []sdk.Diagnostic {
	if c.Replicas < 0 {
		return []sdk.Diagnostic{sdk.Errorf("replicas", "must be 0 or more, got %d", c.Replicas)}
	}
	return nil
}

var (
	name    = flag.String("name", "testplugin", "plugin name")
	version = flag.String("version", "1.0.0", "plugin version")
	deps    = flag.String("deps", "", "dependencies, comma-separated; suffix ? for optional")
	hooks   = flag.String("hooks", "all", "all or PostUp")
	marker  = flag.String("marker", "", "marker for the process table")
	start   = flag.String("start", "", "stdout, exit or sleep: misbehave before Serve")
	wedge   = flag.Bool("wedge", false, "never exit after the server stops")
	touch   = flag.String("touch", "", "file to append \"NAME started\" to when the process starts")
	timeout = flag.Duration("timeout", 0, "declared default deadline of PostCluster")
	caps    = flag.String("caps", "", "declared capabilities, comma-separated")
)

type base struct{}

func (base) Info() sdk.Info {
	info := sdk.Info{Name: *name, Version: *version, Description: "test plugin", Config: &Config{Mode: "ok"}, Outputs: []string{"chain", "stateDir", "start", "end", "dockerHost", "kubeconfig", "mirrorPassword", "envDocker", "envKube"}}
	if *caps != "" {
		info.Capabilities = strings.Split(*caps, ",")
	}
	for _, d := range strings.Split(*deps, ",") {
		if d == "" {
			continue
		}
		opt := strings.HasSuffix(d, "?")
		info.Dependencies = append(info.Dependencies, sdk.Dependency{Name: strings.TrimSuffix(d, "?"), Optional: opt})
	}
	if *timeout > 0 && *hooks == "all" {
		info.Timeouts = map[sdk.Hook]time.Duration{sdk.PostCluster: *timeout}
	}
	return info
}

// postUpOnly implements PostUp only.
type postUpOnly struct{ base }

func (postUpOnly) PostUp(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return run(ctx, req)
}

// all implements every hook.
type all struct{ postUpOnly }

func (all) PreCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return run(ctx, req)
}
func (all) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return run(ctx, req)
}
func (all) PreClusterDelete(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return run(ctx, req)
}
func (all) PreDown(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return run(ctx, req)
}
func (all) PreDestroy(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	return run(ctx, req)
}

func run(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	log := req.Logger()
	started := time.Now()
	if cfg.Touch != "" {
		appendLine(cfg.Touch, *name+" "+string(req.Hook))
	}
	if cfg.FailIfExists != "" {
		if _, err := os.Stat(cfg.FailIfExists); err == nil {
			return nil, errors.New("failing while " + cfg.FailIfExists + " exists")
		}
	}
	if cfg.FailOn == string(req.Hook) {
		return nil, errors.New("failing " + cfg.FailOn + " on purpose")
	}
	log.Debug("debug-line " + *marker)
	log.Info("hook started", "mode", cfg.Mode, "marker", *marker)
	req.Progress("working on %s", req.Hook)
	switch cfg.Mode {
	case "ok":
	case "error":
		return nil, errors.New("the thing is broken " + *marker)
	case "slow":
		select {
		case <-time.After(cfg.Sleep):
		case <-ctx.Done():
			log.Info("cancelled, cleaning up")
			return nil, ctx.Err()
		}
	case "hang":
		log.Info("hanging, ignoring ctx")
		select {}
	case "panic":
		panic("boom " + *marker)
	case "exit":
		log.Error("exiting with code " + strconv.Itoa(cfg.ExitCode))
		os.Exit(cfg.ExitCode)
	case "stdout":
		fmt.Println("hello on stdout " + *marker)
	case "child":
		cmd := exec.Command("sh", "-c", "sleep 300; echo "+*marker, "child-"+*marker)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		log.Info("spawned child", "pid", cmd.Process.Pid)
		select {}
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
		log.Info("ignoring SIGTERM and hanging")
		select {}
	default:
		return nil, fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	outputs := map[string]string{}
	for k, v := range cfg.Outputs {
		outputs[k] = v
	}
	// chain proves ordering: the dependencies' chains, then this plugin.
	var chain []string
	for _, d := range req.Deps {
		if c := d["chain"]; c != "" {
			chain = append(chain, c)
		}
	}
	chain = append(chain, *name)
	outputs["chain"] = strings.Join(chain, ",")
	outputs["stateDir"] = req.Env.StateDir
	outputs["start"] = strconv.FormatInt(started.UnixNano(), 10)
	outputs["end"] = strconv.FormatInt(time.Now().UnixNano(), 10)
	res := &sdk.Result{Outputs: outputs, Steady: cfg.Steady}
	if cfg.Report {
		outputs["dockerHost"] = req.Env.DockerHost
		for _, m := range req.Env.Mirrors {
			outputs["mirrorPassword"] += m.Password
		}
		if req.Cluster != nil {
			outputs["kubeconfig"] = string(req.Cluster.Kubeconfig) + req.Cluster.KubeconfigPath
		}
		outputs["envDocker"] = os.Getenv("DOCKER_HOST")
		outputs["envKube"] = os.Getenv("KUBECONFIG")
	}
	if cfg.Resolver != "" {
		res.HostChanges = []sdk.HostChange{{Resolver: &sdk.ResolverChange{Domain: cfg.Resolver, Nameservers: []string{"172.30.255.53"}}, Reason: "test"}}
	}
	return res, nil
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func main() {
	flag.Parse()
	if *touch != "" {
		appendLine(*touch, *name+" started")
	}
	var p sdk.Plugin = all{}
	if *hooks == "PostUp" {
		p = postUpOnly{}
	}
	switch *start {
	case "stdout":
		fmt.Println("hello before the handshake " + *marker)
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot initialise: missing thing "+*marker)
		os.Exit(4)
	case "sleep":
		fmt.Fprintln(os.Stderr, "sleeping before Serve")
		time.Sleep(time.Hour)
	}
	if !*wedge {
		sdk.Serve(p)
		return
	}
	// A plugin whose process does not end when its server stops: only
	// signals can end it (and ignoreterm mode ignores SIGTERM).
	srv, err := sdk.NewServer(p, sdk.NewLogger(os.Stderr, slog.LevelDebug))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{sdk.ProtocolMajor: {sdk.PluginName: &sdk.GRPCPlugin{Impl: srv}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
	})
	fmt.Fprintln(os.Stderr, "server stopped; wedged")
	select {}
}
