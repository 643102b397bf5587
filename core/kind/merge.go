package kind

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"

	toml "github.com/pelletier/go-toml/v2"
	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/bcollard/marina/sdk"
)

// pluginNameRE is the SDK's plugin name rule.
var pluginNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`) })

// kubeadmKinds are the objects of kind's generated kubeadm config: a merge
// patch whose kind is none of them applies to nothing, silently.
var kubeadmKinds = []string{
	"ClusterConfiguration", "InitConfiguration", "JoinConfiguration",
	"KubeletConfiguration", "KubeProxyConfiguration",
}

// merged is the union of the contributions, checked for conflicts.
type merged struct {
	containerd []string
	kubeadm    []string
	labels     map[string]string
	ports      []v1alpha4.PortMapping
	files      []sdk.NodeFile
}

// sortedContributions returns the non-empty contributions in plugin-name
// order, refusing bad or repeated names.
func sortedContributions(cs []NamedContribution) ([]NamedContribution, error) {
	out := make([]NamedContribution, 0, len(cs))
	seen := map[string]bool{}
	for _, c := range cs {
		if !pluginNameRE().MatchString(c.Plugin) {
			return nil, fmt.Errorf("contribution from plugin %q: not a plugin name (lower-case letters, digits and '-')", c.Plugin)
		}
		if seen[c.Plugin] {
			return nil, fmt.Errorf("plugin %s contributed twice to the kind config; pass one contribution per plugin", c.Plugin)
		}
		seen[c.Plugin] = true
		if c.KindContribution != nil {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b NamedContribution) int { return strings.Compare(a.Plugin, b.Plugin) })
	return out, nil
}

// mergeContributions merges in.Labels and the plugins' contributions, in
// plugin-name order; api is the host binding kind makes for the API server.
func mergeContributions(in RenderInput, api binding) (*merged, error) {
	cs, err := sortedContributions(in.Contributions)
	if err != nil {
		return nil, err
	}
	m := &merged{labels: map[string]string{}}

	// Node labels: the core's first, then each plugin's.
	owner := map[string]string{}
	add := func(who, k, v string) error {
		if err := checkNodeLabel(k, v); err != nil {
			return fmt.Errorf("node label from %s: %w", who, err)
		}
		if old, ok := m.labels[k]; ok && old != v {
			return fmt.Errorf("node label %s: %s sets %q but %s sets %q; change one of them", k, owner[k], old, who, v)
		}
		m.labels[k] = v
		if _, ok := owner[k]; !ok {
			owner[k] = who
		}
		return nil
	}
	for _, k := range sortedKeys(in.Labels) {
		if err := add(corePlugin, k, in.Labels[k]); err != nil {
			return nil, err
		}
	}

	bindings := []binding{api}
	for _, c := range cs {
		who := "plugin " + c.Plugin
		for i, p := range c.ContainerdConfigPatches {
			if err := checkContainerdPatch(p); err != nil {
				return nil, fmt.Errorf("%s: containerdConfigPatches[%d]: %w", who, i, err)
			}
			m.containerd = append(m.containerd, p)
		}
		for i, p := range c.KubeadmConfigPatches {
			if err := checkKubeadmPatch(p); err != nil {
				return nil, fmt.Errorf("%s: kubeadmConfigPatches[%d]: %w", who, i, err)
			}
			m.kubeadm = append(m.kubeadm, p)
		}
		for _, k := range sortedKeys(c.NodeLabels) {
			if err := add(who, k, c.NodeLabels[k]); err != nil {
				return nil, err
			}
		}
		for i, p := range c.PortMappings {
			pm, err := portMapping(p)
			if err != nil {
				return nil, fmt.Errorf("%s: portMappings[%d]: %w", who, i, err)
			}
			b := binding{owner: who, pm: pm}
			for _, o := range bindings {
				if b.overlaps(o) {
					return nil, fmt.Errorf("host port conflict: %s asks for %s but %s already has %s; use another host port", who, b, o.owner, o)
				}
			}
			bindings = append(bindings, b)
			m.ports = append(m.ports, pm)
		}
	}
	m.files, err = collectNodeFiles(cs)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CollectNodeFiles returns the NodeFiles of all contributions, in plugin-name
// order, refusing a path asked for twice (or a path inside another file's
// path). Hand the result to NodeFiles to place them; Render mounts the same
// files.
func CollectNodeFiles(cs []NamedContribution) ([]sdk.NodeFile, error) {
	sorted, err := sortedContributions(cs)
	if err != nil {
		return nil, err
	}
	return collectNodeFiles(sorted)
}

func collectNodeFiles(sorted []NamedContribution) ([]sdk.NodeFile, error) {
	var files []sdk.NodeFile
	var owners []string // owners[i] placed files[i]
	for _, c := range sorted {
		who := "plugin " + c.Plugin
		for i, f := range c.NodeFiles {
			if err := checkNodeFile(f); err != nil {
				return nil, fmt.Errorf("%s: nodeFiles[%d]: %w", who, i, err)
			}
			for j, g := range files {
				p, o := g.Path, owners[j]
				switch {
				case p == f.Path:
					return nil, fmt.Errorf("node file %s: both %s and %s place it; only one plugin may own a path", f.Path, o, who)
				case strings.HasPrefix(f.Path, p+"/"), strings.HasPrefix(p, f.Path+"/"):
					return nil, fmt.Errorf("node file %s of %s and node file %s of %s: one path lies inside the other; a file cannot also be a directory", f.Path, who, p, o)
				}
			}
			owners = append(owners, who)
			files = append(files, f)
		}
	}
	return files, nil
}

// portMapping converts and checks a plugin's port mapping.
func portMapping(p sdk.PortMapping) (v1alpha4.PortMapping, error) {
	if p.ContainerPort < 1 || p.ContainerPort > 65535 {
		return v1alpha4.PortMapping{}, fmt.Errorf("containerPort %d is not a port (1-65535)", p.ContainerPort)
	}
	if p.HostPort < 1 || p.HostPort > 65535 {
		return v1alpha4.PortMapping{}, fmt.Errorf("hostPort %d is not a port (1-65535); marina needs a fixed host port to detect conflicts", p.HostPort)
	}
	pm := v1alpha4.PortMapping{ContainerPort: int32(p.ContainerPort), HostPort: int32(p.HostPort)}
	if p.ListenAddress != "" {
		a, err := netip.ParseAddr(p.ListenAddress)
		if err != nil || a.Zone() != "" {
			return v1alpha4.PortMapping{}, fmt.Errorf("listenAddress %q is not an IP address (leave it empty for all addresses)", p.ListenAddress)
		}
		pm.ListenAddress = a.String()
	}
	switch proto := v1alpha4.PortMappingProtocol(strings.ToUpper(p.Protocol)); proto {
	case "":
	case v1alpha4.PortMappingProtocolTCP, v1alpha4.PortMappingProtocolUDP, v1alpha4.PortMappingProtocolSCTP:
		pm.Protocol = proto
	default:
		return v1alpha4.PortMapping{}, fmt.Errorf("protocol %q is not TCP, UDP or SCTP", p.Protocol)
	}
	return pm, nil
}

// checkContainerdPatch checks that p is a TOML document.
func checkContainerdPatch(p string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New("empty patch; leave it out")
	}
	var v map[string]any
	if err := toml.Unmarshal([]byte(p), &v); err != nil {
		return fmt.Errorf("not TOML: %w", err)
	}
	return nil
}

// checkKubeadmPatch checks that every YAML document of p is a merge patch kind
// applies to something: it names one of kubeadmKinds.
func checkKubeadmPatch(p string) error {
	dec := yaml.NewDecoder(strings.NewReader(p))
	docs := 0
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("not YAML: %w", err)
		}
		if doc == nil {
			continue
		}
		docs++
		k, _ := doc["kind"].(string)
		if !slices.Contains(kubeadmKinds, k) {
			return fmt.Errorf("document %d has kind %q; kind applies merge patches only to %s", docs, k, strings.Join(kubeadmKinds, ", "))
		}
	}
	if docs == 0 {
		return errors.New("empty patch; leave it out")
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
