package lima

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/docker"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/limavm"
)

// Driver is the lima driver as it runs in marina's Lima engine
// (limaengine, cmd/marina-lima): vm.Driver for marina's Lima VM, on Lima
// itself (api). marina asks the engine to run it (limavm.Driver).
type Driver struct {
	limavm.Options
	// Executable is the program Lima starts as the VM's host agent
	// (`<Executable> hostagent ...`): the engine; empty means this program.
	Executable string
	// ExecTimeout bounds Exec when ctx has no deadline (default 2 minutes).
	ExecTimeout time.Duration

	// pending is the change the last Start left unapplied on a running VM.
	pending limavm.Resize
	// guestAgent is the guest agent the last preflight found or built
	// (ensureGuestAgent); "" before one ran.
	guestAgent string

	cfg          *config.Config
	home         string
	goos, goarch string
	lima         API
	pingDocker   func(ctx context.Context, host string) error
	guest        *limavm.Guest
	// host is this machine beyond Lima (codesign, brew, limactl, go);
	// the zero value is the real one.
	host hostEnv
	// dockerWait bounds the wait for the forwarded Docker socket after a start.
	dockerWait time.Duration
	// brokenSettle is how long a Broken VM is inspected again before it is
	// stopped forcibly (a host agent that is starting looks Broken briefly).
	brokenSettle time.Duration
}

// New returns the lima driver for cfg (a loaded, validated config) and the
// user's home directory home, under which the VM's state lives
// (~/.marina/lima, Lima's LIMA_HOME for marina), on Lima api.
func New(cfg *config.Config, home string, api API) *Driver {
	d := &Driver{
		cfg:          cfg,
		home:         home,
		goos:         runtime.GOOS,
		goarch:       runtime.GOARCH,
		lima:         api,
		pingDocker:   pingDocker,
		dockerWait:   60 * time.Second,
		brokenSettle: 5 * time.Second,
	}
	d.guest = limavm.NewGuest(d.SSHTarget)
	return d
}

// Name returns "lima".
func (d *Driver) Name() string { return "lima" }

func (d *Driver) vmName() string { return d.cfg.VM.Name }

func (d *Driver) dockerHost() string { return "unix://" + limavm.DockerSocket(d.home, d.vmName()) }

func pingDocker(ctx context.Context, host string) error {
	c, err := docker.Open(ctx, host)
	if err != nil {
		return err
	}
	return c.Close()
}

