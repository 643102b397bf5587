package registries

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	tomlv1 "github.com/pelletier/go-toml"
	toml "github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/test/golden"
)

// defaultMirrors are the mirrors marina's config defaults to.
func defaultMirrors() []sdk.Mirror {
	return []sdk.Mirror{
		{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io"},
		{Name: "registry-quayio", Port: 5010, RemoteURL: "https://quay.io"},
		{Name: "registry-gcrio", Port: 5020, RemoteURL: "https://gcr.io"},
		{Name: "registry-us-docker-pkgdev", Port: 5040, RemoteURL: "https://us-docker.pkg.dev"},
		{Name: "registry-us-central1-docker-pkgdev", Port: 5050, RemoteURL: "https://us-central1-docker.pkg.dev"},
	}
}

// renderContribution writes a KindContribution as text for a golden file.
func renderContribution(kc *sdk.KindContribution) []byte {
	var b bytes.Buffer
	for _, f := range kc.NodeFiles {
		fmt.Fprintf(&b, "### node file %s (mode %04o)\n%s\n", f.Path, f.Mode, f.Content)
	}
	for i, p := range kc.ContainerdConfigPatches {
		fmt.Fprintf(&b, "### containerd config patch %d\n%s\n", i, p)
	}
	return b.Bytes()
}

// containerdHostsFile mirrors the fields containerd 2.x reads from
// hosts.toml (core/remotes/docker/config/hosts.go, hostFileConfig) that this
// plugin writes; decoding is strict, so a misspelt key fails.
type containerdHostsFile struct {
	Server string `toml:"server"`
	Host   map[string]struct {
		Capabilities []string `toml:"capabilities"`
	} `toml:"host"`
}

// TestKindContributionGolden renders the containerd host files and patch
// for the default mirrors and for a custom mirror whose upstream has a
// port, compares them with golden files, and decodes every hosts.toml
// strictly the way containerd does.
func TestKindContributionGolden(t *testing.T) {
	tests := []struct {
		name    string
		mirrors []sdk.Mirror
		// wantDirs are the host namespace directories, in order.
		wantDirs []string
	}{
		{
			name:     "kind-default-mirrors.golden",
			mirrors:  defaultMirrors(),
			wantDirs: []string{"docker.io", "quay.io", "gcr.io", "us-docker.pkg.dev", "us-central1-docker.pkg.dev"},
		},
		{
			name:     "kind-custom-port.golden",
			mirrors:  []sdk.Mirror{{Name: "registry-internal", Port: 5060, RemoteURL: "http://registry.internal:5000/", Username: "u", Password: "p4ss"}},
			wantDirs: []string{"registry.internal_5000_"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := checkMirrors(tt.mirrors)
			if err != nil {
				t.Fatal(err)
			}
			kc, err := kindContribution(ms)
			if err != nil {
				t.Fatal(err)
			}
			if len(kc.NodeFiles) != len(tt.wantDirs) {
				t.Fatalf("%d node files, want %d", len(kc.NodeFiles), len(tt.wantDirs))
			}
			for i, f := range kc.NodeFiles {
				if want := "/etc/containerd/certs.d/" + tt.wantDirs[i] + "/hosts.toml"; f.Path != want {
					t.Errorf("node file %d path %s, want %s", i, f.Path, want)
				}
				var h containerdHostsFile
				dec := toml.NewDecoder(bytes.NewReader(f.Content))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&h); err != nil {
					t.Fatalf("%s does not decode as containerd's hosts.toml: %v", f.Path, err)
				}
				m := tt.mirrors[i]
				host, ok := h.Host[fmt.Sprintf("http://%s:%d", m.Name, m.Port)]
				if h.Server != strings.TrimSuffix(m.RemoteURL, "/") || len(h.Host) != 1 || !ok ||
					strings.Join(host.Capabilities, ",") != "pull,resolve" {
					t.Errorf("%s decodes to %+v", f.Path, h)
				}
				if bytes.Contains(f.Content, []byte("p4ss")) {
					t.Errorf("%s holds the mirror's password", f.Path)
				}
			}
			golden.Check(t, "testdata/"+tt.name, renderContribution(kc))
		})
	}
	if kc, err := kindContribution(nil); err != nil || kc != nil {
		t.Fatalf("no mirrors: contribution %+v, %v; want none", kc, err)
	}
}

// TestContainerdPatchAsKindMergesIt parses the patch with the TOML library
// kind v0.33.0 uses for containerdConfigPatches (pelletier/go-toml v1,
// pkg/internal/patch/toml.go) and checks the tree it merges: the CRI image
// service's registry config_path, and no version key (kind would skip a
// patch whose version differs from the node's config).
func TestContainerdPatchAsKindMergesIt(t *testing.T) {
	b, err := renderContainerdPatch()
	if err != nil {
		t.Fatal(err)
	}
	tree, err := tomlv1.LoadBytes(b)
	if err != nil {
		t.Fatalf("kind's TOML parser rejects the patch: %v\n%s", err, b)
	}
	m := tree.ToMap()
	if _, ok := m["version"]; ok {
		t.Fatalf("patch sets a version; kind skips patches whose version differs from the node config's:\n%s", b)
	}
	plugins, _ := m["plugins"].(map[string]any)
	images, _ := plugins["io.containerd.cri.v1.images"].(map[string]any)
	registry, _ := images["registry"].(map[string]any)
	if got := registry["config_path"]; got != "/etc/containerd/certs.d" || len(m) != 1 || len(plugins) != 1 || len(images) != 1 || len(registry) != 1 {
		t.Fatalf("patch tree = %v, want exactly plugins.io.containerd.cri.v1.images.registry.config_path = /etc/containerd/certs.d", m)
	}
}

// TestRegistryConfigGolden renders distribution's config.yml with and
// without upstream credentials and checks the fields the registry reads.
func TestRegistryConfigGolden(t *testing.T) {
	tests := []struct {
		golden   string
		mirror   sdk.Mirror
		logLevel string
	}{
		{"config-plain.golden", sdk.Mirror{Name: "registry-quayio", Port: 5010, RemoteURL: "https://quay.io"}, "info"},
		{"config-credentials.golden", sdk.Mirror{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io", Username: "alice", Password: "s3cr3t: \"quoted\" #x"}, "debug"},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			ms, err := checkMirrors([]sdk.Mirror{tt.mirror})
			if err != nil {
				t.Fatal(err)
			}
			b, err := renderRegistryConfig(ms[0], tt.logLevel)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Version string `yaml:"version"`
				Log     struct {
					Level string `yaml:"level"`
				} `yaml:"log"`
				HTTP struct {
					Addr string `yaml:"addr"`
				} `yaml:"http"`
				Storage struct {
					Filesystem struct {
						RootDirectory string `yaml:"rootdirectory"`
					} `yaml:"filesystem"`
				} `yaml:"storage"`
				Proxy map[string]string `yaml:"proxy"`
			}
			if err := yaml.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"remoteurl": tt.mirror.RemoteURL}
			if tt.mirror.Username != "" {
				want["username"], want["password"] = tt.mirror.Username, tt.mirror.Password
			}
			if got.Version != "0.1" || got.Log.Level != tt.logLevel || got.HTTP.Addr != fmt.Sprintf(":%d", tt.mirror.Port) ||
				got.Storage.Filesystem.RootDirectory != "/var/lib/registry" || fmt.Sprint(got.Proxy) != fmt.Sprint(want) {
				t.Fatalf("config decodes to %+v, want proxy %v\n%s", got, want, b)
			}
			golden.Check(t, "testdata/"+tt.golden, b)
		})
	}
}
