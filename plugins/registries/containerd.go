package registries

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/bcollard/marina/sdk"
)

// certsDir is containerd's registry host configuration directory in every
// node (config_path).
const certsDir = "/etc/containerd/certs.d"

// criImagesPlugin is the containerd 2.x plugin that owns image pulls for
// Kubernetes (config version 3 name; containerd 1.x called it
// io.containerd.grpc.v1.cri).
const criImagesPlugin = "io.containerd.cri.v1.images"

// hostsFile is containerd's hosts.toml for one registry host namespace
// (https://github.com/containerd/containerd/blob/main/docs/hosts.md).
type hostsFile struct {
	// Server is the upstream: tried after every host, so a pull falls back
	// to it when the mirror is down.
	Server string `toml:"server"`
	// Host holds the mirrors, tried in order.
	Host map[string]hostEntry `toml:"host"`
}

type hostEntry struct {
	// Capabilities: a private mirror is trusted to pull and to resolve tags.
	Capabilities []string `toml:"capabilities"`
}

// containerdPatch is the containerd config fragment that points the CRI
// image service at certsDir.
type containerdPatch struct {
	Plugins map[string]criImagesConfig `toml:"plugins"`
}

type criImagesConfig struct {
	Registry struct {
		ConfigPath string `toml:"config_path"`
	} `toml:"registry"`
}

// hostsDir is the directory of host namespace host under certsDir. A host
// with a port uses containerd's "host_port_" form (looked up before
// "host:port"), so no path holds a ':' — which bind-mount syntax and some
// copy tools do not allow.
func hostsDir(host string) string {
	if h, p, ok := strings.Cut(host, ":"); ok {
		if _, err := strconv.Atoi(p); err == nil {
			return path.Join(certsDir, h+"_"+p+"_")
		}
	}
	return path.Join(certsDir, host)
}

// renderHostsTOML renders the hosts.toml that sends pulls of m's upstream
// through m (by container name on the kind network), falling back to the
// upstream itself.
func renderHostsTOML(m mirror) ([]byte, error) {
	f := hostsFile{
		Server: m.upstream.String(),
		Host: map[string]hostEntry{
			"http://" + m.Name + ":" + strconv.Itoa(m.Port): {Capabilities: []string{"pull", "resolve"}},
		},
	}
	return marshalTOML(f)
}

// renderContainerdPatch renders the containerd config patch setting the CRI
// registry config_path to certsDir.
//
// Why it is needed with kind v0.33.0 node images: they run containerd v2.3.4
// with a config that sets no config_path, so containerd's own default
// applies — "/etc/containerd/certs.d:/etc/docker/certs.d" — and that
// two-directory list is reported not to be honoured by the transfer-service
// pull path that CRI uses by default (containerd issues #12636, #12808). A
// single directory works with every containerd 2.x.
//
// The fragment carries no `version` key on purpose: kind skips a patch whose
// version differs from its node config's (version 2 in kind v0.33.0), and
// containerd's 2->3 migration keeps an existing io.containerd.cri.v1.images
// table, filling in only what the version-2 CRI section sets (kind's sets no
// registry).
func renderContainerdPatch() ([]byte, error) {
	var c criImagesConfig
	c.Registry.ConfigPath = certsDir
	return marshalTOML(containerdPatch{Plugins: map[string]criImagesConfig{criImagesPlugin: c}})
}

func marshalTOML(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("render TOML: %w", err)
	}
	return buf.Bytes(), nil
}

// kindContribution is what PreCluster declares for the mirrors ms: one
// hosts.toml per mirrored registry host and the config_path patch.
func kindContribution(ms []mirror) (*sdk.KindContribution, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	kc := &sdk.KindContribution{}
	for _, m := range ms {
		b, err := renderHostsTOML(m)
		if err != nil {
			return nil, fmt.Errorf("mirror %s: %w", m.Name, err)
		}
		kc.NodeFiles = append(kc.NodeFiles, sdk.NodeFile{Path: path.Join(hostsDir(m.host), "hosts.toml"), Content: b, Mode: 0o644})
	}
	patch, err := renderContainerdPatch()
	if err != nil {
		return nil, err
	}
	kc.ContainerdConfigPatches = []string{string(patch)}
	return kc, nil
}