// Status inspects the VM without changing it.
func (d *Driver) Status(ctx context.Context) (vm.Status, error) {
	st := vm.Status{Driver: "lima", Name: d.vmName()}
	inst, err := d.lima.Inspect(ctx, d.vmName())
	if errors.Is(err, fs.ErrNotExist) {
		st.State = vm.Absent
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	d.describe(inst, &st)
	switch inst.Status {
	case limatype.StatusRunning:
		if err := d.pingDocker(ctx, st.DockerHost); err != nil {
			st.State = vm.Stopped
			st.Detail = fmt.Sprintf("the VM runs but Docker does not answer at %s: %v; `marina up` restarts what is missing", st.DockerHost, err)
			return st, nil
		}
		st.State = vm.Running
		if inst.VMType == limatype.VZ || hasLima0(inst) {
			ip, err := d.guestIP(ctx)
			if err != nil {
				st.Detail = "cannot read the VM's lima0 address: " + err.Error()
			}
			st.GuestIP = ip
		}
	case limatype.StatusStopped:
		st.State = vm.Stopped
		st.Detail = "the VM is stopped; `marina up` starts it"
	default:
		st.State = vm.Stopped
		st.Detail = fmt.Sprintf("Lima reports the VM as %q%s; %s",
			inst.Status, instErrors(inst), wayOut(inst.Status))
	}
	return st, nil
}

// wayOut is what to run for a VM in a state that is neither running nor
// stopped.
func wayOut(s limatype.Status) string {
	if s == limatype.StatusBroken {
		return "`marina up` stops it forcibly and starts it again (`marina down` only stops it); `marina destroy` removes it"
	}
	return "`marina destroy` removes it (and everything in it) so that `marina up` can create it again"
}

// describe fills what the instance records: resources, architecture, drift.
func (d *Driver) describe(inst *limatype.Instance, st *vm.Status) {
	st.DockerHost = d.dockerHost()
	st.Arch = goarchOf(inst.Arch)
	rec, err := readRecord(inst.Dir)
	if err != nil {
		st.Drift = append(st.Drift, err.Error())
	}
	want := recordOf(d.cfg, d.goos, d.goarch)
	if rec == nil && inst.Config != nil {
		// Not created by this marina (or the record was lost): compare
		// what Lima itself recorded.
		c := inst.Config
		rec = &Record{CPUs: deref(c.CPUs), Memory: deref(c.Memory), Disk: deref(c.Disk),
			Rosetta: want.Rosetta, CacheStorage: want.CacheStorage, DisablePortMirroring: want.DisablePortMirroring}
		st.Drift = append(st.Drift, fmt.Sprintf("%s is missing, so vm.rosetta, registries.cacheStorage and network.disablePortMirroring cannot be compared with the VM",
			filepath.Join(inst.Dir, recordFile)))
	}
	if rec != nil {
		st.CPUs, st.Memory, st.Disk = rec.CPUs, rec.Memory, rec.Disk
		st.Drift = append(st.Drift, Drift(*rec, want)...)
	}
}

func instErrors(inst *limatype.Instance) string {
	if len(inst.Errors) == 0 {
		return ""
	}
	msgs := make([]string, len(inst.Errors))
	for i, e := range inst.Errors {
		msgs[i] = e.Error()
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}

func goarchOf(a limatype.Arch) string {
	switch a {
	case limatype.AARCH64:
		return "arm64"
	case limatype.X8664:
		return "amd64"
	}
	return a
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// guestIP reads the VM's address on lima0 (the vzNAT network the host
// routes the bridge to).
func (d *Driver) guestIP(ctx context.Context) (string, error) {
	out, err := d.Exec(ctx, []string{"ip", "-o", "-4", "addr", "show", "lima0"}, nil)
	if err != nil {
		return "", err
	}
	return parseIPAddr(string(out))
}

// parseIPAddr extracts the first IPv4 address from `ip -o -4 addr show`
// output ("3: lima0    inet 192.168.64.3/24 brd ... scope global lima0 ...").
func parseIPAddr(out string) (string, error) {
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "inet" {
			continue
		}
		p, err := netip.ParsePrefix(f[i+1])
		if err != nil || !p.Addr().Is4() {
			return "", fmt.Errorf("unexpected address %q in `ip addr` output", f[i+1])
		}
		return p.Addr().String(), nil
	}
	return "", fmt.Errorf("lima0 has no IPv4 address (ip printed %q)", strings.TrimSpace(out))
}

// Start creates the VM when absent and starts it when stopped; a VM that is
// running (or still booting from an interrupted start) is waited for, not
// changed. A Broken VM (Lima: host agent or driver process gone, or not
// answering) is stopped forcibly first, as `limactl stop -f` would, then
// started. progress receives Lima's progress lines.
//
// Cancelling ctx stops the wait, never the VM: the host agent outlives this
// call, and the error (which wraps ctx.Err()) says so.
func (d *Driver) Start(ctx context.Context, progress func(string)) (vm.Status, error) {
	say := func(s string) {
		if progress != nil {
			progress(s)
		}
	}
	inst, err := d.lima.Inspect(ctx, d.vmName())
	absent := errors.Is(err, fs.ErrNotExist)
	if err != nil && !absent {
		return vm.Status{}, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	if !absent && inst.Status == limatype.StatusBroken {
		if inst, err = d.recoverBroken(ctx, inst, say); err != nil {
			return vm.Status{}, err
		}
	}
	var resize limavm.Resize
	if !absent {
		// A smaller vm.disk is refused before anything changes.
		if resize, err = d.planResize(ctx, inst); err != nil {
			return vm.Status{}, err
		}
	}
	if absent || inst.Status == limatype.StatusStopped || (resize.Running && !resize.Empty() && d.Restart) {
		// Check what starting needs before creating anything.
		if err := d.preflight(ctx, say); err != nil {
			return vm.Status{}, err
		}
	}
	if absent {
		say("creating the VM " + d.vmName())
		if inst, err = d.create(ctx); err != nil {
			return vm.Status{}, err
		}
	}
	switch inst.Status {
	case limatype.StatusRunning:
		// Possibly still booting (a start that was interrupted): wait for
		// Lima's host agent to report the VM up.
		if err := d.lima.WaitRunning(ctx, inst, d.startTimeout()); err != nil {
			return vm.Status{}, fmt.Errorf("the VM %s: %w", d.vmName(), err)
		}
		d.pending = limavm.Resize{}
		if !resize.Empty() {
			if !d.Restart {
				d.pending = resize
				say(d.Pending())
				break
			}
			if inst, err = d.restartToResize(ctx, inst, resize, say); err != nil {
				return vm.Status{}, err
			}
			if err := d.boot(ctx, inst, say); err != nil {
				return vm.Status{}, err
			}
		}
	case limatype.StatusStopped:
		if !resize.Empty() {
			say(fmt.Sprintf("resizing the VM %s: %s", d.vmName(), resize))
			if err := d.applyResize(ctx, inst, resize); err != nil {
				return vm.Status{}, err
			}
			if inst, err = d.lima.Inspect(ctx, d.vmName()); err != nil {
				return vm.Status{}, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
			}
		}
		if err := d.boot(ctx, inst, say); err != nil {
			return vm.Status{}, err
		}
	default:
		return vm.Status{}, fmt.Errorf("the VM %s is %q according to Lima%s; `marina destroy` removes it (and everything in it) so that `marina up` can create it again",
			d.vmName(), inst.Status, instErrors(inst))
	}
	if err := d.waitDocker(ctx); err != nil {
		return vm.Status{}, err
	}
	return d.Status(ctx)
}

// boot starts the stopped instance: its provisioning brought up to date, the
// registry cache directory it mounts created, then Lima's start.
func (d *Driver) boot(ctx context.Context, inst *limatype.Instance, say func(string)) error {
	changed, err := refreshProvisioningTo(inst.Dir, d.provisionFor(guestUserOf(ctx, inst.Config)))
	if err != nil {
		return err
	}
	if changed {
		say("updating the VM's provisioning (new pinned versions apply at this boot)")
		if inst, err = d.lima.Inspect(ctx, d.vmName()); err != nil {
			return fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
		}
	}
	if d.sharesRegistryCache(inst) {
		// Lima refuses to start with a missing mount source.
		if err := os.MkdirAll(limavm.RegistryCacheDir(d.home), 0o755); err != nil {
			return fmt.Errorf("create the registry cache directory: %w", err)
		}
	}
	say("starting the VM " + d.vmName())
	// A connection to a previous boot is of no use any more.
	_ = d.guest.Close()
	opts := StartOptions{HostAgent: d.executable(), GuestAgent: d.guestAgentPath(), Timeout: d.startTimeout()}
	if err := d.lima.Start(ctx, inst, opts); err != nil {
		if errors.Is(err, limavm.ErrStartInterrupted) {
			return err
		}
		return fmt.Errorf("start the VM %s: %w (Lima's host agent log: %s)", d.vmName(), err,
			filepath.Join(inst.Dir, filenames.HostAgentStderrLog))
	}
	return nil
}

// startTimeout is vm.startTimeout (Lima's default when unset).
func (d *Driver) startTimeout() time.Duration {
	if d.cfg.VM.StartTimeout > 0 {
		return d.cfg.VM.StartTimeout
	}
	return defaultStartTimeout
}

// defaultStartTimeout is Lima's own (instance.DefaultWatchHostAgentEventsTimeout).
const defaultStartTimeout = 10 * time.Minute

// recoverBroken handles a VM Lima reports as Broken. A VM whose host agent
// is just starting (an interrupted `marina up` moments ago) looks Broken for
// a moment, so it is inspected again for brokenSettle first; a VM still
// Broken then is stopped forcibly (its processes killed, stale files
// removed), which leaves it Stopped and startable.
func (d *Driver) recoverBroken(ctx context.Context, inst *limatype.Instance, say func(string)) (*limatype.Instance, error) {
	deadline := time.Now().Add(d.brokenSettle)
	for inst.Status == limatype.StatusBroken && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d.brokenSettle / 10):
		}
		next, err := d.lima.Inspect(ctx, d.vmName())
		if err != nil {
			return nil, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
		}
		inst = next
	}
	if inst.Status != limatype.StatusBroken {
		return inst, nil
	}
	say(fmt.Sprintf("the VM %s is broken%s; stopping it forcibly", d.vmName(), instErrors(inst)))
	_ = d.guest.Close()
	if err := d.lima.StopForcibly(ctx, inst); err != nil {
		return nil, fmt.Errorf("stop the broken VM %s forcibly: %w", d.vmName(), err)
	}
	next, err := d.lima.Inspect(ctx, d.vmName())
	if err != nil {
		return nil, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	if next.Status != limatype.StatusStopped {
		return nil, fmt.Errorf("the VM %s is still %q after a forcible stop%s; `marina destroy` removes it (and everything in it) so that `marina up` can create it again",
			d.vmName(), next.Status, instErrors(next))
	}
	return next, nil
}

// sharesRegistryCache reports whether the VM mounts the host registry
// cache: as created (its Lima configuration), whatever the config says now.
func (d *Driver) sharesRegistryCache(inst *limatype.Instance) bool {
	if inst.Config == nil {
		return d.cfg.Registries.CacheStorage == "host"
	}
	for _, m := range inst.Config.Mounts {
		if m.Location == limavm.RegistryCacheDir(d.home) {
			return true
		}
	}
	return false
}

// waitDocker waits (bounded) until Docker answers on the forwarded socket.
// Lima's readiness probe already saw Docker answer inside the VM; this only
// covers the socket forward coming up.
func (d *Driver) waitDocker(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.dockerWait)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		err := d.pingDocker(ctx, d.dockerHost())
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the VM %s started but Docker does not answer at %s: %v", d.vmName(), d.dockerHost(), err)
		case <-tick.C:
		}
	}
}

