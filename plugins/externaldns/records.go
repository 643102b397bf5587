package externaldns

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
)

// This file decides which etcd keys a cluster's ExternalDNS owns. It mirrors
// ExternalDNS v0.23.0 exactly; the paths below are inside its module
// (sigs.k8s.io/external-dns@v0.23.0).
//
// Layout (provider/coredns/coredns.go: etcdKeyFor, createServicesForEndpoint,
// updateTXTRecords): a record for name web.default.dev.demo.internal lives at
//
//	/skydns/internal/demo/dev/default/web/<8 hex digits>
//
// — the name's labels reversed under the prefix, then one random label; the
// value's "targetstrip" (1) says how many leading labels of the key's name are
// that random part. PTR records sit at the exact reverse path (targetstrip 0).
// The value is the provider's Service struct as JSON, e.g.
//
//	{"host":"172.30.1.16","targetstrip":1,"owner":"dev"}
//
// ("owner" only with --coredns-strictly-owned; "ttl" when one is set).
//
// Ownership (registry/txt/registry.go, registry/mapper/mapper.go,
// endpoint/labels.go): with --registry=txt and no --txt-prefix/--txt-suffix,
// every record of type T at name N has a companion TXT record at name
// "<t>-N" (t = lower-case type, e.g. a-web.default.dev.demo.internal) whose
// text is
//
//	"heritage=external-dns,external-dns/owner=dev,external-dns/resource=service/default/web"
//
// The coredns provider stores that TXT record as its own key with only
// "text" set. Older ExternalDNS versions wrote the TXT at N itself (no type
// prefix), owning every type at N.

// service is the part of the coredns provider's etcd value
// (provider/coredns/coredns.go, type Service) that ownership depends on.
type service struct {
	Host        string `json:"host,omitempty"`
	Text        string `json:"text,omitempty"`
	TargetStrip int    `json:"targetstrip,omitempty"`
	Owner       string `json:"owner,omitempty"`
}

// kv is one etcd key with its value and the revision it was last changed at.
type kv struct {
	Key         string
	Value       []byte
	ModRevision int64
}

// Reasons a key is selected for deletion.
const (
	reasonOwnerField    = "owner field"
	reasonRegistry      = "ownership TXT record"
	reasonOwnedName     = "name owned by a TXT record"
	heritage            = "external-dns"
	ownerLabel          = "owner"
	heritageLabelPrefix = heritage + "/"
)

// doomed is a key to delete and why.
type doomed struct {
	kv
	Name   string
	Reason string
}

// registryTypes are the type prefixes of TXT registry names
// (registry/mapper/mapper.go, supportedRecords).
var registryTypes = []string{"A", "AAAA", "CNAME", "NS", "MX", "PTR", "SRV", "NAPTR", "TXT", "DNAME", "TLSA"}

// ownedBy returns the keys under prefix that the ExternalDNS with owner id
// owner wrote, in key order:
//
//   - a record whose "owner" field is set belongs to that owner and nobody
//     else (--coredns-strictly-owned), whatever any TXT record says;
//   - a TXT registry record (external-dns heritage) whose owner label is
//     owner is selected, and the name and type it names are owned;
//   - a record without an owner field whose name and type are owned that
//     way is selected.
//
// Everything else — other owners' records, records without any owner, values
// that are not the provider's JSON — is left alone.
func ownedBy(prefix string, kvs []kv, owner string) []doomed {
	type parsed struct {
		kv
		svc  service
		name string
	}
	type nameType struct{ name, typ string }
	var (
		out        []doomed
		candidates []parsed
		owned      = map[nameType]bool{}
	)
	for _, e := range kvs {
		var svc service
		if json.Unmarshal(e.Value, &svc) != nil {
			continue // not a coredns provider record
		}
		name, ok := recordName(prefix, e.Key, svc.TargetStrip)
		if !ok {
			continue
		}
		labels, isRegistry := parseLabels(svc.Text)
		switch {
		case svc.Owner != "":
			if svc.Owner != owner {
				continue
			}
			reason := reasonOwnerField
			if isRegistry {
				reason = reasonRegistry
			}
			out = append(out, doomed{kv: e, Name: name, Reason: reason})
		case isRegistry:
			if labels[ownerLabel] != owner {
				continue
			}
			out = append(out, doomed{kv: e, Name: name, Reason: reasonRegistry})
		default:
			if svc.Host != "" {
				candidates = append(candidates, parsed{kv: e, svc: svc, name: name})
			}
			continue
		}
		if isRegistry {
			n, t := endpointName(name)
			owned[nameType{n, t}] = true
		}
	}
	for _, c := range candidates {
		typ := recordType(c.name, c.svc.Host)
		if owned[nameType{c.name, typ}] || owned[nameType{c.name, ""}] {
			out = append(out, doomed{kv: c.kv, Name: c.name, Reason: reasonOwnedName})
		}
	}
	slices.SortFunc(out, func(a, b doomed) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// recordName is the DNS name (lower case) of the record at key, as the
// provider's Records reads it: the key's labels after prefix, reversed, minus
// the first targetStrip of them.
func recordName(prefix, key string, targetStrip int) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" {
		return "", false
	}
	labels := strings.Split(rest, "/")
	slices.Reverse(labels)
	if targetStrip < 0 || targetStrip >= len(labels) {
		return "", false
	}
	return strings.ToLower(strings.Join(labels[targetStrip:], ".")), true
}

// parseLabels reads an ExternalDNS ownership text as
// endpoint.NewLabelsFromStringPlain does (endpoint/labels.go): quotes trimmed,
// comma-separated key=value pairs, heritage=external-dns required, keys
// "external-dns/<label>" kept as <label>.
func parseLabels(text string) (map[string]string, bool) {
	if text == "" {
		return nil, false
	}
	out := map[string]string{}
	found := false
	for _, token := range strings.Split(strings.Trim(text, `"`), ",") {
		key, val, ok := strings.Cut(token, "=")
		if !ok {
			continue
		}
		if key == "heritage" {
			if val != heritage {
				return nil, false
			}
			found = true
			continue
		}
		if strings.HasPrefix(key, heritage) {
			out[strings.TrimPrefix(key, heritageLabelPrefix)] = val
		}
	}
	if !found {
		return nil, false
	}
	return out, true
}

// endpointName is the name and record type a TXT registry name stands for
// (registry/mapper/mapper.go, extractRecordTypeDefaultPosition): "a-web.x" is
// (web.x, A); a name without a known type prefix is itself, of any type ("").
func endpointName(txtName string) (string, string) {
	first, _, _ := strings.Cut(txtName, "-")
	for _, t := range registryTypes {
		if first == strings.ToLower(t) {
			return strings.TrimPrefix(txtName, first+"-"), t
		}
	}
	return txtName, ""
}

// recordType is the type the provider reads a record with host as
// (provider/coredns/coredns.go, Records; endpoint/utils.go, SuitableType).
func recordType(name, host string) string {
	if strings.HasSuffix(name, ".in-addr.arpa") || strings.HasSuffix(name, ".ip6.arpa") {
		return "PTR"
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "CNAME"
	case ip.Is4():
		return "A"
	default:
		return "AAAA"
	}
}
