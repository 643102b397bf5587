package lima

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bcollard/marina/test/golden"

	"github.com/goccy/go-yaml"
	"github.com/lima-vm/lima/v2/pkg/limatype"
	"github.com/lima-vm/lima/v2/pkg/limayaml"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm/limavm"
)

const testHome = "/Users/dev"

func TestTemplateGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		goos   string
		goarch string
		edit   func(c *config.Config)
	}{
		{name: "darwin-arm64-defaults", goos: "darwin", goarch: "arm64"},
		{name: "darwin-arm64-rosetta", goos: "darwin", goarch: "arm64", edit: func(c *config.Config) { c.VM.Rosetta = true }},
		{name: "darwin-arm64-cache-guest", goos: "darwin", goarch: "arm64", edit: func(c *config.Config) { c.Registries.CacheStorage = "guest" }},
		{name: "darwin-arm64-port-mirroring", goos: "darwin", goarch: "arm64", edit: func(c *config.Config) { c.Network.DisablePortMirroring = false }},
		{name: "darwin-amd64-rosetta-ignored", goos: "darwin", goarch: "amd64", edit: func(c *config.Config) { c.VM.Rosetta = true; c.VM.CPUs = 6; c.VM.Memory = "16GiB" }},
		{name: "linux-amd64-qemu", goos: "linux", goarch: "amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			if tc.edit != nil {
				tc.edit(cfg)
			}
			y, err := Template(cfg, TemplateOptions{GOOS: tc.goos, GOARCH: tc.goarch, Home: testHome})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Render(y)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/lima-"+tc.name+".yaml", b)
			checkLimaAccepts(t, b)
		})
	}
}

// checkLimaAccepts loads the rendered YAML with Lima's own loader (which
// fills Lima's defaults) and validates it, as `limactl create` would.
func checkLimaAccepts(t *testing.T, b []byte) {
	t.Helper()
	t.Setenv("LIMA_HOME", t.TempDir())
	y, err := limayaml.LoadWithWarnings(context.Background(), b, filepath.Join(t.TempDir(), "lima.yaml"))
	if err != nil {
		t.Fatalf("Lima cannot load the template: %v", err)
	}
	if err := limayaml.Validate(y, false); err != nil {
		t.Fatalf("Lima rejects the template: %v", err)
	}
}

