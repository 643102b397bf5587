package kubeadm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bcollard/marina/test/standin/internal/spec"
)

// kindToken is the well-known bootstrap token kind puts in every kubeadm
// config (sigs.k8s.io/kind pkg/cluster/internal/kubeadm.Token).
const kindToken = "abcdef.0123456789abcdef"

// document is one of kind's kubeadm config documents, as JSON.
type document struct {
	kind, apiVersion string
	json             []byte
}

// matchInfo is what kind matches documents and patches on (their v1
// TypeMeta).
type matchInfo struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// patch is one kubeadm config patch of the kind config: a merge patch
// (one YAML document of a kubeadmConfigPatches entry) or a JSON 6902 patch.
type patch struct {
	where            string
	kind, apiVersion string
	merge            []byte          // merge patch as JSON, or
	json6902         jsonpatch.Patch // JSON 6902 patch
	// matched counts the documents the patch applied to.
	matched int
}

// String names the patch for a warning.
func (p *patch) String() string {
	v := p.apiVersion
	if v == "" {
		v = "any apiVersion"
	}
	return fmt.Sprintf("%s (kind %q, %s)", p.where, p.kind, v)
}

// matches is kind's rule: the kind must match; the apiVersion only when
// the patch sets one (so a patch without one applies across kubeadm
// versions).
func (p *patch) matches(d *document) bool {
	return d.kind == p.kind && (p.apiVersion == "" || p.apiVersion == d.apiVersion)
}

// parsePatches parses the patches of one level of the kind config (the
// cluster's or a node's) as kind does before applying any: every document
// of every merge patch must be YAML whose kind and apiVersion are strings,
// every JSON 6902 patch a valid patch. Errors carry kind's wording.
func parsePatches(where string, merges []string, json6902 []v1alpha4.PatchJSON6902) ([]*patch, error) {
	var out []*patch
	for i, raw := range merges {
		for j, doc := range splitDocuments(raw) {
			var mi matchInfo
			if err := sigsyaml.Unmarshal([]byte(doc), &mi); err != nil {
				return nil, fmt.Errorf("failed to parse patches: failed to parse type meta for %q: %w", doc, err)
			}
			js, err := sigsyaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("failed to parse patches: %w", err)
			}
			name := fmt.Sprintf("%s kubeadmConfigPatches[%d]", where, i)
			if j > 0 {
				name += fmt.Sprintf(" document %d", j+1)
			}
			out = append(out, &patch{where: name, kind: mi.Kind, apiVersion: mi.APIVersion, merge: js})
		}
	}
	for i, p := range json6902 {
		js, err := sigsyaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			return nil, fmt.Errorf("failed to parse JSON 6902 patches: %w", err)
		}
		decoded, err := jsonpatch.DecodePatch(js)
		if err != nil {
			return nil, fmt.Errorf("failed to parse JSON 6902 patches: %w", err)
		}
		apiVersion := p.Version
		if p.Group != "" {
			apiVersion = p.Group + "/" + p.Version
		}
		out = append(out, &patch{where: fmt.Sprintf("%s kubeadmConfigPatchesJSON6902[%d]", where, i),
			kind: p.Kind, apiVersion: apiVersion, json6902: decoded})
	}
	return out, nil
}

// splitDocuments splits a YAML stream at "---" lines the way kind does
// (a "\n---" and the rest of its line end a document).
func splitDocuments(stream string) []string {
	var docs []string
	const sep = "\n---"
	for len(stream) > 0 {
		i := strings.Index(stream, sep)
		if i < 0 {
			return append(docs, stream)
		}
		docs = append(docs, stream[:i])
		rest := stream[i+len(sep):]
		j := strings.IndexByte(rest, '\n')
		if j < 0 {
			return docs
		}
		stream = rest[j+1:]
	}
	return docs
}

// apply applies the matching patches of one level to d, as kind's
// KubeYAML does: every merge patch in order, then every JSON 6902 patch.
func (d *document) apply(patches []*patch) error {
	for _, p := range patches {
		if p.merge == nil || !p.matches(d) {
			continue
		}
		target, stripped, err := mergeAndStrip(d.json, p.merge, d.apiVersion, p.apiVersion)
		if err != nil {
			return fmt.Errorf("failed to apply patch %s: %w", p.where, err)
		}
		out, err := jsonpatch.MergePatch(target, stripped)
		if err != nil {
			return fmt.Errorf("failed to apply patch %s: %w", p.where, err)
		}
		d.json = out
		p.matched++
	}
	for _, p := range patches {
		if p.json6902 == nil || !p.matches(d) {
			continue
		}
		out, err := p.json6902.Apply(d.json)
		if err != nil {
			return fmt.Errorf("failed to apply JSON 6902 patch %s: %w", p.where, err)
		}
		d.json = out
		p.matched++
	}
	return nil
}

