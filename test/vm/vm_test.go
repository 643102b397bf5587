// Package vm is marina's on-demand VM tier (`make test-vm`): a real Lima VM
// (vmType qemu, under TCG here) driven by marina's own lima driver
// (core/vm/lima), booted from a Debian image built offline (image.sh).
//
// It runs only with MARINA_TEST_VM=1 (run.sh sets it, with the paths of what
// it built); then anything missing fails the test instead of skipping it.
package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/limavm"
)

const (
	vmName = "vmtest"
	// bridge is the `kind` network's subnet in the test's VM (not marina's
	// default, which a lab of this machine may use).
	bridge = "172.27.0.0/16"
	// bootTimeout bounds one boot under TCG (measured: ~7 min first, ~4 min after).
	bootTimeout = 25 * time.Minute
	// lima0's network: run.sh gives the tap device lima0Host/24 and leases
	// lima0Guest (only) with dnsmasq, without a router or DNS server
	// (lima0relay relays it to the socket Lima connects qemu to).
	lima0Host  = "192.168.106.1"
	lima0Guest = "192.168.106.2"
)

// env is what run.sh hands the test.
type env struct {
	image, imageSHA256, guestAgent, marina, qemu string
	// lima0Sock is lima0's socket network (run.sh: test/vm/lima0relay
	// relays it to a tap device with lima0Host on it and dnsmasq leasing
	// lima0Guest); images is a `docker save` of the local DNS images,
	// loaded into the VM's Docker before `marina up`.
	lima0Sock, images string
	cpus              int
}

func requireEnv(t *testing.T) env {
	t.Helper()
	if os.Getenv("MARINA_TEST_VM") != "1" {
		t.Skip("the VM tier runs with MARINA_TEST_VM=1: `make test-vm` (as root; see test/README.md)")
	}
	var problems []string
	get := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			problems = append(problems, k+" is not set")
		}
		return v
	}
	e := env{
		image:       get("MARINA_TEST_VM_IMAGE"),
		imageSHA256: get("MARINA_TEST_VM_IMAGE_SHA256"),
		guestAgent:  get("MARINA_TEST_VM_GUESTAGENT"),
		marina:      get("MARINA_TEST_VM_MARINA"),
		lima0Sock:   get("MARINA_TEST_VM_LIMA0_SOCKET"),
		images:      get("MARINA_TEST_VM_IMAGES"),
		qemu:        os.Getenv("QEMU_SYSTEM_X86_64"),
		cpus:        2,
	}
	if s := os.Getenv("MARINA_TEST_VM_CPUS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			problems = append(problems, "MARINA_TEST_VM_CPUS="+s+" is not a CPU count")
		}
		e.cpus = n
	}
	for _, p := range []string{e.image, e.guestAgent, e.marina, e.images, e.lima0Sock} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			problems = append(problems, err.Error())
		}
	}
	qemu := e.qemu
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	if _, err := exec.LookPath(qemu); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v (apt-get install qemu-system-x86)", qemu, err))
	}
	if os.Geteuid() == 0 {
		problems = append(problems, "running as root: Lima refuses it; run.sh runs the test as a user of its own")
	}
	if len(problems) > 0 {
		t.Fatalf("MARINA_TEST_VM=1 but the VM tier cannot run (`make test-vm` sets it up):\n  %s", strings.Join(problems, "\n  "))
	}
	return e
}

// timing is one step's duration, for the summary.
type timing struct {
	name string
	d    time.Duration
	ok   bool
}

type run struct {
	t       *testing.T
	timings []timing
}

// step runs fn as one timed step; a failure ends the test (every step needs
// the ones before it).
func (r *run) step(name string, fn func() error) {
	r.t.Helper()
	fmt.Printf("=== step: %s\n", name)
	start := time.Now()
	err := fn()
	d := time.Since(start).Round(100 * time.Millisecond)
	r.timings = append(r.timings, timing{name, d, err == nil})
	if err != nil {
		r.t.Fatalf("step %q failed after %s: %v", name, d, err)
	}
	fmt.Printf("--- step ok: %s (%s)\n", name, d)
}