func TestTemplateSemantics(t *testing.T) {
	cfg := config.Default()
	y, err := Template(cfg, TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome})
	if err != nil {
		t.Fatal(err)
	}
	// The catch-all ignore rule must precede the socket forward, match any
	// guest address, and the socket must land at ~/.<name>.docker.sock.
	if len(y.PortForwards) != 2 || !y.PortForwards[0].Ignore || y.PortForwards[1].GuestSocket != "/run/docker.sock" {
		t.Fatalf("port forwards = %+v", y.PortForwards)
	}
	if pf := y.PortForwards[0]; pf.GuestIPMustBeZero == nil || *pf.GuestIPMustBeZero || !pf.GuestIP.IsUnspecified() || pf.GuestPortRange != [2]int{1, 65535} {
		t.Errorf("ignore rule = %+v", pf)
	}
	if got := y.PortForwards[1].HostSocket; got != "{{.Home}}/.marina.docker.sock" {
		t.Errorf("host socket = %q", got)
	}
	if len(y.Mounts) != 1 || y.Mounts[0].Location != "/Users/dev/.marina/registry-cache" || *y.Mounts[0].MountPoint != y.Mounts[0].Location || !*y.Mounts[0].Writable {
		t.Errorf("mounts = %+v", y.Mounts)
	}
	for _, img := range y.Images {
		if img.Arch != limatype.AARCH64 || img.Digest == "" {
			t.Errorf("image %+v: want an aarch64 image pinned by digest", img)
		}
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts TemplateOptions
		edit func(c *config.Config)
		want string
	}{
		{name: "windows", opts: TemplateOptions{GOOS: "windows", GOARCH: "amd64", Home: testHome}, want: "vm.driver"},
		{name: "riscv", opts: TemplateOptions{GOOS: "linux", GOARCH: "riscv64", Home: testHome}, want: "riscv64"},
		{name: "relative home", opts: TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: "dev"}, want: "not absolute"},
		{name: "image without digest", opts: TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome,
			Images: []limavm.Image{{Arch: "arm64", Location: "https://example.com/x.img"}}}, want: "pinned by digest"},
		{name: "no image for arch", opts: TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome,
			Images: []limavm.Image{{Arch: "amd64", Location: "https://example.com/x.img", Digest: "sha256:" + strings.Repeat("0", 64)}}}, want: "no VM image for arm64"},
		{name: "unfilled pin", opts: TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome, Provision: func() *limavm.Provision {
			p := limavm.DefaultProvision()
			p.Binaries[0].Files["arm64"] = limavm.File{URL: p.Binaries[0].Files["arm64"].URL, SHA256: "FILL-ME"}
			return &p
		}()}, want: "pins.go"},
		{name: "unloaded config", opts: TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome}, edit: func(c *config.Config) { c.VM.CPUs = 0 }, want: "vm.cpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			if tc.edit != nil {
				tc.edit(cfg)
			}
			_, err := Template(cfg, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Template = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestDefaultImagesMatchLimaTemplate justifies the pinned image digests:
// they are the ones Lima v2.2.0 itself ships for Ubuntu 24.04.
func TestDefaultImagesMatchLimaTemplate(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/lima-vm/lima/v2").Output()
	if err != nil {
		t.Fatalf("go list the Lima module: %v", err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go list: %v %s", err, out)
	}
	if mod.Version != LimaVersion {
		t.Errorf("go.mod has Lima %s, LimaVersion says %s", mod.Version, LimaVersion)
	}
	b, err := os.ReadFile(filepath.Join(mod.Dir, "templates", "_images", "ubuntu-24.04.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl limatype.LimaYAML
	if err := limayaml.Unmarshal(b, &tmpl, "ubuntu-24.04.yaml"); err != nil {
		t.Fatal(err)
	}
	lima := map[string]string{}
	for _, img := range tmpl.Images {
		if img.Digest != "" {
			lima[img.Location] = img.Digest.String()
		}
	}
	// The first image of each architecture is the one Lima v2.2.0 pins;
	// the fallbacks are older dated releases (from Lima's earlier
	// templates, see pins.go), newest first, each with its own digest.
	dated := regexp.MustCompile(`^https://cloud-images\.ubuntu\.com/releases/noble/release-([0-9]{8})/ubuntu-24\.04-server-cloudimg-(amd64|arm64)\.img$`)
	last := map[string]string{}
	seen := map[string]bool{}
	for _, img := range limavm.DefaultImages() {
		m := dated.FindStringSubmatch(img.Location)
		if m == nil || m[2] != img.Arch {
			t.Errorf("%s (%s): not a dated noble release image of that architecture", img.Location, img.Arch)
			continue
		}
		if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(img.Digest) || seen[img.Digest] || seen[img.Location] {
			t.Errorf("%s: digest %q missing, malformed or repeated", img.Location, img.Digest)
		}
		seen[img.Digest], seen[img.Location] = true, true
		prev, ok := last[img.Arch]
		if !ok {
			if got := lima[img.Location]; got != img.Digest {
				t.Errorf("%s %s: the first %s image must be Lima %s's pin, which is %q", img.Location, img.Digest, img.Arch, LimaVersion, got)
			}
		} else if m[1] >= prev {
			t.Errorf("%s: fallbacks must be older releases than %s", img.Location, prev)
		}
		last[img.Arch] = m[1]
	}
	for _, arch := range []string{"amd64", "arm64"} {
		n := 0
		for _, img := range limavm.DefaultImages() {
			if img.Arch == arch {
				n++
			}
		}
		if n < 2 {
			t.Errorf("%s: %d image(s); a removed release must have a fallback", arch, n)
		}
	}
}

// TestTemplateListsEveryFallbackImage: the VM's lima.yaml carries all of
// this architecture's images, in order, each with its digest, so that Lima
// falls back on its own.
func TestTemplateListsEveryFallbackImage(t *testing.T) {
	y, err := Template(config.Default(), TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, img := range limavm.DefaultImages() {
		if img.Arch == "arm64" {
			want = append(want, img.Location+" "+img.Digest)
		}
	}
	var got []string
	for _, img := range y.Images {
		got = append(got, img.Location+" "+img.Digest.String())
		if img.Arch != limatype.AARCH64 {
			t.Errorf("%s: arch %s", img.Location, img.Arch)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) < 2 {
		t.Errorf("images:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRenderRoundTrip checks that Lima reads back exactly what marina
// meant, scripts byte for byte (they are written as literal blocks).
func TestRenderRoundTrip(t *testing.T) {
	cfg := config.Default()
	cfg.VM.Rosetta = true
	y, err := Template(cfg, TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(y)
	if err != nil {
		t.Fatal(err)
	}
	var back limatype.LimaYAML
	if err := limayaml.Unmarshal(b, &back, "rendered"); err != nil {
		t.Fatal(err)
	}
	script, _ := limavm.DefaultProvision().Script()
	if got := *back.Provision[0].Script; got != script {
		t.Errorf("provision script changed in the round trip:\n%s", got)
	}
	if got := *back.Probes[0].Script; got != limavm.DefaultProvision().Probe() {
		t.Errorf("probe changed in the round trip:\n%s", got)
	}
	if *back.CPUs != 4 || *back.Memory != "10GiB" || back.PortForwards[0].GuestIPMustBeZero == nil || *back.PortForwards[0].GuestIPMustBeZero {
		t.Errorf("round trip lost values: %+v", back)
	}
	var vz limatype.VZOpts
	if err := limayaml.Convert(back.VMOpts[limatype.VZ], &vz, "vmOpts.vz"); err != nil || vz.Rosetta.Enabled == nil || !*vz.Rosetta.Enabled || !*vz.Rosetta.BinFmt {
		t.Errorf("rosetta after the round trip = %+v, %v", vz.Rosetta, err)
	}
}

// TestRenderQuotesWhatLiteralCannot: a multi-line string whose first line
// begins with a space (a message or script the user put in the VM's
// lima.yaml, which refreshProvisioning re-renders) is one goccy/go-yaml
// writes as a literal block it cannot read back; Render then writes the
// quoted form, which Lima's loader reads back exactly. Marina's own
// template keeps its literal blocks (TestTemplateGolden).
func TestRenderQuotesWhatLiteralCannot(t *testing.T) {
	y, err := Template(config.Default(), TemplateOptions{GOOS: "darwin", GOARCH: "arm64", Home: testHome})
	if err != nil {
		t.Fatal(err)
	}
	y.Message = "  indented note\nsecond line\n"
	script := " echo from the user\n"
	y.Provision = append(y.Provision, limatype.Provision{Mode: limatype.ProvisionModeUser, Script: &script})
	if b, err := yaml.MarshalWithOptions(y, yaml.UseLiteralStyleIfMultiline(true)); err == nil {
		var back limatype.LimaYAML
		if err := yaml.Unmarshal(b, &back); err == nil && back.Message == y.Message {
			t.Fatal("goccy/go-yaml reads this literal block back: the test no longer shows why Render checks")
		}
	}
	b, err := Render(y)
	if err != nil {
		t.Fatal(err)
	}
	var back limatype.LimaYAML
	if err := limayaml.Unmarshal(b, &back, "lima.yaml"); err != nil {
		t.Fatalf("Lima cannot read what Render wrote: %v\n%s", err, b)
	}
	if back.Message != y.Message || *back.Provision[1].Script != script || *back.Provision[0].Script != *y.Provision[0].Script {
		t.Errorf("read back another message or script:\n%s", b)
	}
}