// mergeAndStrip merges the fields kind merges itself — extraArgs and
// kubeletExtraArgs by name (v1beta4 targets only), certSANs as a set — from
// patchJSON into targetJSON, and returns both with those fields removed from
// the patch, so the JSON merge patch that follows does not replace them
// (kind v0.33.0 pkg/internal/patch/kubeadm_merge.go).
func mergeAndStrip(targetJSON, patchJSON []byte, targetVersion, patchVersion string) ([]byte, []byte, error) {
	var target, p map[string]any
	if err := json.Unmarshal(targetJSON, &target); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(patchJSON, &p); err != nil {
		return nil, nil, err
	}
	walkAndMerge(target, p, targetVersion, patchVersion)
	t, err := json.Marshal(target)
	if err != nil {
		return nil, nil, err
	}
	s, err := json.Marshal(p)
	if err != nil {
		return nil, nil, err
	}
	return t, s, nil
}

func walkAndMerge(target, p map[string]any, targetVersion, patchVersion string) {
	for k, pv := range p {
		switch k {
		case "extraArgs", "kubeletExtraArgs":
			if strings.HasSuffix(targetVersion, "v1beta4") {
				mergeExtraArgs(target, p, k, patchVersion)
				delete(p, k)
			}
			continue
		case "certSANs":
			target[k] = mergeSet(asList(target[k]), asList(pv))
			delete(p, k)
			continue
		}
		pm, ok := pv.(map[string]any)
		if !ok {
			continue
		}
		tv, exists := target[k]
		if !exists {
			tv = map[string]any{}
			target[k] = tv
		}
		if tm, ok := tv.(map[string]any); ok {
			walkAndMerge(tm, pm, targetVersion, patchVersion)
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// mergeSet appends the items of add that list does not hold.
func mergeSet(list, add []any) []any {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// mergeExtraArgs merges a v1beta4 argument list by name: a patch entry
// replaces the value of the target's entry of that name, or is appended; an
// entry without value removes it. A map (the v1beta3 form) is converted
// when the patch names no apiVersion, and ignored otherwise, as in kind.
func mergeExtraArgs(target, p map[string]any, key, patchVersion string) {
	var add []any
	switch v := p[key].(type) {
	case []any:
		add = v
	case map[string]any:
		if patchVersion == "" {
			add = argMapToList(v)
		}
	}
	var list []any
	switch v := target[key].(type) {
	case []any:
		list = v
	case map[string]any:
		list = argMapToList(v)
	}
	for _, item := range add {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		name, ok := m["name"].(string)
		if !ok {
			continue
		}
		value := m["value"]
		found := slices.IndexFunc(list, func(t any) bool {
			tm, ok := t.(map[string]any)
			return ok && tm["name"] == name
		})
		switch {
		case found >= 0 && value == nil:
			list = slices.Delete(list, found, found+1)
		case found >= 0:
			list[found].(map[string]any)["value"] = value
		case value != nil:
			list = append(list, map[string]any{"name": name, "value": value})
		}
	}
	target[key] = list
}

// argMapToList converts v1beta3 extra arguments (a map) to v1beta4's list,
// ordered by name.
func argMapToList(m map[string]any) []any {
	var out []any
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, map[string]any{"name": k, "value": m[k]})
	}
	return out
}

// arg is a v1beta4 extra argument.
type arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// args are extra arguments: v1beta4's list of {name, value}; decoding also
// takes v1beta3's map form.
type args []arg

// UnmarshalJSON decodes a list of {name, value} or a map of name to value.
func (a *args) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		*a = nil
		for _, k := range slices.Sorted(maps.Keys(m)) {
			*a = append(*a, arg{Name: k, Value: m[k]})
		}
		return nil
	}
	var l []arg
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*a = l
	return nil
}

// The documents of kind's ConfigTemplateBetaV4, reduced to what a patch
// may meet and the stand-in reads.
type (
	typeMeta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	component struct {
		CertSANs  []string `json:"certSANs,omitempty"`
		ExtraArgs args     `json:"extraArgs"`
	}
	clusterConfiguration struct {
		typeMeta
		KubernetesVersion    string    `json:"kubernetesVersion"`
		ClusterName          string    `json:"clusterName"`
		ControlPlaneEndpoint string    `json:"controlPlaneEndpoint"`
		APIServer            component `json:"apiServer"`
		ControllerManager    component `json:"controllerManager"`
		Scheduler            component `json:"scheduler"`
		Networking           struct {
			PodSubnet     string `json:"podSubnet"`
			ServiceSubnet string `json:"serviceSubnet"`
		} `json:"networking"`
	}
	apiEndpoint struct {
		AdvertiseAddress string `json:"advertiseAddress"`
		BindPort         int32  `json:"bindPort"`
	}
	nodeRegistration struct {
		CRISocket        string `json:"criSocket"`
		KubeletExtraArgs args   `json:"kubeletExtraArgs"`
	}
	initConfiguration struct {
		typeMeta
		BootstrapTokens []struct {
			Token string `json:"token"`
		} `json:"bootstrapTokens"`
		LocalAPIEndpoint apiEndpoint      `json:"localAPIEndpoint"`
		NodeRegistration nodeRegistration `json:"nodeRegistration"`
	}
	joinConfiguration struct {
		typeMeta
		ControlPlane *struct {
			LocalAPIEndpoint apiEndpoint `json:"localAPIEndpoint"`
		} `json:"controlPlane,omitempty"`
		NodeRegistration nodeRegistration `json:"nodeRegistration"`
		Discovery        struct {
			BootstrapToken struct {
				APIServerEndpoint        string `json:"apiServerEndpoint"`
				Token                    string `json:"token"`
				UnsafeSkipCAVerification bool   `json:"unsafeSkipCAVerification"`
			} `json:"bootstrapToken"`
		} `json:"discovery"`
	}
	kubeProxyConfiguration struct {
		typeMeta
		Mode string `json:"mode"`
	}
)