func (r *run) summary() {
	fmt.Println("\n== test-vm: step timings")
	var total time.Duration
	for _, s := range r.timings {
		mark := "ok  "
		if !s.ok {
			mark = "FAIL"
		}
		fmt.Printf("  %s %-62s %8s\n", mark, s.name, s.d)
		total += s.d
	}
	fmt.Printf("  total %s\n", total)
}

// newDriver is marina's lima driver for the test's VM, in home.
func newDriver(e env, home string) *limavm.Driver {
	cfg := config.Default()
	cfg.VM.Driver = "lima"
	cfg.VM.Name = vmName
	cfg.VM.CPUs = e.cpus
	cfg.VM.Memory = "2GiB"
	cfg.VM.Disk = "12GiB"
	cfg.VM.StartTimeout = bootTimeout
	// No host directory shared: Lima's qemu would need 9p for it, and the
	// test needs no registry cache.
	cfg.Registries.CacheStorage = "guest"
	cfg.Network.BridgeCIDR = bridge

	d := limavm.New(cfg, home)
	// marina-lima, built beside marina by run.sh: the engine that boots
	// the VM and runs its host agent.
	d.Executable = filepath.Join(filepath.Dir(e.marina), limavm.EngineName)
	d.GuestAgent = e.guestAgent
	d.Images = []limavm.Image{{Arch: "amd64", Location: e.image, Digest: "sha256:" + e.imageSHA256}}
	// The image has Docker, curl, iptables and ca-certificates: nothing to
	// install, nothing to download (kind and kubectl are not in it, so the
	// provisioning installs no tools and the probe waits for Docker only).
	prov := limavm.DefaultProvision()
	prov.Binaries = nil
	d.Provision = &prov
	// lima0: a socket network the test serves (lima0_test.go).
	d.Networks = []limavm.Network{{Socket: e.lima0Sock}}
	return d
}

// TestStartHelper is `marina up`'s part of step 1, in a process of its own
// that the test interrupts with SIGINT (Ctrl-C): Start under a context that
// SIGINT cancels, its error printed. It runs only when TestVM starts it.
func TestStartHelper(t *testing.T) {
	if os.Getenv("MARINA_TEST_VM_HELPER") != "start" {
		t.Skip("started by TestVM only")
	}
	e := requireEnv(t)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d := newDriver(e, os.Getenv("HOME"))
	_, err := d.Start(ctx, func(s string) { fmt.Printf("    lima: %s\n", s) })
	fmt.Printf("START-RESULT: %v\n", err)
}

