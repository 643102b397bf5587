// Package addon renders kubeadm's CoreDNS addon (the objects kubeadm init
// creates for it) from kubeadm's own manifests, for the stand-in node's
// init program. It imports nothing of kind or marina, to keep that program
// small.
package addon

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// CoreDNSImage is the CoreDNS image kubeadm v1.37 deploys
// (cmd/kubeadm/app/constants.CoreDNSVersion v1.14.6 under registry.k8s.io).
// No stand-in node pulls or runs it.
const CoreDNSImage = "registry.k8s.io/coredns/coredns:v1.14.6"

// controlPlaneTaintKey is kubeadm's control-plane taint key.
const controlPlaneTaintKey = "node-role.kubernetes.io/control-plane"

// DNSServiceIP is kubeadm's kube-dns Service address: the 10th address of
// the first service subnet (cmd/kubeadm/app/constants.GetDNSIP).
func DNSServiceIP(serviceSubnet string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(strings.Split(serviceSubnet, ",")[0]))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("networking.serviceSubnet %q: %w", serviceSubnet, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	if !p.Contains(a) {
		return netip.Addr{}, fmt.Errorf("networking.serviceSubnet %q is too small for kube-dns's address", serviceSubnet)
	}
	return a, nil
}

// Corefile returns the Corefile kubeadm writes into ConfigMap
// kube-system/coredns for dnsDomain, rendered from kubeadm's own template
// the way kubeadm renders it.
func Corefile(dnsDomain string) (string, error) {
	t, err := template.New("coredns-configmap").Parse(CoreDNSConfigMap)
	if err != nil {
		return "", fmt.Errorf("kubeadm's CoreDNS ConfigMap template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, struct{ DNSDomain, UpstreamNameserver, StubDomain string }{DNSDomain: dnsDomain}); err != nil {
		return "", fmt.Errorf("kubeadm's CoreDNS ConfigMap template: %w", err)
	}
	var cm corev1.ConfigMap
	if err := sigsyaml.UnmarshalStrict(b.Bytes(), &cm); err != nil {
		return "", fmt.Errorf("kubeadm's CoreDNS ConfigMap for domain %q: %w", dnsDomain, err)
	}
	return cm.Data["Corefile"], nil
}

// CoreDNSObjects are the objects of kubeadm's CoreDNS addon.
type CoreDNSObjects struct {
	ServiceAccount     *corev1.ServiceAccount
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	ConfigMap          *corev1.ConfigMap
	Deployment         *appsv1.Deployment
	Service            *corev1.Service
}

// CoreDNSReplicas is the replica count of kubeadm's CoreDNS Deployment in a
// new cluster.
const CoreDNSReplicas = 2

// CoreDNSAddon renders kubeadm's CoreDNS addon for a cluster with DNS domain
// dnsDomain and service subnet serviceSubnet, from kubeadm's own manifests,
// as kubeadm renders and decodes them.
func CoreDNSAddon(dnsDomain, serviceSubnet string) (*CoreDNSObjects, error) {
	dnsIP, err := DNSServiceIP(serviceSubnet)
	if err != nil {
		return nil, err
	}
	o := &CoreDNSObjects{
		ServiceAccount:     &corev1.ServiceAccount{},
		ClusterRole:        &rbacv1.ClusterRole{},
		ClusterRoleBinding: &rbacv1.ClusterRoleBinding{},
		ConfigMap:          &corev1.ConfigMap{},
		Deployment:         &appsv1.Deployment{},
		Service:            &corev1.Service{},
	}
	for _, m := range []struct {
		name, tmpl string
		data       any
		into       any
	}{
		{"CoreDNSDeployment", CoreDNSDeployment, struct {
			DeploymentName, Image, ControlPlaneTaintKey string
			Replicas                                    int32
		}{"coredns", CoreDNSImage, controlPlaneTaintKey, CoreDNSReplicas}, o.Deployment},
		{"CoreDNSConfigMap", CoreDNSConfigMap, struct{ DNSDomain, UpstreamNameserver, StubDomain string }{DNSDomain: dnsDomain}, o.ConfigMap},
		{"CoreDNSService", CoreDNSService, struct{ DNSIP string }{dnsIP.String()}, o.Service},
		{"CoreDNSClusterRole", CoreDNSClusterRole, nil, o.ClusterRole},
		{"CoreDNSClusterRoleBinding", CoreDNSClusterRoleBinding, nil, o.ClusterRoleBinding},
		{"CoreDNSServiceAccount", CoreDNSServiceAccount, nil, o.ServiceAccount},
	} {
		t, err := template.New(m.name).Parse(m.tmpl)
		if err != nil {
			return nil, fmt.Errorf("kubeadm's %s template: %w", m.name, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, m.data); err != nil {
			return nil, fmt.Errorf("kubeadm's %s template: %w", m.name, err)
		}
		if err := sigsyaml.UnmarshalStrict(b.Bytes(), m.into); err != nil {
			return nil, fmt.Errorf("kubeadm's %s for domain %q: %w", m.name, dnsDomain, err)
		}
	}
	// kubeadm sets resourceVersion "0" for its create-or-update; a plain
	// create must not carry one.
	o.Service.ResourceVersion = ""
	return o, nil
}
