// Package lab is the core's pipelines for the lab as a whole: `marina up`
// (machine, Docker, bridge, host network, PostUp hooks, host changes the
// plugins request), `down`, `destroy` and `status`. Each pipeline is a list
// of lifecycle steps; the commands in cmd/marina only build a Lab and
// render what the steps report.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/sdk"
	sdkcontainer "github.com/bcollard/marina/sdk/container"
)

// HostApplier performs the host-side changes plugins request (a resolver
// file for the local zone, ...). The core owns privileges: an applier shows
// what it will change before it asks for them.
type HostApplier interface {
	// Plan returns what Apply would change for these requests (nothing
	// when everything is in place already).
	Plan(ctx context.Context, changes []sdk.HostChange, net NetworkFacts) ([]lifecycle.Change, error)
	// Apply makes the changes.
	Apply(ctx context.Context, changes []sdk.HostChange, net NetworkFacts) error
}

// NetworkFacts are what a host applier needs to know about the bridge.
type NetworkFacts struct {
	// Bridge is the bridge's host interface when the Docker host is this
	// machine (host driver), e.g. br-0123456789ab.
	Bridge string
	// GuestIP is the VM's address (lima driver), empty for the host driver.
	GuestIP string
	CIDR    string
}

// Lab is one marina lab: the config, the machine driver and the plugins.
type Lab struct {
	Config *config.Config
	Driver vm.Driver
	// Plugins runs the enabled plugins' hooks; nil means no plugins.
	Plugins *plugin.Dispatcher
	// Runtime holds the facts HookEnv needs beyond the config; DockerHost
	// and Driver are filled from the driver's status.
	Runtime Runtime
	// Host applies host changes; nil means they are reported, not made.
	Host HostApplier
	// Route, when set (lima driver), routes the bridge CIDR to the VM; the
	// guest's forwarding and no-SNAT rules are then ensured too.
	Route *hostnet.Route
	// KubeconfigDir holds the clusters' kubeconfig files (~/.kube/marina)
	// and Target is the user's kubeconfig: up keeps both pointed at the
	// VM's current address.
	KubeconfigDir string
	Target        *kubeconfig.Target
	// HostOS is hostnet.Darwin or hostnet.Linux (resolver checks); empty
	// skips them.
	HostOS string
	// RunID identifies this run in plugin logs.
	RunID string
	// StateDir is marina's state directory (~/.marina/state: slot
	// reservations, plugin state) and Home the user's home directory
	// (kubeconfig files under ~/.kube/marina), for cluster operations.
	StateDir string
	Home     string
	// KindHelper names a program that speaks marina's kind-helper protocol
	// (core/kind.ServeHelperWith) to run instead of marina's own kind
	// helper; "" runs kind's library in a child process of marina.
	KindHelper string
	// PlanPlugins makes the PostUp step's plan say, per plugin, whether
	// its recorded result would be reused or the plugin run (`up
	// --dry-run`); a real run does not pay for that look.
	PlanPlugins bool
	// CADir holds the lab's CA (~/.marina/ca); "" leaves the CA alone.
	CADir string
	// Trust checks the host's trust of the lab CA (doctor); nil skips it.
	Trust *hostnet.HostTrust
	// Getenv reads the environment marina runs in (the proxy's defaults);
	// nil is os.Getenv.
	Getenv func(string) string
	// AllowRouteOverlap lets up go on while a route of this machine
	// captures the bridge CIDR's traffic (up --allow-route-overlap).
	AllowRouteOverlap bool

	mu          sync.Mutex
	warnings    []string
	status      vm.Status
	hostChanges []sdk.HostChange
	netFacts    NetworkFacts
}

// getenv is Getenv, or os.Getenv.
func (l *Lab) getenv(k string) string {
	if l.Getenv != nil {
		return l.Getenv(k)
	}
	return os.Getenv(k)
}