func meta(apiVersion, kind string) typeMeta {
	t := typeMeta{APIVersion: apiVersion, Kind: kind}
	t.Metadata.Name = "config"
	return t
}

// baseDocuments renders kind's kubeadm config documents of node i.
func baseDocuments(in Input, i int) ([]*document, error) {
	c := in.Cluster
	name := in.Names[i]
	endpoint := fmt.Sprintf("%s:%d", controlPlaneName(in), spec.APIServerPort)

	cc := clusterConfiguration{
		typeMeta:             meta(APIVersion, "ClusterConfiguration"),
		KubernetesVersion:    in.KubernetesVersion,
		ClusterName:          c.Name,
		ControlPlaneEndpoint: endpoint,
	}
	cc.APIServer.CertSANs = []string{"localhost", c.Networking.APIServerAddress}
	cc.APIServer.ExtraArgs = args{{Name: "runtime-config", Value: runtimeConfig(c.RuntimeConfig)}}
	cc.ControllerManager.ExtraArgs = args{{Name: "enable-hostpath-provisioner", Value: "true"}}
	cc.Scheduler.ExtraArgs = args{}
	cc.Networking.PodSubnet = c.Networking.PodSubnet
	cc.Networking.ServiceSubnet = c.Networking.ServiceSubnet

	reg := nodeRegistration{
		CRISocket: "unix:///run/containerd/containerd.sock",
		KubeletExtraArgs: args{
			{Name: "node-ip", Value: ""}, // the node's address: not known before it starts
			{Name: "provider-id", Value: fmt.Sprintf("kind://docker/%s/%s", c.Name, name)},
			{Name: "node-labels", Value: commaSeparated(c.Nodes[i].Labels)},
		},
	}
	ic := initConfiguration{typeMeta: meta(APIVersion, "InitConfiguration"), NodeRegistration: reg}
	ic.BootstrapTokens = append(ic.BootstrapTokens, struct {
		Token string `json:"token"`
	}{kindToken})
	ic.LocalAPIEndpoint.BindPort = spec.APIServerPort

	jc := joinConfiguration{typeMeta: meta(APIVersion, "JoinConfiguration"), NodeRegistration: reg}
	if c.Nodes[i].Role == v1alpha4.ControlPlaneRole {
		jc.ControlPlane = &struct {
			LocalAPIEndpoint apiEndpoint `json:"localAPIEndpoint"`
		}{apiEndpoint{BindPort: spec.APIServerPort}}
	}
	jc.Discovery.BootstrapToken.APIServerEndpoint = endpoint
	jc.Discovery.BootstrapToken.Token = kindToken
	jc.Discovery.BootstrapToken.UnsafeSkipCAVerification = true

	objs := []any{cc, ic, jc, meta(kubeletAPIVersion, "KubeletConfiguration")}
	if c.Networking.KubeProxyMode != "none" {
		objs = append(objs, kubeProxyConfiguration{typeMeta: meta(kubeProxyAPIVersion, "KubeProxyConfiguration"), Mode: string(c.Networking.KubeProxyMode)})
	}
	var docs []*document
	for _, o := range objs {
		js, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("render kind's kubeadm config of node %s: %w", name, err)
		}
		var mi matchInfo
		if err := json.Unmarshal(js, &mi); err != nil {
			return nil, fmt.Errorf("render kind's kubeadm config of node %s: %w", name, err)
		}
		docs = append(docs, &document{kind: mi.Kind, apiVersion: mi.APIVersion, json: js})
	}
	return docs, nil
}

// controlPlaneName is the bootstrap control plane's node name.
func controlPlaneName(in Input) string {
	for i, n := range in.Cluster.Nodes {
		if n.Role == v1alpha4.ControlPlaneRole {
			return in.Names[i]
		}
	}
	return in.Cluster.Name + "-control-plane"
}

// commaSeparated renders labels as kind does for --node-labels (k=v,k=v),
// in key order.
func commaSeparated(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// runtimeConfig renders kind's runtimeConfig as the API server's
// --runtime-config value, in key order.
func runtimeConfig(rc map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(rc)) {
		parts = append(parts, k+"="+rc[k])
	}
	return strings.Join(parts, ",")
}
