package lab

import (
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
)

// Status is what `marina status` reports.
type Status struct {
	Machine  vm.Status       `json:"machine"`
	Network  NetworkStatus   `json:"network"`
	Services []ServiceStatus `json:"services"`
	// Route is the host route to the bridge (lima driver only).
	Route *Check `json:"route,omitempty"`
	// Resolver says whether the host sends the zone to the lab's DNS.
	Resolver *Check `json:"resolver,omitempty"`
	// Proxy is the effective proxy (passwords hidden) and what bypasses it.
	Proxy config.EffectiveProxy `json:"proxy"`
}

// NetworkStatus is the bridge network's state.
type NetworkStatus struct {
	Name    string `json:"name"`
	Subnet  string `json:"subnet"`
	IPRange string `json:"ipRange,omitempty"`
	Present bool   `json:"present"`
	// Problem says how the live network differs from the config.
	Problem string `json:"problem,omitempty"`
	Bridge  string `json:"bridge,omitempty"`
}

// ServiceStatus is one container marina's plugins run on the Docker host
// (registry mirrors, the local DNS pair, ...).
type ServiceStatus struct {
	Name      string `json:"name"`
	Component string `json:"component,omitempty"`
	Image     string `json:"image"`
	State     string `json:"state"`
	Running   bool   `json:"running"`
	IP        string `json:"ip,omitempty"`
}

// CheckStatus is the outcome of one check (doctor's, or status' route and
// resolver lines).
type CheckStatus string

// The outcomes.
const (
	OK   CheckStatus = "OK"
	Warn CheckStatus = "WARN"
	Fail CheckStatus = "FAIL"
)

// Check is one doctor finding.
type Check struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	Detail string      `json:"detail,omitempty"`
	// Fix is the command or action that repairs a WARN or FAIL.
	Fix string `json:"fix,omitempty"`
	// Instructions are longer steps behind Fix (several lines, e.g. the
	// resolver files to add by hand), shown after the table.
	Instructions string `json:"instructions,omitempty"`
}

// ClusterInfo is one row of `marina cluster list`.
type ClusterInfo struct {
	Name    string `json:"name"`
	Slot    int    `json:"slot"`
	APIPort int    `json:"apiPort"`
	Nodes   int    `json:"nodes"`
	Ready   int    `json:"ready"`
	Version string `json:"version,omitempty"`
	Fleet   string `json:"fleet,omitempty"`
	// Labels are the control-plane node's labels (what -l selects on).
	Labels   map[string]string `json:"labels,omitempty"`
	Complete bool              `json:"complete"`
	// CreatedAt is when the cluster was completed (its marker), or else
	// when its control-plane node registered; RFC 3339, UTC.
	CreatedAt string `json:"createdAt,omitempty"`
	// Age is the time since CreatedAt, as kubectl shows it (5m, 3h, 2d).
	Age        string `json:"age,omitempty"`
	Kubeconfig string `json:"kubeconfig"`
	// Problem says why the cluster could not be read.
	Problem string `json:"problem,omitempty"`
}

// View is `marina status -o json|yaml`: the lab and its clusters.
type View struct {
	*Status
	Clusters []ClusterInfo `json:"clusters"`
}