// Bridge returns the bridge network's wanted shape.
func Bridge(cfg *config.Config) (docker.NetworkSpec, error) {
	cidr, err := netip.ParsePrefix(cfg.Network.BridgeCIDR)
	if err != nil {
		return docker.NetworkSpec{}, fmt.Errorf("network.bridgeCIDR %q: %w", cfg.Network.BridgeCIDR, err)
	}
	ipRange, err := slot.DockerIPRange(cidr)
	if err != nil {
		return docker.NetworkSpec{}, fmt.Errorf("network.bridgeCIDR: %w", err)
	}
	return docker.NetworkSpec{
		Name:    cfg.Network.Name,
		Subnet:  cidr,
		Gateway: Gateway(cidr),
		IPRange: ipRange,
		Labels:  map[string]string{"app.kubernetes.io/managed-by": "marina"},
	}, nil
}

// UpSteps returns the `marina up` pipeline.
func (l *Lab) UpSteps() []lifecycle.Step {
	steps := []lifecycle.Step{l.stepHostRoutes()}
	if l.CADir != "" {
		steps = append(steps, l.stepLabCA())
	}
	steps = append(steps, l.stepMachine(), l.stepNetwork())
	if l.Route != nil {
		steps = append(steps, l.stepGuestNetwork(), l.stepRoute(), l.stepFollowAddress())
	}
	return append(steps, l.stepPostUp(), l.stepHostChanges())
}

// Machine reads the machine's status and records it in the lab: every hook
// that runs after it, of any command, gets the machine's DockerHost and
// driver in its environment. It is the one place the lab reads its machine.
func (l *Lab) Machine(ctx context.Context) (vm.Status, error) {
	st, err := l.Driver.Status(ctx)
	if err != nil {
		return st, err
	}
	l.setStatus(st)
	return st, nil
}

func (l *Lab) setStatus(st vm.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status = st
}

func (l *Lab) dockerHost() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.DockerHost
}

// resizer is a machine driver that applies a changed size (vm.cpus,
// vm.memory, vm.disk) to an existing machine (lima): when it starts it, or
// at once by restarting it when told to.
type resizer interface {
	// PendingResize describes the change Start will apply ("cpus 4→6"),
	// "" when none; restart: Start restarts the running machine to apply
	// it. A change left for later is not pending (up reports it).
	PendingResize(ctx context.Context) (change string, restart bool, err error)
}

// stepMachine makes sure the machine runs and Docker answers, with the size
// the config asks for when the driver can change it.
func (l *Lab) stepMachine() lifecycle.Step {
	name := "Start VM"
	if l.Driver.Name() == "host" {
		name = "Check Docker engine"
	}
	return lifecycle.NewStep(name,
		func(ctx context.Context) ([]lifecycle.Change, error) {
			st, err := l.Machine(ctx)
			if err != nil {
				return nil, err
			}
			var resize string
			var restart bool
			if rs, ok := l.Driver.(resizer); ok && st.State != vm.Absent {
				if resize, restart, err = rs.PendingResize(ctx); err != nil {
					return nil, err
				}
			}
			switch {
			case resize != "" && restart:
				return []lifecycle.Change{{Action: "restart", Target: "VM " + st.Name, Detail: "to apply " + resize}}, nil
			case st.State == vm.Running:
				return nil, nil
			case l.Driver.Name() == "host":
				// Nothing to start: Start reports what to do.
				_, err := l.Driver.Start(ctx, nil)
				return nil, err
			case st.State == vm.Absent:
				return []lifecycle.Change{{Action: "create", Target: "VM " + st.Name, Detail: fmt.Sprintf("%d CPUs, %s memory, %s disk", l.Config.VM.CPUs, l.Config.VM.Memory, l.Config.VM.Disk)}}, nil
			case resize != "":
				return []lifecycle.Change{{Action: "resize", Target: "VM " + st.Name, Detail: resize}, {Action: "start", Target: "VM " + st.Name}}, nil
			default:
				return []lifecycle.Change{{Action: "start", Target: "VM " + st.Name}}, nil
			}
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			st, err := l.Driver.Start(ctx, r.Progress)
			if err != nil {
				return err
			}
			l.setStatus(st)
			return nil
		})
}

