package lima

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"

	"github.com/goccy/go-yaml"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limatype/filenames"
	"github.com/lima-vm/lima/v2/pkg/limayaml"
	"github.com/lima-vm/lima/v2/pkg/osutil"
	"github.com/opencontainers/go-digest"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm/limavm"
)

// guestUserOf is the guest user of a VM with Lima configuration y (as Lima
// loaded it): user.name, or, when unset, what Lima itself uses — the host
// user's name if it is a valid Linux user name, else "lima"
// (osutil.LimaUser; Lima's loader fills user.name with it, so this only
// matters for a configuration read without Lima's defaults). Without any
// configuration (Lima could not read the VM's lima.yaml) it is the user of
// the VMs marina creates.
func guestUserOf(ctx context.Context, y *limatype.LimaYAML) string {
	switch {
	case y == nil:
		return limavm.GuestUser
	case y.User.Name != nil && *y.User.Name != "":
		return *y.User.Name
	}
	return osutil.LimaUser(ctx, LimaVersion, false, nil).Username
}

// guestDockerSocket is where Docker listens in the VM.
const guestDockerSocket = "/run/docker.sock"

// TemplateOptions are the facts about the host that the VM template
// depends on. The zero value describes this machine, except Home.
type TemplateOptions struct {
	// GOOS and GOARCH of the host; empty means this machine's. darwin gives
	// Lima's vz VM type, linux its qemu VM type.
	GOOS, GOARCH string
	// Home is the host user's home directory (absolute). The registry
	// cache, shared with the VM when registries.cacheStorage is host,
	// lives under it.
	Home string
	// Images replaces DefaultImages (e.g. a newer Ubuntu release or a local
	// mirror); every image needs a digest.
	Images []limavm.Image
	// Provision replaces DefaultProvision.
	Provision *limavm.Provision
	// Networks are extra networks of a qemu VM (Lima's `networks:`; the
	// first is lima0). A vz VM gets vzNAT and ignores them. The VM test
	// serves one on a socket (test/vm) to give its qemu VM a lima0.
	Networks []limatype.Network
}

