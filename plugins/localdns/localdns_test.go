package localdns

import (
	"errors"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
	"github.com/bcollard/marina/sdk/plugintest"
	"github.com/bcollard/marina/test/golden"
)

// TestCorefileGolden renders the CoreDNS configuration for the default lab
// and for the options that change it.
func TestCorefileGolden(t *testing.T) {
	tests := []struct {
		golden string
		zone   string
		etcdIP string
		opt    serverOptions
	}{
		{golden: "default.Corefile", zone: "demo.internal", etcdIP: "172.30.255.52"},
		{golden: "cache-log.Corefile", zone: "demo.internal", etcdIP: "172.30.255.52", opt: serverOptions{CacheSeconds: 5, LogQueries: true}},
		{golden: "custom-zone.Corefile", zone: "lab.example.test", etcdIP: "10.9.255.52"},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			got, err := serverCorefile(tt.zone, netip.MustParseAddr(tt.etcdIP), tt.opt).render()
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/"+tt.golden, got)
			// Never an open resolver: one server block, for the zone only.
			if strings.Contains(string(got), "\n.:") || strings.Contains(string(got), "forward") {
				t.Errorf("Corefile has a catch-all block or forwards:\n%s", got)
			}
		})
	}
}

// TestRenderRefusesUnsafeTokens: a word that could change the Corefile's
// structure (a brace, a space, a quote, a comment, a placeholder) is refused.
func TestRenderRefusesUnsafeTokens(t *testing.T) {
	for _, word := range []string{"a}", "{a", "a b", `"a"`, "#a", "{$HOME}", "a\nb", "", `a\b`} {
		cf := corefile{blocks: []serverBlock{{keys: []string{"demo.internal:53"}, directives: []directive{{name: "etcd", args: []string{word}}}}}}
		if out, err := cf.render(); err == nil {
			t.Errorf("render with word %q = %q, want an error", word, out)
		}
	}
	if _, err := (corefile{blocks: []serverBlock{{}}}).render(); err == nil {
		t.Error("render of a block without keys succeeded, want an error")
	}
}

// TestParseZone checks the zone table: valid names come back canonical,
// invalid ones are refused with an error that names dns.zone, the reason and
// the fix.
func TestParseZone(t *testing.T) {
	tests := []struct {
		in, want string
		reason   string // substring of the error; "" means valid
	}{
		{in: "demo.internal", want: "demo.internal"},
		{in: "Demo.Internal.", want: "demo.internal"},
		{in: "internal", want: "internal"},
		{in: "a-1.b2.test", want: "a-1.b2.test"},
		{in: strings.Repeat("a", 63) + ".internal", want: strings.Repeat("a", 63) + ".internal"},
		{in: "", reason: "dns.zone is empty"},
		{in: "  ", reason: "dns.zone is empty"},
		{in: ".", reason: "root zone"},
		{in: "demo..internal", reason: "label 2 is empty"},
		{in: ".demo.internal", reason: "label 1 is empty"},
		{in: "-demo.internal", reason: `starts or ends with '-'`},
		{in: "demo-.internal", reason: `starts or ends with '-'`},
		{in: "demo_x.internal", reason: `character '_'`},
		{in: "demo internal", reason: `character ' '`},
		{in: "demo.internal}", reason: `character '}'`},
		{in: "{$ZONE}", reason: `character '{'`},
		{in: "démo.internal", reason: `character 'é'`},
		{in: strings.Repeat("a", 64) + ".internal", reason: "64 characters long, the limit is 63"},
		{in: strings.Repeat(strings.Repeat("a", 60)+".", 5) + "internal", reason: "the limit is 253"},
		{in: "10.0.0.1", reason: "all digits"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseZone(tt.in)
			if tt.reason == "" {
				if err != nil || got != tt.want {
					t.Fatalf("parseZone(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("parseZone(%q) = %q, want an error about %q", tt.in, got, tt.reason)
			}
			for _, part := range []string{"dns.zone", tt.reason, "fix: set dns.zone", "demo.internal"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
		})
	}
}

// FuzzParseZone: parseZone never panics, and whatever it accepts renders
// into a Corefile (it is a safe word) and is canonical.
func FuzzParseZone(f *testing.F) {
	for _, s := range []string{"demo.internal", "A.b.", "..", "x{y}", "a b", "-", "1.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		z, err := parseZone(s)
		if err != nil {
			return
		}
		if again, err := parseZone(z); err != nil || again != z {
			t.Fatalf("parseZone(%q) = %q, not canonical (%q, %v)", s, z, again, err)
		}
		if _, err := serverCorefile(z, netip.MustParseAddr("172.30.255.52"), serverOptions{}).render(); err != nil {
			t.Fatalf("accepted zone %q does not render: %v", z, err)
		}
	})
}

// testEnv is plugintest's default lab with a Docker endpoint that answers
// nothing (a socket path that does not exist), so tier-0 tests never reach
// an engine.
func testEnv(t *testing.T) func(*sdk.Env) {
	sock := "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")
	return func(e *sdk.Env) { e.DockerHost = sock }
}