// withDocker calls fn with a client of the machine's Docker engine (known
// once the machine step ran).
func (l *Lab) withDocker(ctx context.Context, fn func(*docker.Client) error) error {
	host := l.dockerHost()
	if host == "" {
		return errors.New("the Docker endpoint is not known yet (the machine step did not run)")
	}
	c, err := docker.Open(ctx, host)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// stepNetwork makes sure the shared bridge exists with the right shape.
func (l *Lab) stepNetwork() lifecycle.Step {
	spec, specErr := Bridge(l.Config)
	return lifecycle.NewStep("Bridge network "+l.Config.Network.Name,
		func(ctx context.Context) ([]lifecycle.Change, error) {
			if specErr != nil {
				return nil, specErr
			}
			if l.dockerHost() == "" { // dry run before the machine exists
				return []lifecycle.Change{{Action: "create", Target: "network " + spec.Name, Detail: spec.Subnet.String()}}, nil
			}
			var changes []lifecycle.Change
			err := l.withDocker(ctx, func(c *docker.Client) error {
				st, err := c.InspectNetwork(ctx, spec.Name)
				if err != nil {
					return err
				}
				if st == nil {
					changes = []lifecycle.Change{{Action: "create", Target: "network " + spec.Name, Detail: fmt.Sprintf("%s, ip-range %s", spec.Subnet, spec.IPRange)}}
					return nil
				}
				l.setBridge(st.Bridge)
				if p := docker.NetworkProblem(st, spec); p != "" {
					changes = []lifecycle.Change{{Action: "recreate", Target: "network " + spec.Name, Detail: p}}
				}
				return nil
			})
			return changes, err
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return l.withDocker(ctx, func(c *docker.Client) error {
				if _, err := c.EnsureNetwork(ctx, spec); err != nil {
					return err
				}
				st, err := c.InspectNetwork(ctx, spec.Name)
				if err == nil && st != nil {
					l.setBridge(st.Bridge)
				}
				return err
			})
		})
}

func (l *Lab) setBridge(bridge string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.netFacts.Bridge = bridge
}

// Env returns the hook environment for the current machine status.
func (l *Lab) Env() (sdk.Env, error) {
	rt := l.Runtime
	l.mu.Lock()
	rt.DockerHost = l.status.DockerHost
	rt.Driver = l.Driver.Name()
	l.mu.Unlock()
	if rt.Getenv == nil {
		rt.Getenv = l.getenv
	}
	if rt.Home == "" {
		rt.Home = l.Home
	}
	if rt.CADir == "" {
		rt.CADir = l.CADir
	}
	return HookEnv(l.Config, rt)
}

// RunHook runs hook in every plugin that implements it, reporting plugin
// progress as "<plugin>: <message>".
func (l *Lab) RunHook(ctx context.Context, hook sdk.Hook, cluster *sdk.Cluster, r lifecycle.Reporter) (map[string]*sdk.Result, error) {
	return l.RunHookExcept(ctx, hook, cluster, nil, r)
}

// RunHookExcept is RunHook without the plugins named in exclude.
func (l *Lab) RunHookExcept(ctx context.Context, hook sdk.Hook, cluster *sdk.Cluster, exclude []string, r lifecycle.Reporter) (map[string]*sdk.Result, error) {
	if l.Plugins == nil {
		return nil, nil
	}
	env, err := l.Env()
	if err != nil {
		return nil, err
	}
	return l.Plugins.RunHookExcept(ctx, hook, sdk.HookCall{Env: env, Cluster: cluster, RunID: l.RunID}, exclude, func(p, msg string) {
		if r != nil {
			r.Progress(p + ": " + msg)
		}
	})
}

// stepPostUp runs every plugin's PostUp hook; hooks converge on their own,
// so the step always runs them (a plugin whose recorded result still holds
// is not started: plugin.SteadyCache). With PlanPlugins, its plan says
// which plugins would run and which results would be reused.
func (l *Lab) stepPostUp() lifecycle.Step {
	const name = "Plugins: PostUp"
	var plan func(context.Context) ([]lifecycle.Change, error)
	if l.PlanPlugins && l.Plugins != nil {
		plan = func(ctx context.Context) ([]lifecycle.Change, error) {
			env, err := l.Env()
			if err != nil {
				return nil, err
			}
			plans, err := l.Plugins.PlanHook(ctx, sdk.PostUp, sdk.HookCall{Env: env, RunID: l.RunID})
			if err != nil {
				return nil, err
			}
			changes := make([]lifecycle.Change, 0, len(plans))
			for _, p := range plans {
				c := lifecycle.Change{Action: lifecycle.ActionRun, Target: "plugin " + p.Plugin, Detail: p.Detail}
				if p.Replay {
					c.Action, c.Detail = lifecycle.ActionReuse, p.Detail+"; not started"
				}
				changes = append(changes, c)
			}
			return changes, nil
		}
	}
	return lifecycle.NewStep(name, plan,
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			results, err := l.RunHook(ctx, sdk.PostUp, nil, r)
			l.collect(results)
			return err
		})
}

