package migrate

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/config"
)

// klimax's built-in defaults (klimax's applyDefaults at the version marina
// succeeds, HEAD 5755f2b).
const (
	klimaxVMName         = "klimax"
	klimaxCPUs           = 4
	klimaxMemory         = "10GiB"
	klimaxDisk           = "40GiB"
	klimaxBridgeCIDR     = "172.30.0.0/16"
	klimaxNodeVersion    = "v1.35.0"
	klimaxMetalLBVersion = "v0.16.1"
	klimaxCacheStorage   = "host"
)

// klimaxDefaultResolvers are what klimax uses for a customDnsResolvers entry
// that lists none.
var klimaxDefaultResolvers = []string{"8.8.8.8", "8.8.4.4"}

// klimaxDefaultMirrors are klimax's five default mirrors (used when
// registries.mirrors is absent).
func klimaxDefaultMirrors() []config.Mirror {
	return []config.Mirror{
		{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io"},
		{Name: "registry-quayio", Port: 5010, RemoteURL: "https://quay.io"},
		{Name: "registry-gcrio", Port: 5020, RemoteURL: "https://gcr.io"},
		{Name: "registry-us-docker-pkgdev", Port: 5040, RemoteURL: "https://us-docker.pkg.dev"},
		{Name: "registry-us-central1-docker-pkgdev", Port: 5050, RemoteURL: "https://us-central1-docker.pkg.dev"},
	}
}

// klimaxConfig is klimax's configuration as klimax used it: the file's
// values with klimax's defaults filled in.
type klimaxConfig struct {
	VMName               string
	CPUs                 int
	Memory, Disk         string
	Rosetta              bool
	BridgeCIDR           string
	DisablePortMirroring bool
	NodeVersion          string
	MetalLBVersion       string
	Resolvers            []klimaxResolver
	AutoMerge            bool
	AutoRemove           bool
	CacheStorage         string
	// Mirrors is nil when the file leaves registries.mirrors out (klimax's
	// defaults apply) and empty for "mirrors: []" (no mirrors).
	Mirrors []config.Mirror
	// MirrorsSet says the file sets registries.mirrors.
	MirrorsSet bool
	// defaultedResolvers lists the resolver entries that had no resolvers.
	defaultedResolvers map[int]bool
	// setBools records which of klimax's *bool keys the file sets.
	setBools int
}

type klimaxResolver struct {
	Domain    string
	Resolvers []string
}

// dropped is a klimax key that is not carried over, and why.
type dropped struct {
	Key, Value, Reason string
}

// klimaxKeys is klimax's schema: section -> key -> kind.
var klimaxKeys = map[string]map[string]string{
	"vm":         {"name": "string", "cpus": "int", "memory": "string", "disk": "string", "rosetta": "bool"},
	"network":    {"kindBridgeCIDR": "string", "disablePortMirroring": "bool"},
	"kind":       {"nodeVersion": "string", "metalLBVersion": "string", "customDnsResolvers": "resolvers", "autoMergeKubeconfig": "bool", "autoRemoveKubeconfig": "bool"},
	"registries": {"cacheStorage": "string", "mirrors": "mirrors"},
}

var mirrorKeys = map[string]string{"name": "string", "port": "int", "remoteURL": "string", "username": "string", "password": "secret"}
var resolverKeys = map[string]string{"domain": "string", "resolvers": "strings"}

// maxNodes bounds the YAML nodes a klimax config may expand to (aliases).
const maxNodes = 20000

// parseKlimax reads klimax's config leniently, as klimax did: unknown keys
// and values of the wrong type are reported (dropped), not fatal. Only a
// file that is not YAML at all, or not a mapping, is an error.
func parseKlimax(data []byte) (*klimaxConfig, []dropped, error) {
	p := &kparser{}
	k := &klimaxConfig{defaultedResolvers: map[int]bool{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid YAML (klimax could not have read it either): %v", err)
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = deref(doc.Content[0])
	}
	if root != nil && !isNull(root) {
		if root.Kind != yaml.MappingNode {
			return nil, nil, fmt.Errorf("the top level is not a mapping of keys (vm:, network:, kind:, registries:)")
		}
		p.root(root, k)
	}
	if p.tooBig {
		return nil, nil, fmt.Errorf("the document expands to more than %d YAML nodes (aliases?); simplify it", maxNodes)
	}
	k.fillDefaults()
	sort.SliceStable(p.dropped, func(i, j int) bool { return p.dropped[i].Key < p.dropped[j].Key })
	return k, p.dropped, nil
}

type kparser struct {
	dropped []dropped
	nodes   int
	tooBig  bool
}

func (p *kparser) drop(key string, n *yaml.Node, reason string) {
	v := summary(n)
	if secretish(key) && v != "" {
		v = "(not shown)"
	}
	p.dropped = append(p.dropped, dropped{Key: key, Value: v, Reason: reason})
}

// secretish reports whether a dropped key may hold a credential, whose
// value is then never shown: anything under registries (where klimax kept
// credentials, and where a misspelt "pasword" would hold one), and any key
// whose name suggests a secret.
func secretish(key string) bool {
	k := strings.ToLower(key)
	if strings.HasPrefix(k, "registries") {
		return true
	}
	for _, w := range []string{"pas", "pw", "token", "secret", "auth", "cred", "key"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// visit counts nodes against maxNodes.
func (p *kparser) visit() bool {
	p.nodes++
	if p.nodes > maxNodes {
		p.tooBig = true
		return false
	}
	return true
}

func (p *kparser) root(root *yaml.Node, k *klimaxConfig) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if !p.visit() {
			return
		}
		key, val := root.Content[i].Value, deref(root.Content[i+1])
		fields, ok := klimaxKeys[key]
		if !ok {
			p.drop(key, val, unknownReason(key, sectionNames()))
			continue
		}
		if isNull(val) {
			continue
		}
		if val.Kind != yaml.MappingNode {
			p.drop(key, val, "not a mapping of keys, so klimax could not have read this file")
			continue
		}
		for j := 0; j+1 < len(val.Content); j += 2 {
			if !p.visit() {
				return
			}
			sub, v := val.Content[j].Value, deref(val.Content[j+1])
			path := key + "." + sub
			kind, ok := fields[sub]
			if !ok {
				p.drop(path, v, unknownReason(sub, sortedKeys(fields)))
				continue
			}
			if isNull(v) {
				continue
			}
			p.leaf(path, kind, v, k)
		}
	}
}

// leaf decodes one known klimax key into k.
func (p *kparser) leaf(path, kind string, v *yaml.Node, k *klimaxConfig) {
	switch kind {
	case "resolvers":
		if v.Kind != yaml.SequenceNode {
			p.drop(path, v, "not a list, so klimax could not have read this file")
			return
		}
		for i, item := range v.Content {
			if !p.visit() {
				return
			}
			var r klimaxResolver
			ip := fmt.Sprintf("%s[%d]", path, i)
			if p.item(ip, deref(item), resolverKeys, func(key string, n *yaml.Node) error {
				if key == "domain" {
					return n.Decode(&r.Domain)
				}
				return n.Decode(&r.Resolvers)
			}) {
				k.Resolvers = append(k.Resolvers, r)
			}
		}
	case "mirrors":
		if v.Kind != yaml.SequenceNode {
			p.drop(path, v, "not a list, so klimax could not have read this file")
			return
		}
		k.MirrorsSet = true
		k.Mirrors = []config.Mirror{}
		for i, item := range v.Content {
			if !p.visit() {
				return
			}
			var m config.Mirror
			ip := fmt.Sprintf("%s[%d]", path, i)
			if p.item(ip, deref(item), mirrorKeys, func(key string, n *yaml.Node) error {
				switch key {
				case "name":
					return n.Decode(&m.Name)
				case "port":
					return n.Decode(&m.Port)
				case "remoteURL":
					return n.Decode(&m.RemoteURL)
				case "username":
					return n.Decode(&m.Username)
				}
				return n.Decode(&m.Password)
			}) {
				k.Mirrors = append(k.Mirrors, m)
			}
		}
	default:
		var err error
		switch path {
		case "vm.name":
			err = decodeScalar(v, &k.VMName)
		case "vm.cpus":
			err = decodeScalar(v, &k.CPUs)
		case "vm.memory":
			err = decodeScalar(v, &k.Memory)
		case "vm.disk":
			err = decodeScalar(v, &k.Disk)
		case "vm.rosetta":
			err = decodeScalar(v, &k.Rosetta)
		case "network.kindBridgeCIDR":
			err = decodeScalar(v, &k.BridgeCIDR)
		case "network.disablePortMirroring":
			var b bool
			if err = decodeScalar(v, &b); err == nil {
				k.DisablePortMirroring = b
				k.setBools |= bitPortMirroring
			}
		case "kind.nodeVersion":
			err = decodeScalar(v, &k.NodeVersion)
		case "kind.metalLBVersion":
			err = decodeScalar(v, &k.MetalLBVersion)
		case "kind.autoMergeKubeconfig":
			var b bool
			if err = decodeScalar(v, &b); err == nil {
				k.AutoMerge = b
				k.setBools |= bitAutoMerge
			}
		case "kind.autoRemoveKubeconfig":
			var b bool
			if err = decodeScalar(v, &b); err == nil {
				k.AutoRemove = b
				k.setBools |= bitAutoRemove
			}
		case "registries.cacheStorage":
			err = decodeScalar(v, &k.CacheStorage)
		}
		if err != nil {
			p.drop(path, v, fmt.Sprintf("not a %s (%s), so klimax could not have read this file", kindWord(kind), cleanYAMLError(err)))
		}
	}
}

// item decodes one list entry (a mapping) key by key. An entry that is not
// a mapping, or whose keys do not decode, is dropped whole (it returns false);
// unknown keys inside an entry are dropped alone.
func (p *kparser) item(path string, n *yaml.Node, keys map[string]string, set func(string, *yaml.Node) error) bool {
	if n.Kind != yaml.MappingNode {
		p.drop(path, n, "not a mapping, so klimax could not have read this file")
		return false
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !p.visit() {
			return false
		}
		key, v := n.Content[i].Value, deref(n.Content[i+1])
		kind, known := keys[key]
		if !known {
			p.drop(path+"."+key, v, unknownReason(key, sortedKeys(keys)))
			continue
		}
		if isNull(v) {
			continue
		}
		if kind != "strings" && v.Kind != yaml.ScalarNode {
			p.drop(path, nil, fmt.Sprintf("%s is not a %s, so klimax could not have read this file", key, kindWord(kind)))
			ok = false
			continue
		}
		if err := set(key, v); err != nil {
			p.drop(path, nil, fmt.Sprintf("%s is not a %s (%s), so klimax could not have read this file", key, kindWord(kind), cleanYAMLError(err)))
			ok = false
		}
	}
	return ok
}

func kindWord(kind string) string {
	switch kind {
	case "strings":
		return "list of strings"
	case "secret":
		return "string"
	case "int":
		return "whole number"
	case "bool":
		return "boolean (true or false)"
	}
	return kind
}

// decodeScalar decodes a scalar node; a mapping or list is an error.
func decodeScalar(n *yaml.Node, dst any) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("got a %s", nodeKindWord(n))
	}
	return n.Decode(dst)
}

func nodeKindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// cleanYAMLError shortens yaml.v3's type errors.
func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n  ")
	if i := strings.Index(s, ": cannot unmarshal"); i >= 0 && strings.HasPrefix(s, "line ") {
		s = s[i+2:]
	}
	return s
}

// The *bool keys of klimax default to true when absent.
const (
	bitPortMirroring = 1 << iota
	bitAutoMerge
	bitAutoRemove
)

func (k *klimaxConfig) fillDefaults() {
	if k.VMName == "" {
		k.VMName = klimaxVMName
	}
	if k.CPUs == 0 {
		k.CPUs = klimaxCPUs
	}
	if k.Memory == "" {
		k.Memory = klimaxMemory
	}
	if k.Disk == "" {
		k.Disk = klimaxDisk
	}
	if k.BridgeCIDR == "" {
		k.BridgeCIDR = klimaxBridgeCIDR
	}
	if k.setBools&bitPortMirroring == 0 {
		k.DisablePortMirroring = true
	}
	if k.NodeVersion == "" {
		k.NodeVersion = klimaxNodeVersion
	}
	if k.MetalLBVersion == "" {
		k.MetalLBVersion = klimaxMetalLBVersion
	}
	for i := range k.Resolvers {
		if len(k.Resolvers[i].Resolvers) == 0 {
			k.Resolvers[i].Resolvers = append([]string(nil), klimaxDefaultResolvers...)
			k.defaultedResolvers[i] = true
		}
	}
	if k.setBools&bitAutoMerge == 0 {
		k.AutoMerge = true
	}
	if k.setBools&bitAutoRemove == 0 {
		k.AutoRemove = true
	}
	if k.CacheStorage == "" {
		k.CacheStorage = klimaxCacheStorage
	}
	if k.Mirrors == nil {
		k.Mirrors = klimaxDefaultMirrors()
	}
}

// unknownReason explains an unknown klimax key, naming the klimax key it
// differs from only in case (yaml keys are case-sensitive, so klimax
// ignored it).
func unknownReason(key string, known []string) string {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("klimax's key is %q, so klimax ignored this one; it never had an effect", k)
		}
	}
	return "unknown to klimax, which ignored it; it never had an effect"
}

func sectionNames() []string { return sortedKeys(klimaxKeys) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// summary is a short, secret-free rendering of a dropped value.
func summary(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	switch n.Kind {
	case yaml.ScalarNode:
		s := n.Value
		if len(s) > 40 {
			s = s[:37] + "..."
		}
		return s
	case yaml.MappingNode:
		return fmt.Sprintf("(mapping of %d keys)", len(n.Content)/2)
	case yaml.SequenceNode:
		return fmt.Sprintf("(list of %d)", len(n.Content))
	}
	return ""
}
