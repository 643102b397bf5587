package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

const (
	// networkName is the CNI network name written into the conflist.
	networkName = "nodenet"
	// conflistName is the file written into the CNI configuration directory.
	// The "10-" prefix makes it sort first, which is what containerd picks.
	conflistName = "10-nodenet.conflist"
	// ipamDataDir keeps host-local allocations under /run so that they do not
	// survive a node (container) restart, as kindnetd does.
	ipamDataDir = "/run/cni-ipam-state"
)

// cniConflist is the subset of the CNI 1.0.0 network configuration list
// format that nodenet writes.
type cniConflist struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

type ptpPlugin struct {
	Type   string `json:"type"`
	IPMasq bool   `json:"ipMasq"`
	MTU    int    `json:"mtu,omitempty"`
	IPAM   ipam   `json:"ipam"`
}

type ipam struct {
	Type    string        `json:"type"`
	DataDir string        `json:"dataDir,omitempty"`
	Ranges  [][]ipamRange `json:"ranges"`
	Routes  []ipamRoute   `json:"routes"`
}

type ipamRange struct {
	Subnet string `json:"subnet"`
}

type ipamRoute struct {
	Dst string `json:"dst"`
}

type portmapPlugin struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

// RenderConflist renders the CNI conflist for the given pod CIDRs: a ptp
// plugin with host-local IPAM (one range per CIDR, a default route per IP
// family present) chained with portmap. The CIDRs must be valid prefixes; they
// are canonicalised (masked) and must not repeat.
func RenderConflist(cidrs []string) ([]byte, error) {
	if len(cidrs) == 0 {
		return nil, errors.New("no pod CIDR")
	}
	var (
		ranges [][]ipamRange
		routes []ipamRoute
		seen   = map[netip.Prefix]bool{}
		have4  bool
		have6  bool
	)
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("invalid pod CIDR %q: %w", c, err)
		}
		p = p.Masked()
		if seen[p] {
			return nil, fmt.Errorf("duplicate pod CIDR %q", c)
		}
		seen[p] = true
		ranges = append(ranges, []ipamRange{{Subnet: p.String()}})
		if p.Addr().Is4() {
			have4 = true
		} else {
			have6 = true
		}
	}
	if have4 {
		routes = append(routes, ipamRoute{Dst: "0.0.0.0/0"})
	}
	if have6 {
		routes = append(routes, ipamRoute{Dst: "::/0"})
	}
	conf := cniConflist{
		CNIVersion: "1.0.0",
		Name:       networkName,
		Plugins: []any{
			ptpPlugin{
				Type:   "ptp",
				IPMasq: true,
				IPAM: ipam{
					Type:    "host-local",
					DataDir: ipamDataDir,
					Ranges:  ranges,
					Routes:  routes,
				},
			},
			portmapPlugin{
				Type:         "portmap",
				Capabilities: map[string]bool{"portMappings": true},
			},
		},
	}
	out, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// writeFileIfChanged atomically replaces path with data (temp file in the same
// directory, fsync, rename) unless the file already holds exactly data. It
// reports whether the file was written. The temporary file name does not end
// in .conf/.conflist/.json, so the container runtime never loads it.
func writeFileIfChanged(path string, data []byte) (bool, error) {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return false, err
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmpName, path); err != nil {
		return false, err
	}
	return true, nil
}