// create creates the Lima instance from the template and records the
// creation settings next to it.
func (d *Driver) create(ctx context.Context) (*limatype.Instance, error) {
	y, err := Template(d.cfg, TemplateOptions{GOOS: d.goos, GOARCH: d.goarch, Home: d.home, Images: d.Images, Provision: d.Provision, Networks: limaNetworks(d.Networks)})
	if err != nil {
		return nil, err
	}
	b, err := Render(y)
	if err != nil {
		return nil, err
	}
	inst, err := d.lima.Create(ctx, d.vmName(), b)
	if err != nil {
		return nil, fmt.Errorf("create the VM %s: %w", d.vmName(), err)
	}
	if err := writeRecord(inst.Dir, recordOf(d.cfg, d.goos, d.goarch)); err != nil {
		return nil, err
	}
	return inst, nil
}

// preflight checks what starting the VM needs from this machine: on macOS
// a vz-capable binary signed with the virtualization entitlement
// (sign.go); everywhere, Lima's guest agent, built when it is nowhere to be
// found (guestagent.go).
func (d *Driver) preflight(ctx context.Context, say func(string)) error {
	if d.goos == "darwin" {
		vz, err := d.lima.VZ(ctx)
		if err != nil {
			return err
		}
		if !vz {
			return fmt.Errorf("%s (%s) was built without cgo, so it cannot run Lima's vz driver; "+
				"use a release build, or build it with CGO_ENABLED=1 on macOS (`make build`) and sign it with the com.apple.security.virtualization entitlement", limavm.EngineName, d.executable())
		}
		if err := checkEntitlement(ctx, d.host.runner(), d.executable(), d.home, say); err != nil {
			return err
		}
	}
	return d.ensureGuestAgent(ctx, say)
}

