package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/test/golden"
)

// load runs Load against testdata or a temp file, isolated from the caller's
// environment and home.
func load(t *testing.T, path string, sets ...string) (*Loaded, error) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "MARINA_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	return Load(LoadOptions{Path: path, Sets: sets, Home: t.TempDir()})
}

func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("want *ValidationError, got %T: %v", err, err)
	}
	return verr.Problems
}

func TestDefaultsAreValid(t *testing.T) {
	if ps := Validate(Default()); len(ps) != 0 {
		t.Fatalf("defaults have problems: %v", ps)
	}
	l, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if l.FileExists {
		t.Fatal("no file expected in a fresh home")
	}
	if !reflect.DeepEqual(l.Config.Registries.Mirrors, DefaultMirrors()) {
		t.Fatalf("mirrors = %+v", l.Config.Registries.Mirrors)
	}
	for path, s := range l.Sources {
		if s.Kind != FromDefault {
			t.Errorf("%s: source %v, want default", path, s)
		}
	}
}

func TestTypoNamesKeyLineAndSuggestion(t *testing.T) {
	_, err := load(t, "testdata/typo.yaml")
	got := problems(t, err)
	want := []struct{ path, msg, where string }{
		{"vm.cpu", `unknown key "cpu"; did you mean "cpus"?`, "testdata/typo.yaml:4:3"},
		{"vm.zone", `unknown key "zone"; did you mean "dns.zone"? (it belongs under dns:)`, "testdata/typo.yaml:5:3"},
		{"network.bridgeCidr", `unknown key "bridgeCidr"; did you mean "bridgeCIDR"? (keys are case-sensitive)`, "testdata/typo.yaml:7:3"},
		{"kind.autoMergeKubeconfig", `must be true or false, got "yes-please"`, "testdata/typo.yaml:9:24"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Path != w.path || got[i].Message != w.msg || got[i].Where != w.where {
			t.Errorf("problem %d = %+v\nwant path=%s msg=%s where=%s", i, got[i], w.path, w.msg, w.where)
		}
	}
}

func TestFiveProblemsReportedAtOnce(t *testing.T) {
	_, err := load(t, "testdata/five-problems.yaml")
	got := problems(t, err)
	wantPaths := []string{"vm.cpus", "vm.memory", "network.bridgeCIDR", "registries.mirrors[0].name", "registries.mirrors[1].port"}
	var paths []string
	for _, p := range got {
		paths = append(paths, p.Path)
		if p.Where == "" {
			t.Errorf("%s: no location", p.Path)
		}
	}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Fatalf("paths = %v, want %v\n%v", paths, wantPaths, err)
	}
	msg := err.Error()
	for _, s := range []string{"5 problems", "registry-quay-io", "/16", "10GiB"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error text lacks %q:\n%s", s, msg)
		}
	}
}