func newLabFor(t *testing.T, config string, edit func(*sdk.Env)) (*lab, error) {
	t.Helper()
	env := plugintest.DefaultEnv(t.TempDir())
	if edit != nil {
		edit(&env)
	}
	var cfgJSON []byte
	if config != "" {
		cfgJSON = []byte(config)
	}
	return newLab(sdk.NewRequest(sdk.PostUp, env, nil, nil, cfgJSON, defaultConfig(), nil, nil))
}

// TestSpecs checks the containers the plugin asks for: images (defaults and
// overrides), the etcd entrypoint and flags, the data volume, the addresses,
// the restart policy, labels and the Corefile placed in CoreDNS.
func TestSpecs(t *testing.T) {
	l, err := newLabFor(t, `{"labels":{"team":"dns"},"cacheSeconds":2}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	etcd := l.etcdSpec()
	wantEtcd := container.Spec{
		Name:       "marina-dns-etcd",
		Image:      DefaultEtcdImage,
		Entrypoint: []string{"/usr/local/bin/etcd"},
		Cmd: []string{"--name", "marina-dns", "--data-dir", "/var/lib/etcd/data",
			"--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://172.30.255.52:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "marina-dns=http://127.0.0.1:2380",
			"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1h"},
		Labels:  map[string]string{LabelComponent: "localdns-etcd", "team": "dns"},
		Network: "kind",
		IP:      "172.30.255.52",
		Mounts:  []container.Mount{{Type: "volume", Source: "marina-dns-etcd-data", Target: "/var/lib/etcd"}},
		Restart: "always",
	}
	if !reflect.DeepEqual(etcd, wantEtcd) {
		t.Errorf("etcd spec = %+v\nwant %+v", etcd, wantEtcd)
	}
	server, err := l.serverSpec()
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := l.corefile()
	wantServer := container.Spec{
		Name:    "marina-dns",
		Image:   DefaultServerImage,
		Cmd:     []string{"-conf", "/etc/coredns/Corefile"},
		Labels:  map[string]string{LabelComponent: "localdns-server", "team": "dns"},
		Network: "kind",
		IP:      "172.30.255.53",
		Files:   []container.File{{Path: "/etc/coredns/Corefile", Content: cf, Mode: 0o644}},
		Restart: "always",
	}
	if !reflect.DeepEqual(server, wantServer) {
		t.Errorf("server spec = %+v\nwant %+v", server, wantServer)
	}
	if !strings.Contains(string(cf), "cache 2\n") || !strings.Contains(string(cf), "endpoint http://172.30.255.52:2379\n") {
		t.Errorf("Corefile does not follow the config:\n%s", cf)
	}
	for _, s := range []container.Spec{etcd, server} {
		if err := s.Validate(); err != nil {
			t.Errorf("spec %s: %v", s.Name, err)
		}
	}

	// Images come from Env.Images when set, and names from the config.
	l, err = newLabFor(t, `{"etcdContainer":"e1","serverContainer":"s1"}`, func(e *sdk.Env) {
		e.Images = map[string]string{ImageKeyEtcd: "mirror/etcd:x", ImageKeyServer: "mirror/coredns:y", "registry": "other"}
	})
	if err != nil {
		t.Fatal(err)
	}
	server, _ = l.serverSpec()
	if e := l.etcdSpec(); e.Image != "mirror/etcd:x" || e.Name != "e1" || e.Mounts[0].Source != "e1-data" || server.Image != "mirror/coredns:y" || server.Name != "s1" {
		t.Errorf("overrides not applied: etcd %s %s %v, server %s %s", e.Name, e.Image, e.Mounts, server.Name, server.Image)
	}
}

// TestEnvErrors: a wrong global setting fails the hook before Docker is
// contacted, with an error naming the setting and the fix.
func TestEnvErrors(t *testing.T) {
	h := plugintest.New(t, New())
	tests := []struct {
		name string
		edit func(*sdk.Env)
		want []string
	}{
		{name: "bad zone", edit: func(e *sdk.Env) { e.DNSZone = "demo..internal" }, want: []string{"dns.zone", "label 2 is empty", "fix: set dns.zone"}},
		{name: "bad etcd ip", edit: func(e *sdk.Env) { e.DNSEtcdIP = "172.30.255" }, want: []string{`dns.etcdIP "172.30.255" is not an IPv4 address`, "set dns.etcdIP"}},
		{name: "ipv6 server", edit: func(e *sdk.Env) { e.DNSServerIP = "fd00::53" }, want: []string{`dns.serverIP "fd00::53" is not an IPv4 address`}},
		{name: "off the bridge", edit: func(e *sdk.Env) { e.DNSServerIP = "10.0.0.53" }, want: []string{"dns.serverIP 10.0.0.53 is not on the bridge network 172.30.0.0/16"}},
		{name: "same address", edit: func(e *sdk.Env) { e.DNSServerIP = e.DNSEtcdIP }, want: []string{"dns.etcdIP and dns.serverIP are both 172.30.255.52"}},
		{name: "no network", edit: func(e *sdk.Env) { e.NetworkName = "" }, want: []string{"Env.NetworkName is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, hook := range []sdk.Hook{sdk.PostUp, sdk.PreDestroy} {
				res, err := h.Run(hook, plugintest.WithEnv(testEnv(t)), plugintest.WithEnv(tt.edit))
				if err == nil {
					t.Fatalf("%s = %+v, want an error", hook, res)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s error %q does not contain %q", hook, err, w)
					}
				}
				if strings.Contains(err.Error(), "does not answer") {
					t.Errorf("%s error %q comes from connecting to Docker: validation must come first", hook, err)
				}
			}
		})
	}
}

// TestConfigValidation checks the config's diagnostics through the plugin's
// ValidateConfig RPC, as marina calls it before anything changes.
func TestConfigValidation(t *testing.T) {
	h := plugintest.New(t, New())
	tests := []struct {
		name   string
		config string
		want   []sdk.Diagnostic
	}{
		{name: "defaults"},
		{name: "all set", config: `{"etcdContainer":"a","serverContainer":"b","cacheSeconds":30,"logQueries":true,"readyTimeout":"2m","labels":{"x":"y"}}`},
		{name: "bad names", config: `{"etcdContainer":"-x","serverContainer":"a b"}`, want: []sdk.Diagnostic{
			sdk.Errorf("etcdContainer", `"-x" is not a Docker container name: use letters, digits, '_', '.' and '-', starting with a letter or digit (at most 128)`),
			sdk.Errorf("serverContainer", `"a b" is not a Docker container name: use letters, digits, '_', '.' and '-', starting with a letter or digit (at most 128)`),
		}},
		{name: "same names", config: `{"etcdContainer":"dns","serverContainer":"dns"}`, want: []sdk.Diagnostic{
			sdk.Errorf("serverContainer", `is "dns", the same as etcdContainer: the two containers need different names`),
		}},
		{name: "numbers", config: `{"cacheSeconds":-1,"readyTimeout":"1h"}`, want: []sdk.Diagnostic{
			sdk.Errorf("cacheSeconds", "must be at least 0, got -1"),
			sdk.Errorf("readyTimeout", "must be at most 10m0s, got 1h"),
		}},
		{name: "reserved label", config: `{"labels":{"marina.dev/spec":"x"}}`, want: []sdk.Diagnostic{
			sdk.Errorf("labels.marina.dev/spec", "is set by marina and cannot be overridden; remove it"),
		}},
		{name: "unknown field", config: `{"zone":"x.test"}`, want: []sdk.Diagnostic{
			sdk.Errorf("zone", `unknown field "zone"`),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.ValidateConfig(tt.config)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ValidateConfig(%s) = %+v\nwant %+v", tt.config, got, tt.want)
			}
		})
	}
}

// TestDescribe: the plugin says what it is, which hooks it implements, what
// it publishes and what it needs from the host.
func TestDescribe(t *testing.T) {
	d := plugintest.New(t, New()).Describe()
	if d.Name != "localdns" || d.Version != Version {
		t.Errorf("name/version = %s %s", d.Name, d.Version)
	}
	if !reflect.DeepEqual(d.Hooks, []sdk.Hook{sdk.PostUp, sdk.PreDestroy}) {
		t.Errorf("hooks = %v, want [PostUp PreDestroy]", d.Hooks)
	}
	if !reflect.DeepEqual(d.Outputs, []string{"etcdEndpoint", "dnsServer", "zone"}) {
		t.Errorf("outputs = %v", d.Outputs)
	}
	if !reflect.DeepEqual(d.Capabilities, []string{sdk.CapDocker, sdk.CapHostResolver}) {
		t.Errorf("capabilities = %v", d.Capabilities)
	}
}

// TestOutputsAndHostChange checks what PostUp declares for the default lab
// and a custom one (PostUp returns exactly these after its containers are
// up; the tier-2 test checks it end to end).
func TestOutputsAndHostChange(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(*sdk.Env)
		outputs     map[string]string
		resolver    sdk.ResolverChange
		wantWarning bool
	}{
		{name: "default",
			outputs:  map[string]string{"etcdEndpoint": "http://172.30.255.52:2379", "dnsServer": "172.30.255.53", "zone": "demo.internal"},
			resolver: sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53"}}},
		{name: "custom", edit: func(e *sdk.Env) {
			e.DNSZone, e.BridgeCIDR, e.DNSEtcdIP, e.DNSServerIP = "Lab.Test.", "10.9.0.0/16", "10.9.255.52", "10.9.255.53"
		},
			outputs:  map[string]string{"etcdEndpoint": "http://10.9.255.52:2379", "dnsServer": "10.9.255.53", "zone": "lab.test"},
			resolver: sdk.ResolverChange{Domain: "lab.test", Nameservers: []string{"10.9.255.53"}}},
		{name: "mdns zone", edit: func(e *sdk.Env) { e.DNSZone = "lab.local" },
			outputs:     map[string]string{"etcdEndpoint": "http://172.30.255.52:2379", "dnsServer": "172.30.255.53", "zone": "lab.local"},
			resolver:    sdk.ResolverChange{Domain: "lab.local", Nameservers: []string{"172.30.255.53"}},
			wantWarning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := newLabFor(t, "", tt.edit)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.outputs(); !reflect.DeepEqual(got, tt.outputs) {
				t.Errorf("outputs = %v, want %v", got, tt.outputs)
			}
			for _, remove := range []bool{false, true} {
				hc := l.resolverChange(remove)
				want := tt.resolver
				want.Remove = remove
				if hc.Resolver == nil || !reflect.DeepEqual(*hc.Resolver, want) || !strings.Contains(hc.Reason, want.Domain) {
					t.Errorf("resolver change (remove %v) = %+v, want %+v with a reason naming the zone", remove, hc, want)
				}
			}
			if w := l.warnings(); (len(w) > 0) != tt.wantWarning {
				t.Errorf("warnings = %+v, want some: %v", w, tt.wantWarning)
			}
		})
	}
}

// TestDockerUnreachable: PostUp fails with the endpoint and the fix;
// PreDestroy still declares the resolver removal (so destroy can clean the
// host) and warns about what may be left.
func TestDockerUnreachable(t *testing.T) {
	h := plugintest.New(t, New())
	start := time.Now()
	_, err := h.Run(sdk.PostUp, plugintest.WithEnv(testEnv(t)))
	var pe *plugintest.PluginError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "no-docker.sock") {
		t.Fatalf("PostUp without Docker = %v, want an error naming the endpoint", err)
	}
	res, err := h.Run(sdk.PreDestroy, plugintest.WithEnv(testEnv(t)))
	if err != nil {
		t.Fatal(err)
	}
	want := []sdk.HostChange{{
		Resolver: &sdk.ResolverChange{Domain: "demo.internal", Nameservers: []string{"172.30.255.53"}, Remove: true},
		Reason:   "stop sending demo.internal lookups to 172.30.255.53: marina's local DNS is being removed",
	}}
	if !reflect.DeepEqual(res.HostChanges, want) {
		t.Errorf("PreDestroy host changes = %+v, want %+v", res.HostChanges, want)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Detail, "docker rm -f marina-dns marina-dns-etcd && docker volume rm marina-dns-etcd-data") {
		t.Errorf("PreDestroy warnings = %+v, want one with the commands to clean up", res.Warnings)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("failing without Docker took %v", d)
	}
}
