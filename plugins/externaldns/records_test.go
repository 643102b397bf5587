package externaldns

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// edService is ExternalDNS v0.23.0's etcd value, field for field and in
// order (provider/coredns/coredns.go, type Service): marshalling it gives the
// exact bytes the coredns provider writes.
type edService struct {
	Host        string `json:"host,omitempty"`
	Port        int    `json:"port,omitempty"`
	Priority    int    `json:"priority,omitempty"`
	Weight      int    `json:"weight,omitempty"`
	Text        string `json:"text,omitempty"`
	Mail        bool   `json:"mail,omitempty"`
	TTL         uint32 `json:"ttl,omitempty"`
	TargetStrip int    `json:"targetstrip,omitempty"`
	Group       string `json:"group,omitempty"`
	Owner       string `json:"owner,omitempty"`
}

// etcdWriter writes records as one ExternalDNS instance does.
type etcdWriter struct {
	owner  string
	strict bool // --coredns-strictly-owned
	next   *int // random-label counter shared by all writers of a test
}

// randomLabel stands in for the provider's fmt.Sprintf("%08x", rand.Int31()).
func (w etcdWriter) randomLabel() string {
	*w.next++
	return fmt.Sprintf("%08x", 0x1a2b0000+*w.next)
}

// keyFor is the provider's etcdKeyFor(prefix + "." + name).
func keyFor(label, name string) string {
	labels := strings.Split(label+"."+name, ".")
	slices.Reverse(labels)
	return EtcdPrefix + strings.Join(labels, "/")
}

func (w etcdWriter) put(key string, s edService) kv {
	if w.strict {
		s.Owner = w.owner // etcdClient.SaveService
	}
	b, err := json.Marshal(&s)
	if err != nil {
		panic(err)
	}
	return kv{Key: key, Value: b, ModRevision: 7}
}

// publish writes what ExternalDNS writes for one endpoint of resource at
// name with targets: one key per target (applyGroup) and the ownership TXT
// record "<type>-<name>" (registry/txt/registry.go, generateTXTRecord;
// registry/mapper/mapper.go, ToTXTName) as a key of its own (updateTXTRecords).
func (w etcdWriter) publish(name, resource string, targets ...string) []kv {
	var out []kv
	for _, target := range targets {
		out = append(out, w.put(keyFor(w.randomLabel(), name), edService{Host: target, TargetStrip: 1}))
	}
	first, rest, _ := strings.Cut(name, ".")
	txtName := strings.ToLower(recordType(name, targets[0])) + "-" + first + "." + rest
	text := fmt.Sprintf(`"heritage=external-dns,external-dns/owner=%s,external-dns/resource=%s"`, w.owner, resource)
	return append(out, w.put(keyFor(w.randomLabel(), txtName), edService{Text: text, TargetStrip: 1}))
}