func TestVM(t *testing.T) {
	e := requireEnv(t)
	r := &run{t: t}
	t.Cleanup(r.summary)

	home := t.TempDir()
	if err := os.Setenv("HOME", home); err != nil {
		t.Fatal(err)
	}
	d := newDriver(e, home)
	instDir := filepath.Join(vm.LimaHome(home), vmName)

	progress := func(s string) { fmt.Printf("    lima: %s\n", s) }
	t.Cleanup(func() {
		// The VM's logs outlive it (run.sh keeps them in the cache).
		if dir := os.Getenv("MARINA_TEST_VM_LOGS"); dir != "" {
			saveLogs(t, instDir, dir)
		}
		// Whatever a failed step left: the VM and its processes go.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := d.Delete(ctx); err != nil {
			t.Errorf("cleanup: delete the VM: %v", err)
		}
	})

	// 1. Create, and interrupt the start once the host agent runs: Ctrl-C
	// (SIGINT) to a process running Start, as in `marina up`. The wait
	// stops, the VM does not (the host agent outlives that process).
	var agentPID, qemuPID int
	r.step("create + start, Ctrl-C (SIGINT) once the host agent runs", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
		defer cancel()
		var out strings.Builder
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStartHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MARINA_TEST_VM_HELPER=start")
		cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stdout, &out), os.Stderr
		cmd.WaitDelay = 10 * time.Second
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if _, err := waitFile(ctx, filepath.Join(instDir, "ha.pid"), bootTimeout); err != nil {
			return err
		}
		select {
		case err := <-done:
			return fmt.Errorf("the start ended before the interrupt (%v):\n%s", err, out.String())
		case <-time.After(10 * time.Second):
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return err
		}
		if err := <-done; err != nil {
			return fmt.Errorf("the interrupted start's process: %v", err)
		}
		res := out.String()
		if !strings.Contains(res, "START-RESULT: "+limavm.ErrStartInterrupted.Error()) || !strings.Contains(res, context.Canceled.Error()) ||
			!strings.Contains(res, "keeps booting") {
			return fmt.Errorf("the interrupted Start did not say that it stopped waiting and the VM keeps booting:\n%s", res)
		}
		var err error
		if agentPID, err = readPID(filepath.Join(instDir, "ha.pid")); err != nil {
			return err
		}
		if !alive(agentPID) {
			return fmt.Errorf("the host agent (pid %d) died with the interrupted start", agentPID)
		}
		return nil
	})

	// 2. Boot: the same host agent brings the VM up (SSH, cloud-init,
	// marina's provisioning, the readiness probe: Docker answers).
	r.step("boot + provision (the interrupted boot goes on; Start waits for it)", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
		defer cancel()
		st, err := d.Start(ctx, progress)
		if err != nil {
			return err
		}
		if st.State != vm.Running {
			return fmt.Errorf("status after start = %+v", st)
		}
		pid, err := readPID(filepath.Join(instDir, "ha.pid"))
		if err != nil {
			return err
		}
		if pid != agentPID {
			return fmt.Errorf("the host agent changed (%d, then %d): the interrupted boot was not the one that came up", agentPID, pid)
		}
		if qemuPID, err = readPID(filepath.Join(instDir, "qemu.pid")); err != nil {
			return err
		}
		return nil
	})
	r.step("guest: boot time, provisioning applied, lima0 leased, no way out", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := d.Exec(ctx, []string{"systemd-analyze"}, nil); err == nil {
			fmt.Printf("    guest: %s\n", firstLine(out))
		}
		checks := []struct {
			argv []string
			want string
		}{
			{[]string{"cat", "/etc/sysctl.d/99-marina.conf"}, "net.ipv4.ip_forward = 1"},
			{[]string{"sysctl", "-n", "net.ipv4.ip_forward"}, "1"},
			{[]string{"cat", "/etc/systemd/system/docker.socket.d/override.conf"}, "SocketUser=lima"},
			{[]string{"cat", "/var/lib/marina/versions"}, "docker.io="},
			{[]string{"stat", "-c", "%U", "/run/docker.sock"}, "lima"},
			// lima0: Lima's socket network, leased by run.sh's dnsmasq.
			{[]string{"ip", "-o", "-4", "addr", "show", "dev", "lima0"}, "inet " + lima0Guest + "/24"},
			{[]string{"ip", "-4", "route", "get", lima0Host}, "dev lima0"},
		}
		for _, c := range checks {
			out, err := d.Exec(ctx, c.argv, nil)
			if err != nil {
				return err
			}
			if !strings.Contains(string(out), c.want) {
				return fmt.Errorf("%s: %q does not contain %q", strings.Join(c.argv, " "), out, c.want)
			}
		}
		if out, err := d.Exec(ctx, []string{"sh", "-c", "test ! -e /usr/local/bin/kind && test ! -e /usr/local/bin/kubectl"}, nil); err != nil {
			return fmt.Errorf("the provisioning downloaded tools it was not given: %v %s", err, out)
		}
		if os.Getenv("MARINA_TEST_VM_RESTRICT") == "0" {
			return nil
		}
		// No way out: an address of Debian's mirror (which this machine
		// reaches) does not answer the VM.
		ip := "151.101.2.132"
		if ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", "deb.debian.org"); err == nil && len(ips) > 0 {
			ip = ips[0].String()
		}
		if out, err := d.Exec(ctx, []string{"curl", "-sS", "-m", "5", "-o", "/dev/null", "http://" + ip + "/"}, nil); err == nil {
			return fmt.Errorf("the VM reached http://%s/ (%s): its network is not restricted", ip, out)
		}
		return nil
	})

	// 3. The Docker socket, forwarded by Lima to ~/.<name>.docker.sock.
	r.step("Docker socket ~/."+vmName+".docker.sock answers /version", func() error {
		sock := limavm.DockerSocket(home, vmName)
		v, err := dockerGet(sock, "/version")
		if err != nil {
			return err
		}
		var ver struct{ Version, APIVersion string }
		if err := json.Unmarshal(v, &ver); err != nil || ver.Version == "" || ver.APIVersion == "" {
			return fmt.Errorf("/version on %s = %s (%v)", sock, v, err)
		}
		fmt.Printf("    docker: engine %s, API %s\n", ver.Version, ver.APIVersion)
		return nil
	})

	// 4. marina up against the running VM, through the marina binary: the
	// machine step finds it running (no restart, no new VM); the bridge
	// network, the guest network (forwarding, no SNAT), the route to lima0
	// (sudo, allowed by run.sh's drop-in), PostUp's local DNS containers and
	// the resolver step (manual here: no systemd-resolved) all run. Then this
	// machine asks the DNS container a question through the route.
	r.step("marina up: bridge, guest network, route via lima0, PostUp (local DNS); DNS answers via the route", func() error {
		return marinaUp(e, home, d)
	})

	// 5. Broken: the host agent is killed; Status says so; Start recovers.
	r.step("Broken (host agent SIGKILLed) -> Start recovers it; DNS via the route again", func() error {
		if err := syscall.Kill(agentPID, syscall.SIGKILL); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
		defer cancel()
		if err := waitGone(ctx, agentPID); err != nil {
			return err
		}
		st, err := d.Status(ctx)
		if err != nil {
			return err
		}
		if st.State != vm.Stopped || !strings.Contains(st.Detail, "Broken") || !strings.Contains(st.Detail, "marina up") {
			return fmt.Errorf("status after the host agent died = %+v, want Broken with the way out", st)
		}
		fmt.Printf("    status: %s\n", st.Detail)
		st, err = d.Start(ctx, progress)
		if err != nil {
			return err
		}
		if st.State != vm.Running {
			return fmt.Errorf("status after recovery = %+v", st)
		}
		if alive(qemuPID) {
			return fmt.Errorf("the broken VM's qemu (pid %d) still runs after the recovery", qemuPID)
		}
		if agentPID, err = readPID(filepath.Join(instDir, "ha.pid")); err != nil {
			return err
		}
		if qemuPID, err = readPID(filepath.Join(instDir, "qemu.pid")); err != nil {
			return err
		}
		if _, err = dockerGet(limavm.DockerSocket(home, vmName), "/version"); err != nil {
			return err
		}
		// The lab is back: lima0 leased again, the guest network restored
		// at boot, the DNS containers restarted (restart policy always),
		// and the route on this machine still leads to them.
		server := bridgeAddr(".255.53") + ":53"
		ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for {
			rcode, err := dnsQuery(server, "demo.internal")
			if err == nil {
				fmt.Printf("    dns: %s answered (rcode %d) after the recovery\n", server, rcode)
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("DNS through the route after the recovery: %v (%w)", err, ctx.Err())
			case <-time.After(2 * time.Second):
			}
		}
	})

	// 5b. marina up again: the VM runs, and the local DNS containers run as
	// the first up left them (Docker restarted them, same IDs), so the
	// PostUp step replays localdns's recorded result instead of starting
	// the plugin (through the Lima Docker socket).
	r.step("marina up again after the recovery: no plugin started (their containers run as left)", func() error {
		return marinaUpAgain(e, home)
	})

	// 6. Stop: a power-down the guest sees (ACPI), not a kill.
	r.step("stop: clean power-down", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			return err
		}
		if alive(qemuPID) || alive(agentPID) {
			return fmt.Errorf("after stop: qemu (pid %d) alive %v, host agent (pid %d) alive %v", qemuPID, alive(qemuPID), agentPID, alive(agentPID))
		}
		st, err := d.Status(ctx)
		if err != nil || st.State != vm.Stopped || !strings.Contains(st.Detail, "stopped") {
			return fmt.Errorf("status after stop = %+v, %v", st, err)
		}
		if err := statusStopped(ctx, e, home); err != nil {
			return err
		}
		ha, err := os.ReadFile(filepath.Join(instDir, "ha.stderr.log"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(ha), "system_powerdown") || !strings.Contains(string(ha), "QEMU has exited") ||
			strings.Contains(string(ha), "forcibly") {
			return fmt.Errorf("the host agent's log does not show a power-down followed by QEMU exiting on its own:\n%s", tail(ha, 15))
		}
		serial, err := os.ReadFile(filepath.Join(instDir, "serial.log"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(serial), "reboot: Power down") {
			return fmt.Errorf("the guest's console does not show a power-down:\n%s", tail(serial, 15))
		}
		return nil
	})

	// 7. Delete: nothing left.
	r.step("delete: instance directory gone, no qemu or host agent", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if dir := os.Getenv("MARINA_TEST_VM_LOGS"); dir != "" {
			saveLogs(t, instDir, dir) // the stop's logs, before they go
		}
		if err := d.Delete(ctx); err != nil {
			return err
		}
		if _, err := os.Stat(instDir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the instance directory %s is still there (%v)", instDir, err)
		}
		if alive(qemuPID) || alive(agentPID) {
			return fmt.Errorf("after delete: qemu (pid %d) or host agent (pid %d) still runs", qemuPID, agentPID)
		}
		st, err := d.Status(ctx)
		if err != nil || st.State != vm.Absent {
			return fmt.Errorf("status after delete = %+v, %v", st, err)
		}
		return nil
	})
}

