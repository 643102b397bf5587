package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/userfile"
	"github.com/bcollard/marina/test/golden"
)

// scenario builds one klimax installation in home.
type scenario struct {
	name  string
	build func(t *testing.T, home string)
}

var scenarios = []scenario{
	{"defaults", func(t *testing.T, home string) {
		// The file klimax writes, a stopped VM (stale ha.pid), a host
		// cache, two clusters, one of them merged into ~/.kube/config.
		klimaxConfigFile(t, home, "defaults")
		limaInstance(t, home, "klimax", "stale", true)
		registryCache(t, home, "registry-dockerio", "registry-quayio")
		kubeconfigs(t, home, "dev", "prod")
		userKubeconfig(t, home, "dev")
	}},
	{"custom-mirrors", func(t *testing.T, home string) {
		// Customised keys and credentials; the VM runs.
		klimaxConfigFile(t, home, "custom-mirrors")
		limaInstance(t, home, "klimax", "running", true)
		registryCache(t, home, "registry-harbor")
		kubeconfigs(t, home, "dev")
	}},
	{"guest-cache", func(t *testing.T, home string) {
		// Cache in the VM, no VM left, no clusters.
		klimaxConfigFile(t, home, "guest-cache")
	}},
	{"odd-keys", func(t *testing.T, home string) {
		// Unknown and rejected keys, a leftover VM directory that is not an
		// instance, and a marina config that already exists.
		klimaxConfigFile(t, home, "odd-keys")
		write(t, filepath.Join(home, ".klimax", "klimax", "ha.stderr.log"), "", 0o644)
		write(t, filepath.Join(home, ".marina", "config.yaml"), "vm:\n  cpus: 2\n", 0o600)
	}},
}

// normalize replaces the temporary home directory with /HOME and process
// ids with N.
func normalize(s, home string) string {
	return pidRE.ReplaceAllString(strings.ReplaceAll(s, home, "/HOME"), "process N")
}

var pidRE = regexp.MustCompile(`process \d+`)

// TestPlanGolden renders the plan of every scenario as the table and the
// config file marina would write, and checks that this file loads through
// core/config as exactly the plan's config.
func TestPlanGolden(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			home := newHome(t)
			sc.build(t, home)
			before := snapshot(t, home)
			p, err := NewPlan(home, Options{KubeconfigFiles: []string{filepath.Join(home, ".kube", "config")}})
			if err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, home); after != before {
				t.Fatalf("NewPlan changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			var b bytes.Buffer
			if err := p.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/"+sc.name+".txt", []byte(normalize(b.String(), home)))
			golden.Check(t, "testdata/golden/"+sc.name+".config.yaml", []byte(normalize(string(p.ConfigYAML()), home)))

			// The file marina will read is the plan's config, and valid.
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, p.ConfigYAML(), 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := config.Load(config.LoadOptions{Path: path, Home: home})
			if err != nil {
				t.Fatalf("the migrated config does not load: %v\n%s", err, p.ConfigYAML())
			}
			if got, want := asYAML(t, l.Config), asYAML(t, p.Config); got != want {
				t.Errorf("loaded config differs from the plan's:\n--- loaded\n%s\n--- plan\n%s", got, want)
			}
		})
	}
}

func asYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPlanKeys checks the mapping decisions key by key.
func TestPlanKeys(t *testing.T) {
	type want struct {
		klimaxKey, marinaKey string
		status               KeyStatus
		value, note          string // note: a substring
	}
	cases := []struct {
		scenario string
		wants    []want
		config   func(*config.Config) string // "" if fine
	}{
		{"defaults", []want{
			{"vm.name", "vm.name", KeyWritten, "klimax", "adopted under its name"},
			{"vm.cpus", "vm.cpus", KeyDefault, "4", "marina's default too"},
			{"network.kindBridgeCIDR", "network.bridgeCIDR", KeyDefault, "172.30.0.0/16", ""},
			{"kind.nodeVersion", "kind.nodeVersion", KeyMarinaDefault, config.DefaultNodeVersion, "klimax's v1.35.0 was klimax's own default"},
			{"kind.metalLBVersion", "kind.metalLBVersion", KeyMarinaDefault, config.DefaultMetalLBVersion, "v0.16.1"},
			{"registries.mirrors", "registries.mirrors", KeyDefault, "the 5 default mirrors", ""},
		}, func(c *config.Config) string {
			if c.VM.Name != "klimax" || c.Kind.NodeVersion != config.DefaultNodeVersion {
				return "vm.name/nodeVersion"
			}
			return ""
		}},
		{"custom-mirrors", []want{
			{"vm.cpus", "vm.cpus", KeyWritten, "8", ""},
			{"vm.rosetta", "vm.rosetta", KeyWritten, "true", ""},
			{"network.kindBridgeCIDR", "network.bridgeCIDR", KeyWritten, "10.20.0.0/16", ""},
			{"kind.nodeVersion", "kind.nodeVersion", KeyWritten, "v1.34.3", ""},
			{"kind.customDnsResolvers[1]", "kind.customDNSResolvers[1]", KeyWritten, "corp.example -> 8.8.8.8, 8.8.4.4", "implicit resolvers"},
			{"kind.autoMergeKubeconfig", "kind.autoMergeKubeconfig", KeyWritten, "false", ""},
			{"registries.mirrors[1]", "registries.mirrors[1]", KeyWritten, "registry-harbor port 5060 https://harbor.example.com, username robot$ci, password (set)", ""},
			{"registries.mirrors[2]", "registries.mirrors[2]", KeyWritten, "registry-urlcreds port 5070 https://robot:(set)@registry.example.com", ""},
		}, func(c *config.Config) string {
			if c.DNS.EtcdIP != "10.20.255.52" || c.DNS.ServerIP != "10.20.255.53" {
				return "DNS addresses not derived from the bridge: " + c.DNS.EtcdIP
			}
			if c.Registries.Mirrors[1].Password != "s3cr3t-Harb0r-Passw0rd" {
				return "password not migrated"
			}
			return ""
		}},
		{"guest-cache", []want{
			{"vm.name", "vm.name", KeyWritten, "lab", ""},
			{"network.disablePortMirroring", "network.disablePortMirroring", KeyWritten, "false", ""},
			{"registries.cacheStorage", "registries.cacheStorage", KeyWritten, "guest", ""},
		}, nil},
		{"odd-keys", []want{
			{"vm.name", "vm.name", KeyMarinaDefault, "marina", "no klimax VM to adopt"},
			{"vm.cpus", "", KeyDropped, "four", "not a whole number"},
			{"vm.memory", "vm.memory", KeyMarinaDefault, "10GiB", "too small"},
			{"vm.gpus", "", KeyDropped, "2", "unknown to klimax"},
			{"network.kindBridgeCIDR", "network.bridgeCIDR", KeyMarinaDefault, "172.30.0.0/16", "/16"},
			{"kind.customDNSResolvers", "", KeyDropped, "(list of 1)", `klimax's key is "customDnsResolvers"`},
			{"kind.customDnsResolvers[0]", "", KeyDropped, "demo.internal -> 10.0.0.2", "local zone"},
			{"kind.customDnsResolvers[1]", "kind.customDNSResolvers[0]", KeyWritten, "ok.example -> 10.0.0.3", ""},
			{"registries.pasword", "", KeyDropped, "(not shown)", "unknown to klimax"},
			{"registries.mirrors[0].insecure", "", KeyDropped, "(not shown)", "unknown to klimax"},
			{"registries.mirrors[0]", "registries.mirrors[0]", KeyWritten, "registry-ok port 5060 https://ok.example.com", ""},
			{"registries.mirrors[1]", "", KeyDropped, "registry-api port 7005 https://api.example.com", "reserved for cluster API servers"},
			{"registries.mirrors[2]", "", KeyDropped, "registry-half port 5080 https://half.example.com, username joe", "username and password must be set together"},
			{"dns", "", KeyDropped, "(mapping of 1 keys)", "unknown to klimax"},
			{"fleet", "", KeyDropped, "(list of 2)", "unknown to klimax"},
		}, func(c *config.Config) string {
			if len(c.Registries.Mirrors) != 1 || c.Registries.Mirrors[0].Name != "registry-ok" {
				return "mirrors: want only registry-ok"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			home := newHome(t)
			for _, sc := range scenarios {
				if sc.name == tc.scenario {
					sc.build(t, home)
				}
			}
			p, err := NewPlan(home, Options{KubeconfigFiles: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			byKey := map[string]KeyMapping{}
			for _, k := range p.Keys {
				byKey[k.KlimaxKey] = k
			}
			for _, w := range tc.wants {
				k, ok := byKey[w.klimaxKey]
				if !ok {
					t.Errorf("%s: not listed", w.klimaxKey)
					continue
				}
				if k.MarinaKey != w.marinaKey || k.Status != w.status || k.Value != w.value || !strings.Contains(k.Note, w.note) {
					t.Errorf("%s: got {%s %s %q %q}, want {%s %s %q note~%q}", w.klimaxKey, k.MarinaKey, k.Status, k.Value, k.Note, w.marinaKey, w.status, w.value, w.note)
				}
			}
			if tc.config != nil {
				if msg := tc.config(p.Config); msg != "" {
					t.Error(msg)
				}
			}
			if problems := config.Validate(p.Config); len(problems) > 0 {
				t.Errorf("the plan's config is not valid: %v", problems)
			}
		})
	}
}

// TestNoPasswordInOutput renders every scenario's plan in every form and
// applies it: no credential may appear in any of it.
func TestNoPasswordInOutput(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			home := newHome(t)
			sc.build(t, home)
			var out bytes.Buffer
			p, err := NewPlan(home, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(p)
			out.Write(js)
			res, err := Apply(t.Context(), p, func(r StepResult) { out.WriteString(r.Line(home) + "\n") })
			if err != nil {
				out.WriteString(err.Error())
			}
			if res != nil {
				js, _ := json.Marshal(res)
				out.Write(js)
				out.WriteString(res.Summary())
			}
			for _, s := range secrets {
				if strings.Contains(out.String(), s) {
					t.Errorf("output contains the secret %q:\n%s", s, out.String())
				}
			}
		})
	}
}

// TestNoKlimax: without any klimax installation there is nothing to do,
// and the error says so (exit status 2).
func TestNoKlimax(t *testing.T) {
	home := newHome(t)
	_, err := NewPlan(home, Options{})
	if err == nil || !strings.Contains(err.Error(), "nothing to migrate") {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewPlan(home, Options{KlimaxConfig: filepath.Join(home, "nope.yaml")}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("named klimax config: err = %v", err)
	}
	write(t, filepath.Join(home, ".klimax", "config.yaml"), "vm: [1, 2\n", 0o600)
	if _, err := NewPlan(home, Options{}); err == nil || !strings.Contains(err.Error(), "not valid YAML") {
		t.Fatalf("broken YAML: err = %v", err)
	}
}

// TestUserFilesRefused: klimax's config and marina's are read like every
// file a user names: a directory or named pipe is refused at once with its
// path (exit 2) instead of blocking or failing obscurely, and a file over
// userfile.MaxSize is refused instead of read whole.
func TestUserFilesRefused(t *testing.T) {
	home := newHome(t)
	dir := filepath.Join(home, "adir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(home, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(home, "big.yaml")
	write(t, big, "vm:\n  name: "+strings.Repeat("x", userfile.MaxSize)+"\n", 0o600)
	for _, path := range []string{dir, fifo, big} {
		_, err := NewPlan(home, Options{KlimaxConfig: path})
		var ue *userfile.Error
		if !errors.As(err, &ue) || exitcode.Of(err) != 2 || !strings.Contains(err.Error(), path) {
			t.Errorf("klimax config %s: err = %v (exit %d)", path, err, exitcode.Of(err))
		}
	}
	// marina's own config, the file migrate would write: the same rules.
	write(t, filepath.Join(home, ".klimax", "config.yaml"), "vm:\n  name: klimax\n", 0o600)
	_, err := NewPlan(home, Options{ConfigPath: fifo})
	var ue *userfile.Error
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), fifo) {
		t.Errorf("marina config is a named pipe: err = %v", err)
	}
}
