package helper

import (
	"bytes"
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bcollard/marina/core/kind"
)

// LoadConfig loads a kind config from its YAML the way kind v0.33.0 loads
// `--config` (pkg/internal/apis/config/encoding.Parse: kind and apiVersion
// first, then a strict decode in which unknown fields are errors), applies
// kind's defaults and runs kind's validation (core/kind.Validate mirrors
// it). It also refuses what the stand-in cannot stand in for: more than one
// control-plane node (kind adds a load-balancer container then) and
// clusters that are not IPv4.
func LoadConfig(raw []byte) (*v1alpha4.Cluster, error) {
	var tm struct {
		Kind       string `yaml:"kind,omitempty"`
		APIVersion string `yaml:"apiVersion,omitempty"`
	}
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("could not determine kind / apiVersion for config: %w", err)
	}
	if tm.APIVersion != kind.ConfigAPIVersion {
		return nil, fmt.Errorf("unknown apiVersion: %s", tm.APIVersion)
	}
	if tm.Kind != kind.ConfigKind {
		return nil, fmt.Errorf("unknown kind %s for apiVersion: %s", tm.Kind, tm.APIVersion)
	}
	cfg := &v1alpha4.Cluster{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("unable to decode config: %w", err)
	}
	v1alpha4.SetDefaultsCluster(cfg)
	if err := kind.Validate(cfg); err != nil {
		return nil, fmt.Errorf("invalid kind config: %w", err)
	}
	controlPlanes := 0
	for _, n := range cfg.Nodes {
		if n.Role == v1alpha4.ControlPlaneRole {
			controlPlanes++
		}
	}
	if controlPlanes != 1 {
		return nil, fmt.Errorf("the kind stand-in runs exactly one control-plane node, the config has %d (kind would add a load balancer, which the stand-in does not have); use one", controlPlanes)
	}
	if cfg.Networking.IPFamily != v1alpha4.IPv4Family {
		return nil, fmt.Errorf("the kind stand-in runs IPv4 clusters only, the config's networking.ipFamily is %s; use ipv4", cfg.Networking.IPFamily)
	}
	return cfg, nil
}

// encodeConfig is the YAML of a config received over the helper protocol,
// as `kind create cluster --config` would read it.
func encodeConfig(cfg *v1alpha4.Cluster) ([]byte, error) {
	if cfg == nil {
		return nil, errors.New("no kind config")
	}
	b, err := sigsyaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the kind config of cluster %s: %w", cfg.Name, err)
	}
	return b, nil
}

// nodeNames names the nodes as kind does (common.MakeNodeNamer):
// NAME-<role>, then NAME-<role>2, NAME-<role>3, ... per role.
func nodeNames(cfg *v1alpha4.Cluster) []string {
	count := map[v1alpha4.NodeRole]int{}
	names := make([]string, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		count[n.Role]++
		suffix := ""
		if c := count[n.Role]; c > 1 {
			suffix = fmt.Sprint(c)
		}
		names[i] = fmt.Sprintf("%s-%s%s", cfg.Name, n.Role, suffix)
	}
	return names
}