// saveLogs copies the instance's logs (host agent, serial consoles) and
// lima.yaml into dir.
func saveLogs(t *testing.T, instDir, dir string) {
	files, _ := filepath.Glob(filepath.Join(instDir, "*.log"))
	files = append(files, filepath.Join(instDir, "lima.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Logf("saving %s: %v", f, err)
		}
	}
}

// marinaUpAgain runs `marina up` a second time, with the config marinaUp
// wrote, and checks that the plugins were not started: their PostUp
// results were replayed (see core/plugin SteadyCache).
func marinaUpAgain(e env, home string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := runMarinaUp(ctx, e, home)
	if err != nil {
		return err
	}
	for _, p := range []string{"localdns", "registries"} {
		if !strings.Contains(out, p+": unchanged since ") {
			return fmt.Errorf("the second marina up started %s, whose last PostUp still holds", p)
		}
	}
	return nil
}

// statusStopped checks that `marina status` reads the VM a real boot and
// power-down left as stopped.
func statusStopped(ctx context.Context, e env, home string) error {
	cmd := exec.CommandContext(ctx, e.marina, "status", "-o", "json")
	cmd.Env = append(cleanEnv(), "HOME="+home, "MARINA_CONFIG="+filepath.Join(home, ".marina", "config.yaml"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"state": "stopped"`) {
		return fmt.Errorf("marina status after stop: %v\n%s", err, out)
	}
	fmt.Printf("    marina status: stopped\n")
	return nil
}

// runMarinaUp runs `marina up` with the lab's config (~/.marina/config.yaml
// under home), prints its output and returns it.
func runMarinaUp(ctx context.Context, e env, home string) (string, error) {
	cmd := exec.CommandContext(ctx, e.marina, "up", "--progress", "plain")
	cmd.Env = append(cleanEnv(), "HOME="+home, "MARINA_CONFIG="+filepath.Join(home, ".marina", "config.yaml"))
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Printf("    marina up: %s\n", line)
	}
	if err != nil {
		return string(out), fmt.Errorf("marina up: %v", err)
	}
	return string(out), nil
}

// marinaUp runs `marina up` for the test's lab and checks what it did: in
// the VM, on this machine, and the path between them.
func marinaUp(e env, home string, d *limavm.Driver) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sock := limavm.DockerSocket(home, vmName)
	// The VM has no registry to pull from: the local DNS images come from
	// this machine's Docker (run.sh saved them).
	if err := dockerLoad(ctx, sock, e.images); err != nil {
		return err
	}
	cfgPath := filepath.Join(home, ".marina", "config.yaml")
	cfgYAML := fmt.Sprintf(`vm:
  driver: lima
  name: %s
  cpus: %d
  memory: 2GiB
  disk: 12GiB
  startTimeout: %s
network:
  bridgeCIDR: %s
images:
  registry: marina-test/registry:v3.1.2
  dnsEtcd: marina-test/etcd:v3.7.3
  dnsServer: marina-test/coredns:v1.15.0
registries:
  cacheStorage: guest
  mirrors: []
`, vmName, e.cpus, bootTimeout, bridge)
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o644); err != nil {
		return err
	}
	out, err := runMarinaUp(ctx, e, home)
	if err != nil {
		return err
	}
	// The VM booted with the test driver's provisioning (Driver.Provision:
	// no kind or kubectl download, the image has Docker); the marina
	// binary's is the default one. The running VM keeps its own, and up
	// says that the config's waits for a restart (issue 25: a changed
	// proxy or trust.extraCAs is never dropped silently).
	if !strings.Contains(out, "Not applied: the VM "+vmName+" keeps running as it is; the config's provisioning") || !strings.Contains(out, "marina up --restart") {
		return fmt.Errorf("marina up did not say that the running VM's provisioning differs from the config's until a restart")
	}
	// The driver reads lima0's address.
	st, err := d.Status(ctx)
	if err != nil || st.GuestIP != lima0Guest {
		return fmt.Errorf("status after up = %+v, %v; want guest IP %s (lima0)", st, err, lima0Guest)
	}
	// The bridge network exists in the VM with the configured subnet.
	b, err := dockerGet(sock, "/networks/"+config.Default().Network.Name)
	if err != nil {
		return fmt.Errorf("the bridge network: %w", err)
	}
	var nw struct {
		Driver string
		IPAM   struct{ Config []struct{ Subnet string } }
	}
	if err := json.Unmarshal(b, &nw); err != nil || nw.Driver != "bridge" || len(nw.IPAM.Config) == 0 || nw.IPAM.Config[0].Subnet != bridge {
		return fmt.Errorf("the bridge network in the VM = %s (%v), want a bridge on %s", b, err, bridge)
	}
	// This machine routes the bridge to lima0.
	rt, err := exec.CommandContext(ctx, "ip", "-4", "route", "show", "exact", bridge).Output()
	if err != nil || !strings.Contains(string(rt), "via "+lima0Guest) {
		return fmt.Errorf("the route on this machine: %q (%v), want %s via %s", rt, err, bridge, lima0Guest)
	}
	fmt.Printf("    route: %s", rt)
	// The local DNS server on the bridge answers this machine through it.
	server := bridgeAddr(".255.53") + ":53"
	rcode, err := dnsQuery(server, "demo.internal")
	if err != nil {
		return fmt.Errorf("DNS query to %s through the route: %w", server, err)
	}
	fmt.Printf("    dns: %s answered (rcode %d) for demo.internal\n", server, rcode)
	return nil
}

// bridgeAddr is the bridge's <prefix>.x.y address for suffix ".x.y".
func bridgeAddr(suffix string) string {
	parts := strings.SplitN(bridge, ".", 3)
	return parts[0] + "." + parts[1] + suffix
}

// dockerLoad loads a `docker save` archive into the engine on sock.
func dockerLoad(ctx context.Context, sock, tarPath string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/images/load?quiet=1", f)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("load %s into the VM's Docker: %w", tarPath, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
		return fmt.Errorf("load %s into the VM's Docker: %s: %s", tarPath, resp.Status, b)
	}
	return nil
}

// cleanEnv is this process's environment without HOME and MARINA_*.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "KUBECONFIG" || strings.HasPrefix(k, "MARINA_") || k == "DOCKER_HOST" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// dockerGet is one Engine API GET on a unix socket.
func dockerGet(sock, path string) ([]byte, error) {
	c := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		}},
	}
	resp, err := c.Get("http://docker" + path)
	if err != nil {
		return nil, fmt.Errorf("GET %s on %s: %w", path, sock, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s on %s: %s: %s", path, sock, resp.Status, b)
	}
	return b, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: %q is not a PID", path, b)
	}
	return pid, nil
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func waitGone(ctx context.Context, pid int) error {
	for alive(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("pid %d still runs: %w", pid, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// waitFile waits (bounded) until path exists.
func waitFile(ctx context.Context, path string, timeout time.Duration) (os.FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if fi, err := os.Stat(path); err == nil {
			return fi, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s did not appear: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func firstLine(b []byte) string {
	s := bufio.NewScanner(strings.NewReader(string(b)))
	if s.Scan() {
		return s.Text()
	}
	return ""
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
