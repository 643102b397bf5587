package localdns_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/plugins/localdns"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// This package's tier-2 network; other packages use other subnets.
const (
	testSubnet   = "172.28.0.0/16"
	testEtcdIP   = "172.28.255.52"
	testServerIP = "172.28.255.53"
)

var dnsServer = netip.AddrPortFrom(netip.MustParseAddr(testServerIP), 53)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// skydnsRecord is the value ExternalDNS's coredns provider writes to etcd
// (with --coredns-strictly-owned it adds the owner).
type skydnsRecord struct {
	Host  string `json:"host"`
	Text  string `json:"text,omitempty"`
	TTL   uint32 `json:"ttl,omitempty"`
	Owner string `json:"owner,omitempty"`
}

// recordKey is where ExternalDNS writes a record for name: the name's labels
// reversed under /skydns, then a random id (one key per target).
func recordKey(name string) string {
	labels := strings.Split(name, ".")
	slices.Reverse(labels)
	return localdns.EtcdPath + "/" + strings.Join(labels, "/") + "/" + randHex(4)
}

// etcdctl runs etcdctl in the plugin's etcd container.
func etcdctl(t *testing.T, container string, args ...string) string {
	t.Helper()
	return dockertest.Exec(t, container, append([]string{"etcdctl"}, args...)...)
}

func putRecord(t *testing.T, etcd, key string, rec skydnsRecord) {
	t.Helper()
	val, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if out := etcdctl(t, etcd, "put", key, string(val)); out != "OK" {
		t.Fatalf("etcdctl put %s: %q, want OK", key, out)
	}
}

// lookup asks the plugin's CoreDNS for the A records of name.
func lookup(name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := dockertest.QueryA(ctx, dnsServer, name)
	var s []string
	for _, a := range addrs {
		s = append(s, a.String())
	}
	slices.Sort(s)
	return s, err
}

// requireA fails unless name resolves to exactly want, now.
func requireA(t *testing.T, name string, want ...string) {
	t.Helper()
	got, err := lookup(name)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("A %s = %v, %v; want %v", name, got, err, want)
	}
}

// requireRcode fails unless the answer for name is the DNS error rcode.
func requireRcode(t *testing.T, name string, rcode int) {
	t.Helper()
	got, err := lookup(name)
	var re *dockertest.RcodeError
	if !errors.As(err, &re) || re.Rcode != rcode {
		t.Fatalf("A %s = %v, %v; want rcode %d and no address", name, got, err, rcode)
	}
}

const (
	rcodeNXDomain = 3
	rcodeRefused  = 5
)

func inspect(t *testing.T, name, format string) string {
	t.Helper()
	return dockertest.Docker(t, "inspect", "--format", format, name)
}

// lab is one localdns under test: unique container names on a test network.
type lab struct {
	etcd, server, volume string
	config               string
	etcdImage, dnsImage  string
	network              string
	zone                 string
}

// opts are the plugintest options that run the plugin against this lab.
func (l *lab) opts() []plugintest.Option {
	return []plugintest.Option{
		plugintest.WithConfig(l.config),
		plugintest.WithEnv(func(e *sdk.Env) {
			e.DockerHost = dockertest.Host()
			e.NetworkName = l.network
			e.BridgeCIDR = testSubnet
			e.Gateway = "172.28.0.1"
			e.DynamicIPRange = "172.28.128.0/18"
			e.DNSEtcdIP, e.DNSServerIP = testEtcdIP, testServerIP
			e.DNSZone = l.zone
			e.Images = map[string]string{"dnsEtcd": l.etcdImage, "dnsServer": l.dnsImage}
		}),
	}
}

func (l *lab) ids(t *testing.T) (etcd, server string) {
	t.Helper()
	return inspect(t, l.etcd, "{{.Id}}"), inspect(t, l.server, "{{.Id}}")
}

// postUp runs PostUp on h and checks what it declares.
func (l *lab) postUp(t *testing.T, h *plugintest.Harness) *sdk.Result {
	t.Helper()
	start := time.Now()
	res, err := h.Run(sdk.PostUp, l.opts()...)
	if err != nil {
		t.Fatalf("PostUp: %v%s", err, h.Stderr())
	}
	t.Logf("PostUp took %s", time.Since(start).Round(time.Millisecond))
	wantOut := map[string]string{"etcdEndpoint": "http://" + testEtcdIP + ":2379", "dnsServer": testServerIP, "zone": l.zone}
	if !reflect.DeepEqual(res.Outputs, wantOut) {
		t.Errorf("outputs = %v, want %v", res.Outputs, wantOut)
	}
	if len(res.HostChanges) != 1 || !reflect.DeepEqual(res.HostChanges[0].Resolver,
		&sdk.ResolverChange{Domain: l.zone, Nameservers: []string{testServerIP}}) || res.HostChanges[0].Reason == "" {
		t.Errorf("host changes = %+v, want the resolver for %s -> %s with a reason", res.HostChanges, l.zone, testServerIP)
	}
	return res
}