// Template builds the Lima instance configuration of marina's VM from the
// config: Lima's own typed YAML, so that Lima validates exactly what marina
// means.
func Template(cfg *config.Config, opts TemplateOptions) (*limatype.LimaYAML, error) {
	goos, goarch := opts.GOOS, opts.GOARCH
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	var vmType limatype.VMType
	var mountType limatype.MountType
	switch goos {
	case "darwin":
		// Virtualization.framework with virtiofs shares.
		vmType, mountType = limatype.VZ, limatype.VIRTIOFS
	case "linux":
		// QEMU; 9p is what Lima's qemu driver shares without an extra
		// virtiofsd on the host.
		vmType, mountType = limatype.QEMU, limatype.NINEP
	default:
		return nil, fmt.Errorf("the lima driver runs on macOS (vz) and Linux (qemu), not on %s; set vm.driver to host", goos)
	}
	var arch limatype.Arch
	switch goarch {
	case "amd64":
		arch = limatype.X8664
	case "arm64":
		arch = limatype.AARCH64
	default:
		return nil, fmt.Errorf("the lima driver supports amd64 and arm64 hosts, not %s", goarch)
	}
	if cfg.VM.Name == "" || cfg.VM.CPUs < 1 || cfg.VM.Memory == "" || cfg.VM.Disk == "" {
		return nil, fmt.Errorf("vm.name, vm.cpus, vm.memory and vm.disk must be set (got %q, %d, %q, %q); load the config through core/config, which fills defaults",
			cfg.VM.Name, cfg.VM.CPUs, cfg.VM.Memory, cfg.VM.Disk)
	}
	if cfg.Registries.CacheStorage == "host" && !filepath.IsAbs(opts.Home) {
		return nil, fmt.Errorf("the home directory %q is not absolute; the registry cache mount needs it", opts.Home)
	}

	images := opts.Images
	if images == nil {
		images = limavm.DefaultImages()
	}
	var limaImages []limatype.Image
	for i, img := range images {
		if img.Arch != goarch {
			continue
		}
		d, err := digest.Parse(img.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %d (%s): digest %q: %w; every VM image must be pinned by digest", i, img.Location, img.Digest, err)
		}
		limaImages = append(limaImages, limatype.Image{File: limatype.File{Location: img.Location, Arch: arch, Digest: d}})
	}
	if len(limaImages) == 0 {
		return nil, fmt.Errorf("no VM image for %s; give one in TemplateOptions.Images", goarch)
	}

	prov := limavm.DefaultProvision()
	if opts.Provision != nil {
		prov = *opts.Provision
	}
	provision, probes, err := provisioning(withCorporate(prov, cfg, opts.Home))
	if err != nil {
		return nil, err
	}

	y := &limatype.LimaYAML{
		VMType:    ptr(vmType),
		OS:        ptr(limatype.LINUX),
		Arch:      ptr(arch),
		Images:    limaImages,
		CPUs:      ptr(cfg.VM.CPUs),
		Memory:    ptr(cfg.VM.Memory),
		Disk:      ptr(cfg.VM.Disk),
		MountType: ptr(mountType),
		// Only what marina shares (below): no home directory mount.
		Mounts: []limatype.Mount{},
		SSH:    limatype.SSH{LoadDotSSHPubKeys: ptr(false)},
		// Docker runs the containers; Lima's containerd/nerdctl stays off.
		Containerd:   limatype.Containerd{System: ptr(false), User: ptr(false)},
		User:         limatype.User{Name: ptr(limavm.GuestUser)},
		Provision:    provision,
		Probes:       probes,
		HostResolver: limatype.HostResolver{Hosts: map[string]string{"host.docker.internal": "host.lima.internal"}},
	}
	if vmType == limatype.VZ {
		// vzNAT gives the VM an address on lima0 that the host can route
		// the bridge network to.
		y.Networks = []limatype.Network{{VZNAT: ptr(true)}}
		if cfg.VM.Rosetta && goarch == "arm64" {
			y.VMOpts = limatype.VMOpts{limatype.VZ: limatype.VZOpts{
				Rosetta: limatype.Rosetta{Enabled: ptr(true), BinFmt: ptr(true)},
			}}
		}
	}
	if vmType == limatype.QEMU && len(opts.Networks) > 0 {
		y.Networks = append([]limatype.Network(nil), opts.Networks...)
	}
	if cfg.Registries.CacheStorage == "host" {
		dir := limavm.RegistryCacheDir(opts.Home)
		y.Mounts = append(y.Mounts, limatype.Mount{Location: dir, MountPoint: ptr(dir), Writable: ptr(true)})
	}
	if cfg.Network.DisablePortMirroring {
		// Lima forwards every port the guest listens on to 127.0.0.1 unless
		// a rule says otherwise; rules match in order, so this catch-all
		// ignore must come first. guestIPMustBeZero false makes 0.0.0.0
		// match sockets bound to any guest address, not only to 0.0.0.0.
		y.PortForwards = append(y.PortForwards, limatype.PortForward{
			GuestIP:           []byte{0, 0, 0, 0},
			GuestIPMustBeZero: ptr(false),
			GuestPortRange:    [2]int{1, 65535},
			Proto:             limatype.ProtoAny,
			Ignore:            true,
		})
	}
	y.PortForwards = append(y.PortForwards, limatype.PortForward{
		GuestSocket: guestDockerSocket,
		HostSocket:  "{{.Home}}/." + cfg.VM.Name + ".docker.sock",
	})
	return y, nil
}