func (d *Driver) shareLima() string { return filepath.Join(d.home, ".marina", "share", "lima") }

// guestAgentPath is the guest agent to start the VM with: the override,
// what the preflight found or built, or else the first found in
// guestAgentPlaces; "" when there is none.
func (d *Driver) guestAgentPath() string {
	if d.GuestAgent == "" && d.guestAgent != "" {
		return d.guestAgent
	}
	p, _ := d.findGuestAgent(context.Background())
	return p
}

// executable is the host agent program: Executable, else this program.
func (d *Driver) executable() string {
	if d.Executable != "" {
		return d.Executable
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}

// limaNetworks is nets as Lima's networks: entries.
func limaNetworks(nets []limavm.Network) []limatype.Network {
	var out []limatype.Network
	for _, n := range nets {
		out = append(out, limatype.Network{Socket: n.Socket, Lima: n.Lima})
	}
	return out
}

// Stop stops the VM gracefully, keeping everything in it. A Broken VM
// (Lima: a host agent or driver process gone or not answering) cannot be
// stopped gracefully: its processes are killed and its stale files removed
// (Lima's forcible stop), which leaves it Stopped. A VM that is absent or
// stopped is left as it is.
func (d *Driver) Stop(ctx context.Context) error {
	inst, err := d.lima.Inspect(ctx, d.vmName())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	switch inst.Status {
	case limatype.StatusRunning:
		_ = d.guest.Close()
		if err := d.lima.Stop(ctx, inst); err != nil {
			return fmt.Errorf("stop the VM %s: %w; if it hangs, its state is Broken afterwards and `marina down` stops it forcibly", d.vmName(), err)
		}
	case limatype.StatusBroken:
		_ = d.guest.Close()
		if err := d.lima.StopForcibly(ctx, inst); err != nil {
			return fmt.Errorf("stop the broken VM %s forcibly: %w", d.vmName(), err)
		}
	}
	return nil
}

// Delete removes the VM and everything in it (running or not). The host
// registry cache (~/.marina/registry-cache) is kept: it outlives the VM.
func (d *Driver) Delete(ctx context.Context) error {
	inst, err := d.lima.Inspect(ctx, d.vmName())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	_ = d.guest.Close()
	if err := d.lima.Delete(ctx, inst); err != nil {
		return fmt.Errorf("delete the VM %s: %w", d.vmName(), err)
	}
	return nil
}

// SSHTarget is where the guest's SSH server is reachable: Lima's loopback
// forward of the running instance, with Lima's key for marina's LIMA_HOME,
// and the guest user to log in as.
func (d *Driver) SSHTarget(ctx context.Context) (limavm.SSHTarget, error) {
	inst, err := d.lima.Inspect(ctx, d.vmName())
	if errors.Is(err, fs.ErrNotExist) {
		return limavm.SSHTarget{}, fmt.Errorf("the VM %s does not exist; `marina up` creates it", d.vmName())
	}
	if err != nil {
		return limavm.SSHTarget{}, fmt.Errorf("inspect the Lima instance %s: %w", d.vmName(), err)
	}
	if inst.Status != limatype.StatusRunning || inst.SSHLocalPort == 0 {
		return limavm.SSHTarget{}, fmt.Errorf("the VM %s is not running (Lima: %q); `marina up` starts it", d.vmName(), inst.Status)
	}
	addr := inst.SSHAddress
	if addr == "" {
		addr = "127.0.0.1"
	}
	return limavm.SSHTarget{Addr: addr + ":" + strconv.Itoa(inst.SSHLocalPort), KeyFile: d.sshKey(), User: guestUserOf(ctx, inst.Config)}, nil
}

func (d *Driver) sshKey() string {
	return filepath.Join(vm.LimaHome(d.home), filenames.ConfigDir, filenames.UserPrivateKey)
}

// Exec runs argv in the VM as root (limavm.Guest.Exec).
func (d *Driver) Exec(ctx context.Context, argv []string, stdin io.Reader) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok && d.ExecTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.ExecTimeout)
		defer cancel()
	}
	return d.guest.Exec(ctx, argv, stdin)
}