// TestLocalDNSOnDocker runs the plugin against the real engine (tier 2):
// PostUp starts etcd and CoreDNS on a test network; records written the way
// ExternalDNS writes them resolve, change and vanish at once; names outside
// the zone are refused; re-running PostUp (in and out of process) touches no
// container; both containers come back after their processes are killed, with
// their records; a new zone or image recreates exactly the container it
// concerns, and records survive etcd's recreation; PreDestroy removes all.
func TestLocalDNSOnDocker(t *testing.T) {
	testStart := time.Now()
	n := dockertest.Network(t, testSubnet)
	suffix := randHex(4)
	labels, err := json.Marshal(dockertest.Labels(t)) // once: a label that changes would recreate
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{
		etcd:      "marina-dns-etcd-test-" + suffix,
		server:    "marina-dns-test-" + suffix,
		etcdImage: dockertest.Image(t, "etcd"),
		dnsImage:  dockertest.Image(t, "coredns"),
		network:   n.Name,
		zone:      "demo.internal",
	}
	l.volume = l.etcd + "-data"
	l.config = fmt.Sprintf(`{"etcdContainer":%q,"serverContainer":%q,"labels":%s}`, l.etcd, l.server, labels)
	dockertest.Cleanup(t, []string{l.server, l.etcd}, []string{l.volume})
	h := plugintest.New(t, localdns.New())

	first := l.postUp(t, h)
	etcdID, serverID := l.ids(t)
	for name, ip := range map[string]string{l.etcd: testEtcdIP, l.server: testServerIP} {
		got := inspect(t, name, `{{.State.Status}} {{.HostConfig.RestartPolicy.Name}} {{(index .NetworkSettings.Networks "`+n.Name+`").IPAddress}}`)
		if want := "running always " + ip; got != want {
			t.Errorf("container %s: %q, want %q", name, got, want)
		}
	}
	if got := inspect(t, l.etcd, `{{range .Mounts}}{{.Name}}:{{.Destination}}{{end}}`); got != l.volume+":/var/lib/etcd" {
		t.Errorf("etcd mounts = %q, want its data volume %s at /var/lib/etcd", got, l.volume)
	}

	const name = "web.default.dev.demo.internal"
	key := recordKey(name)
	if !strings.HasPrefix(key, "/skydns/internal/demo/dev/default/web/") {
		t.Fatalf("record key %s is not where ExternalDNS writes %s", key, name)
	}
	owner := `"heritage=external-dns,external-dns/owner=dev,external-dns/resource=service/default/web"`
	t.Run("records resolve, update and vanish at once", func(t *testing.T) {
		putRecord(t, l.etcd, key, skydnsRecord{Host: "172.30.1.16", Text: owner, TTL: 30, Owner: "dev"})
		requireA(t, name, "172.30.1.16")
		putRecord(t, l.etcd, key, skydnsRecord{Host: "172.30.1.17", Text: owner, TTL: 30, Owner: "dev"})
		requireA(t, name, "172.30.1.17")
		etcdctl(t, l.etcd, "del", key)
		requireRcode(t, name, rcodeNXDomain)
		requireRcode(t, "unknown.demo.internal", rcodeNXDomain)
		// Not an open resolver: a name outside the zone gets no address.
		requireRcode(t, "example.com", rcodeRefused)
		requireRcode(t, "demo.internal.example.com", rcodeRefused)
	})

	t.Run("re-running PostUp changes nothing", func(t *testing.T) {
		started := inspect(t, l.server, "{{.State.StartedAt}} {{.RestartCount}}")
		again := l.postUp(t, h)
		if e, s := l.ids(t); e != etcdID || s != serverID {
			t.Fatalf("container ids after a re-run: etcd %.12s -> %.12s, server %.12s -> %.12s; want unchanged", etcdID, e, serverID, s)
		}
		if got := inspect(t, l.server, "{{.State.StartedAt}} {{.RestartCount}}"); got != started {
			t.Errorf("CoreDNS restarted on a re-run: %s -> %s", started, got)
		}
		if !reflect.DeepEqual(again, first) {
			t.Errorf("second PostUp declared %+v, first %+v", again, first)
		}

		start := time.Now()
		bin := plugintest.Build(t, "./testdata/plugin")
		t.Logf("plugin binary built in %s", time.Since(start).Round(time.Millisecond))
		out := plugintest.Start(t, bin)
		res := l.postUp(t, out)
		if e, s := l.ids(t); e != etcdID || s != serverID {
			t.Fatalf("container ids after an out-of-process run: etcd %.12s -> %.12s, server %.12s -> %.12s; want unchanged", etcdID, e, serverID, s)
		}
		if !reflect.DeepEqual(res, first) {
			t.Errorf("out-of-process PostUp declared %+v, in process %+v", res, first)
		}
	})

	key = recordKey(name)
	putRecord(t, l.etcd, key, skydnsRecord{Host: "172.30.1.18", Text: owner, TTL: 30})
	requireA(t, name, "172.30.1.18")

	t.Run("killed containers come back with their records", func(t *testing.T) {
		before := map[string]string{}
		for _, c := range []string{l.etcd, l.server} {
			pid, err := strconv.Atoi(inspect(t, c, "{{.State.Pid}}"))
			if err != nil || pid <= 1 {
				t.Fatalf("pid of %s = %d, %v", c, pid, err)
			}
			before[c] = inspect(t, c, "{{.RestartCount}}")
			// SIGKILL from the host, as a crash: `docker kill` would count as a
			// manual stop on some Docker versions, which no policy restarts.
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -9 %d (%s): %v", pid, c, err)
			}
		}
		start := time.Now()
		dockertest.WaitFor(t, 60*time.Second, 250*time.Millisecond, "both containers restarted and "+name+" resolving", func() error {
			for _, c := range []string{l.etcd, l.server} {
				if got := inspect(t, c, "{{.State.Running}} {{.RestartCount}}"); got == "true "+before[c] || !strings.HasPrefix(got, "true ") {
					return fmt.Errorf("%s: running, restarts = %s (before: %s)", c, got, before[c])
				}
			}
			got, err := lookup(name)
			if err != nil || !slices.Equal(got, []string{"172.30.1.18"}) {
				return fmt.Errorf("A %s = %v, %v", name, got, err)
			}
			return nil
		})
		t.Logf("back and resolving %s after the kill", time.Since(start).Round(time.Millisecond))
		if e, s := l.ids(t); e != etcdID || s != serverID {
			t.Errorf("containers were replaced, not restarted: etcd %.12s -> %.12s, server %.12s -> %.12s", etcdID, e, serverID, s)
		}
	})

	t.Run("a new zone recreates CoreDNS only", func(t *testing.T) {
		l.zone = "lab.test"
		l.postUp(t, h)
		e, s := l.ids(t)
		if e != etcdID || s == serverID {
			t.Fatalf("after a zone change: etcd %.12s -> %.12s (want same), server %.12s -> %.12s (want new)", etcdID, e, serverID, s)
		}
		serverID = s
		putRecord(t, l.etcd, recordKey("api.prod.lab.test"), skydnsRecord{Host: "172.30.2.16", TTL: 30})
		requireA(t, "api.prod.lab.test", "172.30.2.16")
		requireRcode(t, name, rcodeRefused) // the old zone is no longer served
	})

	t.Run("a new etcd image recreates etcd only, records survive", func(t *testing.T) {
		tag := "marina-test/etcd:localdns-" + suffix
		dockertest.Docker(t, "tag", l.etcdImage, tag)
		t.Cleanup(func() { dockertest.Docker(t, "image", "rm", tag) }) // untags only
		l.etcdImage = tag
		l.postUp(t, h)
		e, s := l.ids(t)
		if e == etcdID || s != serverID {
			t.Fatalf("after an image change: etcd %.12s -> %.12s (want new), server %.12s -> %.12s (want same)", etcdID, e, serverID, s)
		}
		if img := inspect(t, l.etcd, "{{.Config.Image}}"); img != tag {
			t.Errorf("etcd image = %s, want %s", img, tag)
		}
		requireA(t, "api.prod.lab.test", "172.30.2.16") // from the volume
	})

	t.Run("PreDestroy removes everything", func(t *testing.T) {
		for i := range 2 { // the second run finds nothing and succeeds
			res, err := h.Run(sdk.PreDestroy, l.opts()...)
			if err != nil {
				t.Fatalf("PreDestroy #%d: %v", i+1, err)
			}
			want := &sdk.ResolverChange{Domain: "lab.test", Nameservers: []string{testServerIP}, Remove: true}
			if len(res.HostChanges) != 1 || !reflect.DeepEqual(res.HostChanges[0].Resolver, want) || len(res.Warnings) != 0 {
				t.Errorf("PreDestroy #%d = %+v, want the resolver removal and no warning", i+1, res)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, obj := range [][]string{{"container", l.etcd}, {"container", l.server}, {"volume", l.volume}} {
			if out, err := exec.CommandContext(ctx, "docker", obj[0], "inspect", obj[1]).CombinedOutput(); err == nil {
				t.Errorf("%s %s still exists after PreDestroy: %s", obj[0], obj[1], out)
			}
		}
	})
	t.Logf("whole test: %s", time.Since(testStart).Round(time.Millisecond))
}