// SteadyCache returns the PostUp record of the lab's plugins in dir (see
// plugin.SteadyCache), checked against the lab's Docker engine; refresh
// (up --reconcile) runs every hook and only records.
func (l *Lab) SteadyCache(dir string, refresh bool) *plugin.SteadyCache {
	return &plugin.SteadyCache{Dir: dir, Check: l.checkSteady, Refresh: refresh}
}

// checkSteady says why the containers a PostUp named no longer hold ("" when
// they all do): one container list of the lab's engine.
func (l *Lab) checkSteady(ctx context.Context, want []sdk.SteadyContainer) (string, error) {
	if len(want) == 0 {
		return "", nil
	}
	f := client.Filters{}
	for _, w := range want {
		if w.ID == "" {
			return "a container without an ID", nil
		}
		f = f.Add("id", w.ID)
	}
	var res client.ContainerListResult
	err := l.withDocker(ctx, func(c *docker.Client) (err error) {
		res, err = c.API().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("list containers: %w", err)
	}
	have := map[string]container.Summary{}
	for _, s := range res.Items {
		have[s.ID] = s
	}
	for _, w := range want {
		s, ok := have[w.ID]
		name := w.ID[:min(12, len(w.ID))]
		if ok && len(s.Names) > 0 {
			name = strings.TrimPrefix(s.Names[0], "/")
		}
		switch {
		case !ok:
			return "container " + name + " is gone", nil
		case s.State != container.StateRunning:
			return fmt.Sprintf("container %s is %s", name, s.State), nil
		case s.Labels[sdkcontainer.LabelSpec] != w.Spec:
			return "container " + name + " has another spec", nil
		}
	}
	return "", nil
}

// collect keeps the host changes hooks requested and the warnings they
// returned, in plugin-name order.
func (l *Lab) collect(results map[string]*sdk.Result) {
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		l.hostChanges = append(l.hostChanges, results[n].HostChanges...)
		// What a plugin warns of goes with the lab's own warnings, shown
		// after the pipeline with its detail (the fix).
		for _, d := range results[n].Warnings {
			w := n + ": " + d.Summary
			if d.Detail != "" {
				w += ". " + d.Detail
			}
			l.warnings = append(l.warnings, w)
		}
	}
}

// HostChanges returns the host changes plugins requested in this run.
func (l *Lab) HostChanges() []sdk.HostChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sdk.HostChange(nil), l.hostChanges...)
}

