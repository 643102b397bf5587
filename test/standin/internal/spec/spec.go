// Package spec is the contract between the stand-in's helper (which creates
// the node containers on the Docker host) and its init program (PID 1 in
// every node): the files the helper copies into a node before it starts,
// and where.
package spec

import (
	corev1 "k8s.io/api/core/v1"
)

// Paths inside every node container.
const (
	// File is the node's Spec, as JSON.
	File = "/kind/standin.json"
	// ReadyFile is written by the control plane's init once the API server
	// answers and the objects kubeadm and kind would create (Nodes, CoreDNS)
	// exist; the helper waits for it.
	ReadyFile = "/kind/standin-ready"
	// PKIDir holds the certificates and keys (kubeadm's layout).
	PKIDir = "/etc/kubernetes/pki"
	// AdminKubeconfig is kubeadm's admin.conf: the kubeconfig kind reads
	// back (user kubernetes-admin, group kubeadm:cluster-admins).
	AdminKubeconfig = "/etc/kubernetes/admin.conf"
	// SuperAdminKubeconfig is kubeadm's super-admin.conf (group
	// system:masters), with which the init plays kubeadm and the
	// controllers.
	SuperAdminKubeconfig = "/etc/kubernetes/super-admin.conf"
	// EtcdDataDir is etcd's data directory, inside the node's anonymous
	// /var volume (as in a kind node).
	EtcdDataDir = "/var/lib/etcd"
)

// Files in PKIDir.
const (
	CACert        = "ca.crt"
	APIServerCert = "apiserver.crt"
	APIServerKey  = "apiserver.key"
	SAKey         = "sa.key"
	SAPub         = "sa.pub"
)

// Binaries in the node image.
const (
	BinDir        = "/usr/local/bin"
	Init          = BinDir + "/standin-node"
	Etcd          = BinDir + "/etcd"
	KubeAPIServer = BinDir + "/kube-apiserver"
	Kubectl       = BinDir + "/kubectl"
)

// APIServerPort is the API server's port inside the control-plane node
// (kind's common.APIServerInternalPort).
const APIServerPort = 6443

// Roles, as in kind's io.x-k8s.kind.role label.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// Spec is what the init program of one node needs to know.
type Spec struct {
	// Cluster is the kind cluster name.
	Cluster string `json:"cluster"`
	// Self is this node's name (its container name and hostname).
	Self string `json:"self"`
	// Role is this node's role: RoleControlPlane or RoleWorker.
	Role string `json:"role"`
	// Nodes are every node of the cluster, the control plane first; the
	// control plane's init creates a Node object for each.
	Nodes []Node `json:"nodes"`
	// ServiceSubnet is the API server's --service-cluster-ip-range.
	ServiceSubnet string `json:"serviceSubnet"`
	// DNSDomain is the cluster's DNS domain (kubeadm's networking.dnsDomain).
	DNSDomain string `json:"dnsDomain"`
}

// Node is one Node object the control plane's init creates.
type Node struct {
	// Name is the node's name (its container name).
	Name string `json:"name"`
	// Role is RoleControlPlane or RoleWorker.
	Role string `json:"role"`
	// Labels are the Node's labels: the kubelet's own, --node-labels, and
	// what kubeadm and kind add or remove.
	Labels map[string]string `json:"labels"`
	// Taints are the Node's taints.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// ProviderID is the kubelet's --provider-id (kind://docker/CLUSTER/NODE).
	ProviderID string `json:"providerID"`
}