// provisioning is the provision and probe sections of the template.
func provisioning(p limavm.Provision) ([]limatype.Provision, []limatype.Probe, error) {
	script, err := p.Script()
	if err != nil {
		return nil, nil, err
	}
	return []limatype.Provision{{
			Mode:   limatype.ProvisionModeSystem,
			Script: ptr(script),
		}}, []limatype.Probe{{
			Mode:        limatype.ProbeModeReadiness,
			Description: "the Docker engine answers on " + guestDockerSocket,
			Script:      ptr(p.Probe()),
			Hint:        "see /var/log/cloud-init-output.log in the VM (`marina shell -- sudo tail -n 50 /var/log/cloud-init-output.log`)",
		}}, nil
}

// refreshProvisioning brings the provisioning of a stopped VM's lima.yaml
// up to this marina's (after an upgrade that changed a pin), so that the
// next boot installs the new versions: Lima runs the script from lima.yaml
// at every boot, and the script is idempotent. Only the provision and probe
// sections change; everything fixed at creation stays. user is the VM's
// guest user (guestUserOf), which owns the Docker socket. It reports whether
// it rewrote the file.
func refreshProvisioning(instDir, user string) (bool, error) {
	prov := limavm.DefaultProvision()
	prov.SocketUser = user
	return refreshProvisioningTo(instDir, prov)
}

// refreshProvisioningTo is refreshProvisioning with the provisioning prov
// (Driver.Provision, with the VM's guest user as its socket user).
func refreshProvisioningTo(instDir string, prov limavm.Provision) (bool, error) {
	path := filepath.Join(instDir, filenames.LimaYAML)
	y, changed, err := provisioningDiffers(instDir, prov)
	if err != nil || !changed {
		return false, err
	}
	out, err := Render(y)
	if err != nil {
		return false, err
	}
	if err := atomicfile.WriteFile(path, out, 0o644); err != nil {
		return false, fmt.Errorf("update the VM's provisioning in %s: %w", path, err)
	}
	return true, nil
}

// provisioningDiffers reports whether the provision and probe sections of
// the instance's lima.yaml (as written, before Lima's defaults) differ from
// prov's, and returns the file's configuration with prov's in them.
func provisioningDiffers(instDir string, prov limavm.Provision) (*limatype.LimaYAML, bool, error) {
	path := filepath.Join(instDir, filenames.LimaYAML)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("read the VM's Lima configuration: %w", err)
	}
	var y limatype.LimaYAML
	if err := limayaml.Unmarshal(b, &y, path); err != nil {
		return nil, false, err
	}
	provision, probes, err := provisioning(prov)
	if err != nil {
		return nil, false, err
	}
	if reflect.DeepEqual(y.Provision, provision) && reflect.DeepEqual(y.Probes, probes) {
		return &y, false, nil
	}
	y.Provision, y.Probes = provision, probes
	return &y, true, nil
}

// Render marshals a Lima configuration with Lima's YAML library
// (goccy/go-yaml, as limayaml.Marshal does), writing multi-line strings —
// the scripts — as literal blocks so that the instance's lima.yaml stays
// readable. goccy/go-yaml writes a literal block whose first line begins
// with a space without the indentation indicator it needs, and cannot read
// it back ("value is not allowed in this context"); refreshProvisioning
// re-renders a lima.yaml the user may have edited. So the literal form is
// used only when it reads back as y; otherwise multi-line strings are
// written quoted, which goccy/go-yaml reads back.
func Render(y *limatype.LimaYAML) ([]byte, error) {
	if y == nil {
		return nil, errors.New("render the Lima template: nil configuration")
	}
	b, err := yaml.MarshalWithOptions(y, yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		return nil, fmt.Errorf("render the Lima template: %w", err)
	}
	quoted, err := yaml.Marshal(y)
	if err != nil {
		return nil, fmt.Errorf("render the Lima template: %w", err)
	}
	var want, got any
	if err := yaml.Unmarshal(quoted, &want); err != nil {
		return nil, fmt.Errorf("render the Lima template: Lima's YAML library cannot read back what it wrote: %w", err)
	}
	if yaml.Unmarshal(b, &got) == nil && reflect.DeepEqual(got, want) {
		return b, nil
	}
	return quoted, nil
}

func ptr[T any](v T) *T { return &v }