func (l *Lab) facts() NetworkFacts {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.netFacts
	f.GuestIP = l.status.GuestIP
	f.CIDR = l.Config.Network.BridgeCIDR
	return f
}

// stepHostChanges applies the host changes plugins requested through the
// HostApplier, which owns privileges. Without one the step changes nothing:
// ManualHostChanges tells the user what to do by hand.
func (l *Lab) stepHostChanges() lifecycle.Step {
	return lifecycle.NewStep("Host changes",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			changes := l.HostChanges()
			if len(changes) == 0 || l.Host == nil {
				return nil, nil
			}
			return l.Host.Plan(ctx, changes, l.facts())
		},
		func(ctx context.Context, r lifecycle.Reporter, planned []lifecycle.Change) error {
			if l.Host == nil {
				return nil // ManualHostChanges tells the user
			}
			return l.Host.Apply(ctx, l.HostChanges(), l.facts())
		})
}

// ManualHostChanges describes the requested host changes when the lab has
// no HostApplier (nothing was changed on the host).
func (l *Lab) ManualHostChanges() []lifecycle.Change {
	if l.Host != nil {
		return nil
	}
	var out []lifecycle.Change
	for _, c := range l.HostChanges() {
		out = append(out, describeHostChange(c))
	}
	return out
}

func describeHostChange(c sdk.HostChange) lifecycle.Change {
	if c.Resolver != nil {
		action := "set"
		if c.Resolver.Remove {
			action = "remove"
		}
		return lifecycle.Change{Action: action, Target: "resolver for " + c.Resolver.Domain, Detail: "nameserver " + strings.Join(c.Resolver.Nameservers, ", ")}
	}
	return lifecycle.Change{Action: "apply", Target: "host change", Detail: c.Reason}
}

// LabelComponent is the label plugins put on their service containers to
// say what they are (registry-mirror, dns-etcd, dns-server, ...).
const LabelComponent = "marina.dev/component"

// Component values of the built-in plugins' containers that the core
// checks (the plugins' READMEs list them).
const (
	ComponentMirror    = "registry-mirror"
	ComponentDNSServer = "localdns-server"
	ComponentDNSEtcd   = "localdns-etcd"
)

// Status inspects the lab without changing anything. Services are the
// marina containers attached to the lab's bridge network.
func (l *Lab) Status(ctx context.Context) (*Status, error) {
	st, err := l.Machine(ctx)
	if err != nil {
		return nil, err
	}
	out := &Status{Machine: st, Services: []ServiceStatus{}, Proxy: l.Config.EffectiveProxy(l.getenv).Redacted()}
	spec, err := Bridge(l.Config)
	if err != nil {
		return nil, err
	}
	out.Network = NetworkStatus{Name: spec.Name, Subnet: spec.Subnet.String()}
	if st.State != vm.Running {
		return out, nil
	}
	c, err := docker.Open(ctx, st.DockerHost)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ns, err := c.InspectNetwork(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	if ns != nil {
		out.Network.Present, out.Network.Bridge = true, ns.Bridge
		if ns.IPRange.IsValid() {
			out.Network.IPRange = ns.IPRange.String()
		}
		out.Network.Problem = docker.NetworkProblem(ns, spec)
	}
	services, err := c.Services(ctx)
	if err != nil {
		return nil, err
	}
	out.Route = l.routeCheck(ctx, st)
	out.Resolver = l.resolverCheck(ctx, out.Network.Bridge)
	for _, s := range services {
		if !slices.Contains(s.Networks, spec.Name) {
			continue // another lab's, or a test's
		}
		out.Services = append(out.Services, ServiceStatus{
			Name: s.Name, Component: s.Labels[LabelComponent], Image: s.Image,
			State: s.State, Running: s.Running, IP: s.IPs[spec.Name],
		})
	}
	return out, nil
}

// stepHook runs hook in every plugin that implements it and keeps the host
// changes they request.
func (l *Lab) stepHook(name string, hook sdk.Hook) lifecycle.Step {
	return lifecycle.NewStep(name, nil,
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			results, err := l.RunHook(ctx, hook, nil, r)
			l.collect(results)
			return err
		})
}