// TestWriterMatchesExternalDNSFormat pins the helper to the literal bytes
// ExternalDNS writes (as read from a v0.23.0 etcd), so the tables below are
// realistic.
func TestWriterMatchesExternalDNSFormat(t *testing.T) {
	n := 0
	got := etcdWriter{owner: "dev", strict: true, next: &n}.publish("web.default.dev.demo.internal", "service/default/web", "172.30.1.16")
	want := []kv{
		{Key: "/skydns/internal/demo/dev/default/web/1a2b0001", Value: []byte(`{"host":"172.30.1.16","targetstrip":1,"owner":"dev"}`)},
		{Key: "/skydns/internal/demo/dev/default/a-web/1a2b0002", Value: []byte(`{"text":"\"heritage=external-dns,external-dns/owner=dev,external-dns/resource=service/default/web\"","targetstrip":1,"owner":"dev"}`)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || string(got[i].Value) != string(want[i].Value) {
			t.Errorf("record %d:\n got %s = %s\nwant %s = %s", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// entry is one etcd key and whether cleaning up owner "dev" must delete it.
type entry struct {
	kv
	del bool
}

func mark(del bool, kvs ...kv) []entry {
	out := make([]entry, len(kvs))
	for i, k := range kvs {
		out[i] = entry{kv: k, del: del}
	}
	return out
}

func raw(key, value string) kv { return kv{Key: key, Value: []byte(value), ModRevision: 3} }

// TestOwnedBy runs the owner filter over etcd contents written as
// ExternalDNS writes them, by several clusters, and checks that exactly the
// records of cluster "dev" are selected.
func TestOwnedBy(t *testing.T) {
	type scenario struct {
		name    string
		entries func(n *int) []entry
	}
	tests := []scenario{
		{name: "empty etcd", entries: func(*int) []entry { return nil }},
		{
			// marina's default: every record carries its owner.
			name: "strictly owned, three clusters",
			entries: func(n *int) []entry {
				dev := etcdWriter{owner: "dev", strict: true, next: n}
				prod := etcdWriter{owner: "prod", strict: true, next: n}
				stage := etcdWriter{owner: "dev-2", strict: true, next: n} // owner id with dev as a prefix
				var e []entry
				e = append(e, mark(true, dev.publish("web.default.dev.demo.internal", "service/default/web", "172.30.1.16", "172.30.1.17")...)...)
				e = append(e, mark(true, dev.publish("api.team-a.dev.demo.internal", "service/team-a/api", "172.30.1.18")...)...)
				// Both clusters annotate the same name: in strict mode each writes its own keys.
				e = append(e, mark(true, dev.publish("shop.demo.internal", "service/default/shop", "172.30.1.19")...)...)
				e = append(e, mark(false, prod.publish("shop.demo.internal", "service/default/shop", "172.30.2.16")...)...)
				e = append(e, mark(false, prod.publish("web.default.prod.demo.internal", "service/default/web", "172.30.2.17")...)...)
				// prod publishes a name under dev's default domain (annotation).
				e = append(e, mark(false, prod.publish("x.web.default.dev.demo.internal", "service/default/x", "172.30.2.18")...)...)
				e = append(e, mark(false, stage.publish("web.default.dev-2.demo.internal", "service/default/web", "172.30.3.16")...)...)
				return e
			},
		},
		{
			// --coredns-strictly-owned=false: ownership only in TXT records.
			name: "TXT registry only, two clusters and hand-made records",
			entries: func(n *int) []entry {
				dev := etcdWriter{owner: "dev", next: n}
				prod := etcdWriter{owner: "prod", next: n}
				var e []entry
				e = append(e, mark(true, dev.publish("web.default.dev.demo.internal", "service/default/web", "172.30.1.16", "172.30.1.17")...)...)
				e = append(e, mark(true, dev.publish("shop.demo.internal", "service/default/shop", "172.30.1.19")...)...)
				e = append(e, mark(true, dev.publish("alias.demo.internal", "service/default/alias", "lb.example.test")...)...) // CNAME
				e = append(e, mark(false, prod.publish("web.default.prod.demo.internal", "service/default/web", "172.30.2.17")...)...)
				e = append(e, mark(false, prod.publish("x.web.default.dev.demo.internal", "service/default/x", "172.30.2.18")...)...)
				e = append(e, mark(false,
					// Hand-made records (no heritage): never ours.
					raw("/skydns/internal/demo/gateway", `{"host":"172.30.0.1"}`),
					raw("/skydns/internal/demo/dev/default/b/manual01", `{"host":"172.30.9.9","targetstrip":1}`),
					// A CNAME at a name dev owns only as A: not dev's.
					raw("/skydns/internal/demo/dev/default/web/manual02", `{"host":"elsewhere.example.test","targetstrip":1}`),
					// Another tool's TXT naming dev: not external-dns heritage.
					raw("/skydns/internal/demo/a-other/manual03", `{"text":"\"heritage=other-tool,external-dns/owner=dev\"","targetstrip":1}`),
					raw("/skydns/internal/demo/other/manual04", `{"host":"172.30.9.10","targetstrip":1}`),
					// Not the provider's JSON, and keys outside the prefix.
					raw("/skydns/internal/demo/junk", `not json`),
					raw("/skydnsx/internal/demo/dev/default/web/1a2b0001", `{"host":"172.30.1.16","targetstrip":1}`),
					// targetstrip past the key's labels: unreadable, left alone.
					raw("/skydns/internal", `{"host":"172.30.9.11","targetstrip":5}`),
				)...)
				return e
			},
		},
		{
			name: "an owner field is decisive",
			entries: func(n *int) []entry {
				dev := etcdWriter{owner: "dev", next: n}
				e := mark(true, dev.publish("web.default.dev.demo.internal", "service/default/web", "172.30.1.16")...)
				// prod (strict) wrote a record at the name dev's TXT owns: prod's.
				return append(e, mark(false, raw("/skydns/internal/demo/dev/default/web/0badf00d", `{"host":"172.30.2.99","targetstrip":1,"owner":"prod"}`))...)
			},
		},
		{
			name: "old-format TXT owns every type at its name",
			entries: func(*int) []entry {
				return append(mark(true,
					raw("/skydns/internal/demo/legacy/00000001", `{"text":"\"heritage=external-dns,external-dns/owner=dev\"","targetstrip":1}`),
					raw("/skydns/internal/demo/legacy/00000002", `{"host":"172.30.1.30","targetstrip":1}`),
					raw("/skydns/internal/demo/legacy/00000003", `{"host":"legacy.example.test","targetstrip":1}`),
					raw("/skydns/internal/demo/legacy/00000004", `{"host":"fd00::30","targetstrip":1}`),
				), mark(false,
					raw("/skydns/internal/demo/legacy/sub/00000005", `{"host":"172.30.1.31","targetstrip":1}`),
				)...)
			},
		},
		{
			name: "names that look like registry names",
			entries: func(n *int) []entry {
				dev := etcdWriter{owner: "dev", next: n}
				// Service "a-b": its TXT is a-a-b.default...; it owns a-b..., not b....
				e := mark(true, dev.publish("a-b.default.dev.demo.internal", "service/default/a-b", "172.30.1.40")...)
				e = append(e, mark(true, dev.publish("txt-x.default.dev.demo.internal", "service/default/txt-x", "172.30.1.41")...)...)
				return append(e, mark(false,
					raw("/skydns/internal/demo/dev/default/b/00000001", `{"host":"172.30.9.40","targetstrip":1}`),
					raw("/skydns/internal/demo/dev/default/x/00000002", `{"host":"172.30.9.41","targetstrip":1}`),
				)...)
			},
		},
		{
			name: "AAAA owns only AAAA",
			entries: func(n *int) []entry {
				dev := etcdWriter{owner: "dev", next: n}
				e := mark(true, dev.publish("v6.default.dev.demo.internal", "service/default/v6", "fd00::1")...)
				// An A at the same name is not covered by aaaa-v6.
				return append(e, mark(false, raw("/skydns/internal/demo/dev/default/v6/00000001", `{"host":"172.30.9.50","targetstrip":1}`))...)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			entries := tt.entries(&n)
			var kvs, want []string
			var input []kv
			for _, e := range entries {
				input = append(input, e.kv)
				if e.del {
					want = append(want, e.Key)
				}
			}
			slices.Sort(want)
			// The result must not depend on the order etcd returns keys in.
			for _, order := range []string{"as written", "reversed"} {
				in := slices.Clone(input)
				if order == "reversed" {
					slices.Reverse(in)
				}
				kvs = kvs[:0]
				for _, d := range ownedBy(EtcdPrefix, in, "dev") {
					kvs = append(kvs, d.Key)
					if d.Reason == "" || d.Name == "" {
						t.Errorf("%s: no name or reason", d.Key)
					}
				}
				if !slices.Equal(kvs, want) {
					t.Fatalf("%s: selected\n  %s\nwant\n  %s", order, strings.Join(kvs, "\n  "), strings.Join(want, "\n  "))
				}
			}
		})
	}
}

func TestRecordName(t *testing.T) {
	tests := []struct {
		key   string
		strip int
		want  string
		ok    bool
	}{
		{"/skydns/internal/demo/dev/default/web/1a2b3c4d", 1, "web.default.dev.demo.internal", true},
		{"/skydns/internal/demo/dev/default/a-web/1a2b3c4d", 1, "a-web.default.dev.demo.internal", true},
		{"/skydns/arpa/in-addr/172/30/1/16", 0, "16.1.30.172.in-addr.arpa", true},
		{"/skydns/internal/demo/Web/x", 1, "web.demo.internal", true},
		{"/skydns/internal", 1, "", false},
		{"/skydns/", 0, "", false},
		{"/other/internal/demo", 0, "", false},
		{"/skydns/internal/demo", -1, "", false},
	}
	for _, tt := range tests {
		got, ok := recordName(EtcdPrefix, tt.key, tt.strip)
		if got != tt.want || ok != tt.ok {
			t.Errorf("recordName(%q, %d) = %q, %v; want %q, %v", tt.key, tt.strip, got, ok, tt.want, tt.ok)
		}
	}
}

// TestParseLabels mirrors endpoint.NewLabelsFromStringPlain's cases.
func TestParseLabels(t *testing.T) {
	tests := []struct {
		text  string
		owner string
		ok    bool
	}{
		{`"heritage=external-dns,external-dns/owner=dev,external-dns/resource=service/default/web"`, "dev", true},
		{`heritage=external-dns,external-dns/owner=dev`, "dev", true},
		{`"heritage=external-dns,external-dns/resource=ingress/a/b"`, "", true},
		{`"heritage=mate,external-dns/owner=dev"`, "", false},
		{`"external-dns/owner=dev"`, "", false},
		{`"v=spf1 include:_spf.example.test ~all"`, "", false},
		{``, "", false},
	}
	for _, tt := range tests {
		labels, ok := parseLabels(tt.text)
		if ok != tt.ok || labels[ownerLabel] != tt.owner {
			t.Errorf("parseLabels(%q) = %v, %v; want owner %q, %v", tt.text, labels, ok, tt.owner, tt.ok)
		}
	}
}

// TestEndpointName mirrors registry/mapper's TestExtractRecordTypeDefaultPosition.
func TestEndpointName(t *testing.T) {
	tests := []struct{ in, name, typ string }{
		{"ns-zone.example.com", "zone.example.com", "NS"},
		{"aaaa-zone.example.com", "zone.example.com", "AAAA"},
		{"ptr-zone.example.com", "zone.example.com", "PTR"},
		{"a-web.default.dev.demo.internal", "web.default.dev.demo.internal", "A"},
		{"cname-a-b.demo.internal", "a-b.demo.internal", "CNAME"},
		{"zone.example.com", "zone.example.com", ""},
		{"web-a.demo.internal", "web-a.demo.internal", ""},
	}
	for _, tt := range tests {
		if n, typ := endpointName(tt.in); n != tt.name || typ != tt.typ {
			t.Errorf("endpointName(%q) = %q, %q; want %q, %q", tt.in, n, typ, tt.name, tt.typ)
		}
	}
}

func TestRecordType(t *testing.T) {
	tests := []struct{ name, host, want string }{
		{"web.demo.internal", "172.30.1.16", "A"},
		{"web.demo.internal", "fd00::1", "AAAA"},
		{"web.demo.internal", "lb.example.test", "CNAME"},
		{"16.1.30.172.in-addr.arpa", "web.demo.internal", "PTR"},
	}
	for _, tt := range tests {
		if got := recordType(tt.name, tt.host); got != tt.want {
			t.Errorf("recordType(%q, %q) = %s, want %s", tt.name, tt.host, got, tt.want)
		}
	}
}

// FuzzOwnedBy: arbitrary etcd contents never select a key whose value names
// another owner, nor anything outside the prefix, and never panic.
func FuzzOwnedBy(f *testing.F) {
	f.Add("/skydns/internal/demo/web/1", `{"host":"1.2.3.4","targetstrip":1,"owner":"prod"}`, "/skydns/internal/demo/a-web/2", `{"text":"\"heritage=external-dns,external-dns/owner=dev\"","targetstrip":1}`)
	f.Add("/skydns/x", `{"targetstrip":9}`, "/skydns/", `{}`)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		for _, d := range ownedBy(EtcdPrefix, []kv{{Key: k1, Value: []byte(v1)}, {Key: k2, Value: []byte(v2)}}, "dev") {
			if !strings.HasPrefix(d.Key, EtcdPrefix) {
				t.Fatalf("selected %q outside %s", d.Key, EtcdPrefix)
			}
			var s service
			if err := json.Unmarshal(d.Value, &s); err != nil {
				t.Fatalf("selected %q whose value is not JSON", d.Key)
			}
			if s.Owner != "" && s.Owner != "dev" {
				t.Fatalf("selected %q owned by %q", d.Key, s.Owner)
			}
		}
	})
}