func TestFullFileDecodesAndKeepsPluginConfigCase(t *testing.T) {
	l, err := load(t, "testdata/full.yaml", "vm.cpus=8", "plugins.acme-addon.config.extra.flag=true")
	if err != nil {
		t.Fatal(err)
	}
	c := l.Config
	if c.VM.Name != "lab" || c.VM.Driver != "host" || c.VM.Memory != "12GiB" {
		t.Errorf("vm = %+v", c.VM)
	}
	if c.VM.CPUs != 8 || l.Sources["vm.cpus"].Kind != FromFlag {
		t.Errorf("--set must win: cpus=%d source=%v", c.VM.CPUs, l.Sources["vm.cpus"])
	}
	if len(c.Registries.Mirrors) != 0 {
		t.Errorf("mirrors: [] must disable every mirror, got %v", c.Registries.Mirrors)
	}
	if c.DNS.EtcdIP != "172.31.255.52" || c.DNS.ServerIP != "172.31.255.53" {
		t.Errorf("DNS IPs must follow the bridge: %s %s", c.DNS.EtcdIP, c.DNS.ServerIP)
	}
	if c.Plugins["metallb"].Enabled || !c.Plugins["coredns"].Enabled {
		t.Errorf("plugins = %+v", c.Plugins)
	}
	addon := c.Plugins["acme-addon"]
	if !addon.Enabled || addon.Version != "^1.2" || addon.Timeout != 90*time.Second {
		t.Errorf("acme-addon = %+v", addon)
	}
	wantCfg := map[string]any{"issuerName": "Local", "nested": map[string]any{"depth": 2}, "extra": map[string]any{"flag": true}}
	if !reflect.DeepEqual(addon.Config, wantCfg) {
		t.Errorf("plugin config = %#v, want %#v", addon.Config, wantCfg)
	}
	if got := l.Sources["images.registry"]; got.Kind != FromFile || got.Detail != "testdata/full.yaml:29:3" {
		t.Errorf("images.registry source = %v", got)
	}
	if got := l.Sources["plugins.acme-addon.version"]; got.Kind != FromFile {
		t.Errorf("plugin version source = %v", got)
	}
	if c.Kind.CustomDNSResolvers[0].Resolvers[1] != "10.0.0.3:5353" {
		t.Errorf("resolvers = %v", c.Kind.CustomDNSResolvers)
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("vm:\n  cpus: 3\n  memory: 8GiB\n  disk: 50GiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "MARINA_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	t.Setenv("MARINA_VM_CPUS", "5")
	t.Setenv("MARINA_VM_MEMORY", "9GiB")
	l, err := Load(LoadOptions{Path: path, Sets: []string{"vm.cpus=7"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key  string
		got  any
		want any
		kind SourceKind
	}{
		{"vm.cpus", l.Config.VM.CPUs, 7, FromFlag},
		{"vm.memory", l.Config.VM.Memory, "9GiB", FromEnv},
		{"vm.disk", l.Config.VM.Disk, "50GiB", FromFile},
		{"vm.name", l.Config.VM.Name, "marina", FromDefault},
	}
	for _, c := range cases {
		if c.got != c.want || l.Sources[c.key].Kind != c.kind {
			t.Errorf("%s = %v from %v, want %v from %s", c.key, c.got, l.Sources[c.key], c.want, c.kind)
		}
	}
}

func TestEnvAndSetErrors(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "MARINA_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	t.Setenv("MARINA_VM_CPUS", "four")
	t.Setenv("MARINA_VM_CPU", "4")
	l, err := Load(LoadOptions{Home: t.TempDir(), Sets: []string{"vm.cpu=2", "registries.mirrors=x", "novalue", "vm.rosetta=maybe"}})
	got := problems(t, err)
	want := map[string]string{
		"vm.cpus":            `must be an integer, got "four"`,
		"vm.cpu":             `unknown key; did you mean "vm.cpus"?`,
		"registries.mirrors": "lists and sections cannot be set with --set; set them in the config file",
		"novalue":            "--set needs key=value, e.g. --set vm.cpus=6",
		"vm.rosetta":         `must be true or false, got "maybe"`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for _, p := range got {
		if want[p.Path] != p.Message {
			t.Errorf("%s: %q, want %q", p.Path, p.Message, want[p.Path])
		}
	}
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "MARINA_VM_CPU sets no config key; did you mean MARINA_VM_CPUS?") {
		t.Errorf("warnings = %v", l.Warnings)
	}
}

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		path   string
		substr string
	}{
		{"vm name", func(c *Config) { c.VM.Name = "My VM" }, "vm.name", "not a valid VM name"},
		{"driver", func(c *Config) { c.VM.Driver = "qemu" }, "vm.driver", "auto, lima, host"},
		{"memory small", func(c *Config) { c.VM.Memory = "1GiB" }, "vm.memory", "too small"},
		{"disk unparsable", func(c *Config) { c.VM.Disk = "big" }, "vm.disk", "not a size"},
		{"start timeout zero", func(c *Config) { c.VM.StartTimeout = 0 }, "vm.startTimeout", "positive duration"},
		{"start timeout negative", func(c *Config) { c.VM.StartTimeout = -time.Minute }, "vm.startTimeout", "got -1m0s"},
		{"bad cidr", func(c *Config) { c.Network.BridgeCIDR = "172.30.0.0" }, "network.bridgeCIDR", "not a CIDR"},
		{"not /16", func(c *Config) { c.Network.BridgeCIDR = "172.30.0.0/20" }, "network.bridgeCIDR", "needs a /16"},
		{"host bits", func(c *Config) { c.Network.BridgeCIDR = "172.30.1.0/16" }, "network.bridgeCIDR", "write 172.30.0.0/16"},
		{"ipv6", func(c *Config) { c.Network.BridgeCIDR = "fd00::/16" }, "network.bridgeCIDR", "not IPv4"},
		{"zone", func(c *Config) { c.DNS.Zone = "Demo_Internal" }, "dns.zone", "not a valid DNS domain"},
		{"dns ip outside", func(c *Config) { c.DNS.ServerIP = "10.0.0.53" }, "dns.serverIP", "outside network.bridgeCIDR"},
		{"dns ip in pool", func(c *Config) { c.DNS.EtcdIP = "172.30.5.20" }, "dns.etcdIP", "MetalLB pool 172.30.5.16-172.30.5.254 of cluster slot 5"},
		{"dns ip in docker range", func(c *Config) { c.DNS.EtcdIP = "172.30.130.9" }, "dns.etcdIP", "dynamic range"},
		{"dns ips equal", func(c *Config) { c.DNS.ServerIP = c.DNS.EtcdIP }, "dns.serverIP", "different addresses"},
		{"node version", func(c *Config) { c.Kind.NodeVersion = "1.37" }, "kind.nodeVersion", "v1.2.3"},
		{"resolver", func(c *Config) {
			c.Kind.CustomDNSResolvers = []DomainResolver{{Domain: "example.dev", Resolvers: []string{"dns.google"}}}
		}, "kind.customDNSResolvers[0].resolvers[0]", "not an IP"},
		{"resolver zone", func(c *Config) {
			c.Kind.CustomDNSResolvers = []DomainResolver{{Domain: "demo.internal", Resolvers: []string{"1.1.1.1"}}}
		}, "kind.customDNSResolvers[0].domain", "already forwards"},
		{"cache", func(c *Config) { c.Registries.CacheStorage = "s3" }, "registries.cacheStorage", "host"},
		{"mirror port range", func(c *Config) { c.Registries.Mirrors[0].Port = 70000 }, "registries.mirrors[0].port", "out of range"},
		{"mirror api port", func(c *Config) { c.Registries.Mirrors[0].Port = 7005 }, "registries.mirrors[0].port", "reserved for cluster API"},
		{"mirror dup name", func(c *Config) { c.Registries.Mirrors[1].Name = c.Registries.Mirrors[0].Name }, "registries.mirrors[1].name", "already used"},
		{"mirror hostname", func(c *Config) { c.Registries.Mirrors[0].Name = "ghcr.io" }, "registries.mirrors[0].name", `"registry-ghcr-io"`},
		{"mirror url", func(c *Config) { c.Registries.Mirrors[0].RemoteURL = "quay.io" }, "registries.mirrors[0].remoteURL", "not an http(s) URL"},
		{"mirror creds", func(c *Config) { c.Registries.Mirrors[0].Username = "u" }, "registries.mirrors[0]", "together"},
		{"plugin constraint", func(c *Config) { c.Plugins["x"] = PluginConfig{Version: "one"} }, "plugins.x.version", "not a semver constraint"},
		{"image", func(c *Config) { c.Images.Registry = "Not An Image" }, "images.registry", "not an image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			ps := Validate(c)
			if len(ps) != 1 {
				t.Fatalf("want exactly 1 problem, got %v", ps)
			}
			if ps[0].Path != tt.path || !strings.Contains(ps[0].Message, tt.substr) {
				t.Fatalf("got %v, want %s containing %q", ps[0], tt.path, tt.substr)
			}
		})
	}
}

func TestStrictStructure(t *testing.T) {
	tests := []struct{ name, yaml, path, substr string }{
		{"duplicate key", "vm:\n  cpus: 2\n  cpus: 3\n", "vm.cpus", "duplicate key"},
		{"section not mapping", "vm: 4\n", "vm", "must be a mapping"},
		{"list not list", "registries:\n  mirrors: registry-x\n", "registries.mirrors", "must be a list"},
		{"unknown mirror key", "registries:\n  mirrors:\n    - name: registry-x\n      port: 5000\n      remoteURL: https://x.io\n      remoteUrl: https://y.io\n", "registries.mirrors[0].remoteUrl", `did you mean "remoteURL"?`},
		{"bad plugin name", "plugins:\n  My_Plugin:\n    enabled: true\n", "plugins.My_Plugin", "not a valid plugin name"},
		{"bad duration", "plugins:\n  metallb:\n    timeout: soon\n", "plugins.metallb.timeout", "duration"},
		{"not yaml", "vm: [\n", "(file)", "not valid YAML"},
		{"unknown top", "vms:\n  cpus: 2\n", "vms", `did you mean "vm"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := load(t, path)
			ps := problems(t, err)
			for _, p := range ps {
				if p.Path == tt.path && strings.Contains(p.Message, tt.substr) {
					return
				}
			}
			t.Fatalf("no problem %s ~ %q in %v", tt.path, tt.substr, ps)
		})
	}
}

func TestExplicitMissingFileIsAnError(t *testing.T) {
	_, err := load(t, filepath.Join(t.TempDir(), "nope.yaml"))
	ps := problems(t, err)
	if !strings.Contains(ps[0].Message, "marina config init") {
		t.Fatalf("got %v", ps)
	}
}

func TestInitTemplateRoundTrips(t *testing.T) {
	b, err := InitTemplate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := load(t, path)
	if err != nil {
		t.Fatalf("the init template must load cleanly: %v", err)
	}
	if !reflect.DeepEqual(l.Config, Default()) {
		t.Fatalf("template decodes to %+v, want the defaults", l.Config)
	}
	for _, s := range []string{"# Virtual CPUs of the VM.", "# Pull-through mirrors; omit for the defaults, [] for none."} {
		if !strings.Contains(string(b), s) {
			t.Errorf("template lacks comment %q", s)
		}
	}
}

func TestViewRedactsAndAnnotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	y := "registries:\n  mirrors:\n    - name: registry-private\n      port: 5060\n      remoteURL: https://r.example.com\n      username: bob\n      password: hunter2\n"
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := load(t, path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.AnnotatedYAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), Redacted) {
		t.Fatalf("password not redacted:\n%s", out)
	}
	if !strings.Contains(string(out), "mirrors: # file "+path+":2:3") || !strings.Contains(string(out), "cpus: 4 # default") {
		t.Fatalf("annotations missing:\n%s", out)
	}
	if l.Config.Registries.Mirrors[0].Password != "hunter2" {
		t.Fatal("Redact must not modify the loaded config")
	}
	for _, e := range l.Entries() {
		if strings.Contains(fmt.Sprintf("%+v", e.Value), "hunter2") {
			t.Fatal("entries leak the password")
		}
	}
}

// TestReferenceUpToDate fails when docs/config.md is stale; `make docs` (go test -run
// TestReferenceUpToDate -update) rewrites it.
func TestReferenceUpToDate(t *testing.T) {
	golden.Check(t, "../../docs/config.md", []byte(Reference()))
}

func TestSetPluginEnabledKeepsCommentsAndValidates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	orig := "# my lab\nvm:\n  cpus: 6 # more cores\nplugins:\n  metallb:\n    enabled: true\n"
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SetPluginEnabled(path, "metallb", false); err != nil {
		t.Fatal(err)
	}
	if err := SetPluginEnabled(path, "acme", true); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	for _, want := range []string{"# my lab", "cpus: 6 # more cores", "metallb:\n    enabled: false", "acme:\n    enabled: true"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("edited file lacks %q:\n%s", want, got)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode changed to %v", st.Mode().Perm())
	}
	l, err := load(t, path)
	if err != nil || l.Config.Plugins["metallb"].Enabled || !l.Config.Plugins["acme"].Enabled {
		t.Fatalf("reload: %v %+v", err, l)
	}

	// A file that is already invalid is not touched.
	bad := "vm:\n  cpu: 2\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SetPluginEnabled(path, "acme", true); err == nil || !strings.Contains(err.Error(), "was not changed") {
		t.Fatalf("invalid file: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != bad {
		t.Fatalf("invalid file was modified:\n%s", got)
	}
	// A missing file is created with just the setting.
	fresh := filepath.Join(dir, "sub", "new.yaml")
	if err := SetPluginEnabled(fresh, "acme", true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(fresh); !strings.Contains(string(got), "acme:\n    enabled: true") {
		t.Fatalf("new file:\n%s", got)
	}
	if err := SetPluginEnabled(fresh, "Bad_Name", true); err == nil {
		t.Fatal("bad name accepted")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".marina-config-check") {
			t.Fatalf("temp file left behind: %s", e.Name())
		}
	}
}

// TestStartTimeoutKey: vm.startTimeout defaults to Lima's 10 minutes and is
// set as a duration from the file, the environment or --set.
func TestStartTimeoutKey(t *testing.T) {
	home := t.TempDir()
	l, err := Load(LoadOptions{Home: home})
	if err != nil || l.Config.VM.StartTimeout != 10*time.Minute {
		t.Fatalf("default: %v, %v", l, err)
	}
	t.Setenv("MARINA_VM_STARTTIMEOUT", "20m")
	if l, err = Load(LoadOptions{Home: home}); err != nil || l.Config.VM.StartTimeout != 20*time.Minute {
		t.Fatalf("from the environment: %v", err)
	}
	if l, err = Load(LoadOptions{Home: home, Sets: []string{"vm.startTimeout=90s"}}); err != nil || l.Config.VM.StartTimeout != 90*time.Second {
		t.Fatalf("from --set: %v", err)
	}
	_, err = Load(LoadOptions{Home: home, Sets: []string{"vm.startTimeout=0s"}})
	if ps := problems(t, err); len(ps) != 1 || ps[0].Path != "vm.startTimeout" {
		t.Fatalf("0s: %v", ps)
	}
	_, err = Load(LoadOptions{Home: home, Sets: []string{"vm.startTimeout=soon"}})
	if ps := problems(t, err); len(ps) != 1 || ps[0].Path != "vm.startTimeout" {
		t.Fatalf("not a duration: %v", ps)
	}
}

// TestSetPluginEnabledKeepsBlockScalars: a plugin's config holding a
// literal block whose first line begins with a tab (a script, written
// with an indentation indicator as YAML requires) survives
// `marina plugin disable`: yaml.v3 would write it back as a block it
// cannot parse (GuardYAML), so the edit failed; now it is double-quoted and
// reads back the same.
func TestSetPluginEnabledKeepsBlockScalars(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	orig := "plugins:\n  acme:\n    enabled: true\n    config:\n      steps:\n        - run: |2\n            \techo hi\n            done\n"
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := load(t, path)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(l *Loaded) any { return l.Config.Plugins["acme"].Config["steps"] }
	if run := steps(before).([]any)[0].(map[string]any)["run"]; run != "\techo hi\ndone\n" {
		t.Fatalf("the file reads %q", run)
	}
	if err := SetPluginEnabled(path, "acme", false); err != nil {
		t.Fatal(err)
	}
	after, err := load(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Config.Plugins["acme"].Enabled || !reflect.DeepEqual(steps(after), steps(before)) {
		b, _ := os.ReadFile(path)
		t.Fatalf("after the edit: enabled %v, steps %#v\n%s", after.Config.Plugins["acme"].Enabled, steps(after), b)
	}
}

// TestSetPluginEnabledKeepsLayout (issue 26): `plugin enable` and
// `disable` change the one value (or insert the lines they need) and leave
// every other line as the user wrote it — flow lists unquoted, four-space
// indentation, comments — where they used to re-encode the whole file.
func TestSetPluginEnabledKeepsLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, enabled bool, want string) {
		t.Helper()
		if err := SetPluginEnabled(path, name, enabled); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != want {
			t.Fatalf("after %s=%v:\n%s\nwant:\n%s", name, enabled, got, want)
		}
	}
	orig := `# my lab
pluginSources: [oci://registry.example.com/team, oci://registry.example.com/contrib]
plugins:
    # the load balancer
    metallb:
        enabled: true   # always
    acme: {enabled: false, version: ^1.2}
    quota:
        version: ">=1.0"
        config: {limits: [1, 2]}
`
	write(orig)
	check("metallb", false, strings.Replace(orig, "enabled: true   # always", "enabled: false   # always", 1))
	check("acme", true, strings.Replace(strings.Replace(orig, "enabled: true   # always", "enabled: false   # always", 1), "{enabled: false,", "{enabled: true,", 1))
	before, _ := os.ReadFile(path)
	check("quota", true, strings.Replace(string(before), "    quota:\n", "    quota:\n        enabled: true\n", 1))
	before, _ = os.ReadFile(path)
	check("new", true, strings.Replace(string(before), "plugins:\n", "plugins:\n    new:\n        enabled: true\n", 1))

	noPlugins := "vm:\n  cpus: 4 # four\npluginSources: [oci://r.example.com/x]\n"
	write(noPlugins)
	check("acme", true, noPlugins+"plugins:\n  acme:\n    enabled: true\n")
	noNewline := "vm: {cpus: 4}"
	write(noNewline)
	check("acme", false, noNewline+"\nplugins:\n  acme:\n    enabled: false\n")
}