// machineRunning reads the machine's status; hooks of down and destroy
// only run when it is up.
func (l *Lab) machineRunning(ctx context.Context) (bool, error) {
	st, err := l.Machine(ctx)
	if err != nil {
		return false, err
	}
	return st.State == vm.Running, nil
}

// DownSteps returns the `marina down` pipeline: PreDown hooks, the route
// when removeRoute (lima), then stop the machine (keeping everything in it).
func (l *Lab) DownSteps(ctx context.Context, removeRoute bool) ([]lifecycle.Step, error) {
	running, err := l.machineRunning(ctx)
	if err != nil {
		return nil, err
	}
	var steps []lifecycle.Step
	if running {
		steps = append(steps, l.stepHook("Plugins: PreDown", sdk.PreDown))
	}
	stopName := "Stop VM"
	if l.Driver.Name() == "host" {
		stopName = "Stop machine (nothing to stop: the host driver does not own Docker)"
	}
	if removeRoute && l.Route != nil {
		steps = append(steps, l.stepRemoveRoute())
	}
	steps = append(steps, lifecycle.NewStep(stopName,
		func(ctx context.Context) ([]lifecycle.Change, error) {
			if !running || l.Driver.Name() == "host" {
				return nil, nil
			}
			return []lifecycle.Change{{Action: "stop", Target: "VM " + l.Config.VM.Name}}, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return l.Driver.Stop(ctx)
		}))
	return steps, nil
}

// DestroySteps returns the `marina destroy` pipeline: PreDestroy hooks
// (plugins remove their services and ask to undo their host changes), the
// host changes, the bridge network, then the machine itself.
func (l *Lab) DestroySteps(ctx context.Context) ([]lifecycle.Step, error) {
	running, err := l.machineRunning(ctx)
	if err != nil {
		return nil, err
	}
	var steps []lifecycle.Step
	if running {
		steps = append(steps, l.stepHook("Plugins: PreDestroy", sdk.PreDestroy), l.stepHostChanges(), l.stepRemoveNetwork())
	}
	if l.Route != nil {
		steps = append(steps, l.stepRemoveRoute())
	}
	steps = append(steps, lifecycle.NewStep("Delete machine",
		func(ctx context.Context) ([]lifecycle.Change, error) {
			if l.Driver.Name() == "host" {
				return nil, nil
			}
			st, err := l.Driver.Status(ctx)
			if err != nil || st.State == vm.Absent {
				return nil, err
			}
			return []lifecycle.Change{{Action: "delete", Target: "VM " + st.Name}}, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			return l.Driver.Delete(ctx)
		}))
	return steps, nil
}

// stepRemoveNetwork removes the bridge network once nothing uses it.
func (l *Lab) stepRemoveNetwork() lifecycle.Step {
	name := l.Config.Network.Name
	open := func(ctx context.Context) (*docker.Client, error) { return docker.Open(ctx, l.dockerHost()) }
	return lifecycle.NewStep("Remove network "+name,
		func(ctx context.Context) ([]lifecycle.Change, error) {
			c, err := open(ctx)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			st, err := c.InspectNetwork(ctx, name)
			if err != nil || st == nil {
				return nil, err
			}
			return []lifecycle.Change{{Action: "delete", Target: "network " + name}}, nil
		},
		func(ctx context.Context, r lifecycle.Reporter, _ []lifecycle.Change) error {
			c, err := open(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.InspectNetwork(ctx, name)
			if err != nil || st == nil {
				return err
			}
			if len(st.Containers) > 0 {
				return fmt.Errorf("network %s is still used by %s; remove them (clusters: marina cluster delete) and run marina destroy again", name, strings.Join(st.Containers, ", "))
			}
			return c.RemoveNetwork(ctx, name)
		})
}
