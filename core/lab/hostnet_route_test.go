package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/hostnet"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/hostvm"
)

// macRoutes is macOS's routing table for the bridge CIDR as route(8)
// shows and changes it (through sudo): the only faked part.
type macRoutes struct {
	mu    sync.Mutex
	gw    string
	argvs []string
}

func (m *macRoutes) Run(_ context.Context, argv []string, _ []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := hostnet.QuoteArgv(argv)
	m.argvs = append(m.argvs, s)
	fail := func(msg string) ([]byte, error) {
		return nil, &hostnet.CommandError{Argv: argv, Stderr: msg, Err: errors.New("exit status 1")}
	}
	switch {
	case s == "/sbin/route -n get -net 172.30.0.0/16":
		if m.gw == "" {
			return fail("route: writing to routing socket: not in table")
		}
		return fmt.Appendf(nil, "destination: 172.30.0.0\n       mask: 255.255.0.0\n    gateway: %s\n  interface: bridge100\n", m.gw), nil
	case s == "sudo -- /sbin/route -n delete -net 172.30.0.0/16" && m.gw != "":
		m.gw = ""
		return nil, nil
	case strings.HasPrefix(s, "sudo -- /sbin/route -n add -net 172.30.0.0/16 ") && m.gw == "":
		m.gw = argv[len(argv)-1]
		return nil, nil
	}
	return fail("unexpected " + s)
}

func (m *macRoutes) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.argvs
	m.argvs = nil
	return a
}

// keeper is a driver whose host agent keeps the route (the lima driver's
// KeepRoute/ForgetRoute), recording what it was told.
type keeper struct {
	*hostvm.Host
	cidr string
	told []string
}

func (k *keeper) KeepingRoute(cidr string) bool { return k.cidr == cidr }
func (k *keeper) KeepRoute(cidr, hostOS string) error {
	k.cidr = cidr
	k.told = append(k.told, "keep "+cidr+" "+hostOS)
	return nil
}
func (k *keeper) ForgetRoute() error {
	k.cidr = ""
	k.told = append(k.told, "forget")
	return nil
}

func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kind-dev"] = &clientcmdapi.Cluster{Server: server, TLSServerName: "kubernetes"}
	cfg.AuthInfos["kind-dev"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["kind-dev"] = &clientcmdapi.Context{Cluster: "kind-dev", AuthInfo: "kind-dev"}
	cfg.CurrentContext = "kind-dev"
	if err := kubeconfig.WriteCluster(path, cfg); err != nil {
		t.Fatal(err)
	}
}

func kubeServer(t *testing.T, path string) string {
	t.Helper()
	cfg, err := kubeconfig.ReadCluster(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Clusters["kind-dev"].Server
}

// TestUpFollowsAChangedAddress: the VM came back at a new lima0 address
// (sleep/wake, another network). marina up's route step moves the route
// (exactly the delete and the add, through sudo, shown first), the
// kubeconfigs follow, and the host agent is asked to keep the route from
// then on; a second up changes nothing. down --remove-route tells the agent
// to stop before it removes the route.
func TestUpFollowsAChangedAddress(t *testing.T) {
	routes := &macRoutes{gw: "192.168.64.3"}
	shown := new(strings.Builder)
	drv := &keeper{Host: &hostvm.Host{}}
	dir := t.TempDir()
	kc := filepath.Join(dir, "dev.kubeconfig")
	writeKubeconfig(t, kc, "https://192.168.64.3:7001")
	l := &Lab{
		Config:        config.Default(),
		Driver:        drv,
		Route:         &hostnet.Route{OS: hostnet.Darwin, CIDR: "172.30.0.0/16", Priv: &hostnet.Privileged{Runner: routes, Interactive: true, Out: shown}},
		KubeconfigDir: dir,
	}
	l.setStatus(vm.Status{State: vm.Running, DockerHost: "unix:///tmp/docker.sock", GuestIP: "192.168.64.9"})
	up := []lifecycle.Step{l.stepRoute(), l.stepFollowAddress()}

	rep, err := lifecycle.Run(context.Background(), "up", up, lifecycle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/sbin/route -n get -net 172.30.0.0/16", // plan
		"/sbin/route -n get -net 172.30.0.0/16", // Ensure plans again
		"sudo -- /sbin/route -n delete -net 172.30.0.0/16",
		"sudo -- /sbin/route -n add -net 172.30.0.0/16 192.168.64.9",
	}
	if got := routes.take(); !slices.Equal(got, want) {
		t.Fatalf("up ran\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if !strings.Contains(shown.String(), "sudo /sbin/route -n add -net 172.30.0.0/16 192.168.64.9") {
		t.Errorf("the route commands were not shown:\n%s", shown)
	}
	if got := kubeServer(t, kc); got != "https://192.168.64.9:7001" {
		t.Errorf("kubeconfig server %s, want the new address", got)
	}
	if !slices.Equal(drv.told, []string{"keep 172.30.0.0/16 darwin"}) {
		t.Errorf("host agent told %q", drv.told)
	}
	for _, s := range rep.Steps {
		if s.Status != lifecycle.StatusDone {
			t.Errorf("step %s: %s", s.Name, s.Status)
		}
	}

	// Converged: lookups only.
	rep, err = lifecycle.Run(context.Background(), "up", []lifecycle.Step{l.stepRoute(), l.stepFollowAddress()}, lifecycle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := routes.take(); !slices.Equal(got, want[:1]) {
		t.Errorf("second up ran %q", got)
	}
	for _, s := range rep.Steps {
		if s.Status != lifecycle.StatusUnchanged {
			t.Errorf("second up: step %s: %s", s.Name, s.Status)
		}
	}

	// down --remove-route: the agent first, then the route.
	if _, err := lifecycle.Run(context.Background(), "down", []lifecycle.Step{l.stepRemoveRoute()}, lifecycle.Options{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(drv.told, []string{"keep 172.30.0.0/16 darwin", "forget"}) || routes.gw != "" {
		t.Errorf("down: told %q, route via %q", drv.told, routes.gw)
	}
}
