// Package externaldns is marina's built-in externaldns plugin: it deploys
// ExternalDNS into every cluster with the coredns provider writing into the
// local DNS etcd (run by the localdns plugin), so a LoadBalancer Service
// gets a name under the local zone — <service>.<namespace>.<cluster>.<zone>
// by default, or the names in its external-dns.alpha.kubernetes.io/hostname
// annotation. ExternalDNS's owner id is the cluster name; when a cluster is
// deleted, the plugin stops its ExternalDNS and removes exactly the records
// that cluster owned from etcd, leaving other clusters' records untouched.
//
// The package is built only against marina's public SDK (sdk/).
package externaldns

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/bcollard/marina/sdk"
)

// Version is the plugin's version (Info.Version).
const Version = "0.1.0"

// Name is the plugin's name.
const Name = "externaldns"

// LocalDNS is the plugin this one depends on, and the outputs it reads.
const (
	LocalDNS            = "localdns"
	LocalDNSEtcdOutput  = "etcdEndpoint"
	localDNSDefaultPort = "2379"
)

// Outputs this plugin publishes from PostCluster.
const (
	// OutputNamespace is the namespace ExternalDNS runs in.
	OutputNamespace = "namespace"
	// OutputDomain is the domain default names are made under (<cluster>.<zone>).
	OutputDomain = "domain"
)

// Plugin is the externaldns plugin.
type Plugin struct{}

// New returns the externaldns plugin.
func New() sdk.Plugin { return &Plugin{} }

// Info describes the plugin.
func (*Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         Name,
		Version:      Version,
		Description:  "Deploys ExternalDNS (coredns provider -> the local DNS etcd) in every cluster; removes a deleted cluster's records.",
		Maintainer:   "marina",
		Dependencies: []sdk.Dependency{{Name: LocalDNS}},
		Capabilities: []string{sdk.CapKubeconfig},
		Outputs:      []string{OutputNamespace, OutputDomain},
		Timeouts: map[sdk.Hook]time.Duration{
			sdk.PostCluster:      5 * time.Minute,
			sdk.PreClusterDelete: 2 * time.Minute,
		},
		Config: defaultConfig(),
	}
}

// dnsLabel is an RFC 1123 label: what a cluster name must be to sit in a DNS
// name (and in ExternalDNS's --fqdn-template).
var dnsLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })

// checkNames validates the cluster name and zone that go into DNS names.
func checkNames(cluster, zone string) error {
	if !dnsLabel().MatchString(cluster) {
		return fmt.Errorf("cluster name %q cannot be part of a DNS name: it must be lower-case letters, digits and '-' (at most 63), starting and ending with a letter or digit", cluster)
	}
	if zone == "" {
		return errors.New("the local DNS zone (Env.DNSZone) is empty: set dns.zone in marina's config")
	}
	for _, l := range strings.Split(zone, ".") {
		if !dnsLabel().MatchString(l) {
			return fmt.Errorf("DNS zone %q is not a valid lower-case DNS name (label %q)", zone, l)
		}
	}
	return nil
}

// etcdEndpoint is the local DNS etcd: the localdns plugin's output, else the
// default address from the environment.
func etcdEndpoint(req *sdk.Request) (string, error) {
	if ep, ok := req.Dep(LocalDNS, LocalDNSEtcdOutput); ok && ep != "" {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			// ExternalDNS refuses other schemes (provider/coredns/coredns.go, getETCDConfig).
			return "", fmt.Errorf("the %s plugin published %s=%q, which is not an http:// or https:// URL", LocalDNS, LocalDNSEtcdOutput, ep)
		}
		return ep, nil
	}
	if req.Env.DNSEtcdIP == "" {
		return "", errNoEndpoint
	}
	return "http://" + req.Env.DNSEtcdIP + ":" + localDNSDefaultPort, nil
}

// image is the ExternalDNS image: the host's override or DefaultImage.
func image(env sdk.Env) string {
	if img := env.Images[ImageKey]; img != "" {
		return img
	}
	return DefaultImage
}

// paramsFor gathers what the rendered objects depend on.
func paramsFor(req *sdk.Request) (params, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return params{}, err
	}
	if req.Cluster == nil {
		return params{}, fmt.Errorf("%s: the host passed no cluster", req.Hook)
	}
	if err := checkNames(req.Cluster.Name, req.Env.DNSZone); err != nil {
		return params{}, err
	}
	ep, err := etcdEndpoint(req)
	if err != nil {
		return params{}, err
	}
	return params{
		Cluster:      req.Cluster.Name,
		Zone:         req.Env.DNSZone,
		EtcdEndpoint: ep,
		Image:        image(req.Env),
		Config:       cfg,
	}, nil
}

// PostCluster applies ExternalDNS to the new cluster with server-side apply
// (a re-run with the same inputs changes nothing) and, when waitReady is set,
// waits until its Deployment is Available.
func (*Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	p, err := paramsFor(req)
	if err != nil {
		return nil, err
	}
	dyn, err := newClient(p.Cluster, req.Cluster.Kubeconfig)
	if err != nil {
		return nil, err
	}
	req.Progress("applying ExternalDNS (%s) to %s: names under %s", p.Image, p.Cluster, defaultDomain(p.Cluster, p.Zone))
	if err := applyAll(ctx, dyn, render(p)); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", p.Cluster, err)
	}
	if p.Config.WaitReady {
		req.Progress("waiting for ExternalDNS to become available in %s", p.Cluster)
		if err := waitAvailable(ctx, dyn, p.Config.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("cluster %s: %w; fix: check that image %s can be pulled "+
				"(override it with images.externalDNS) and that the local DNS etcd %s is reachable from the cluster, "+
				"or set plugins.externaldns.config.waitReady=false not to wait", p.Cluster, err, p.Image, p.EtcdEndpoint)
		}
	}
	return &sdk.Result{Outputs: map[string]string{
		OutputNamespace: Namespace,
		OutputDomain:    defaultDomain(p.Cluster, p.Zone),
	}}, nil
}

// PreClusterDelete stops the cluster's ExternalDNS (so it cannot write
// again) and removes the records it owned from the local DNS etcd. Records
// of other clusters and records without an owner are never touched; a re-run
// with nothing left to remove succeeds. When etcd cannot be reached it fails
// with a *StaleRecordsError that says what is left and how to remove it.
func (*Plugin) PreClusterDelete(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	if req.Cluster == nil {
		return nil, fmt.Errorf("%s: the host passed no cluster", req.Hook)
	}
	cluster := req.Cluster.Name
	ep, err := etcdEndpoint(req)
	if err != nil {
		return nil, &StaleRecordsError{Cluster: cluster, Endpoint: "(unknown)", Err: err}
	}
	res := &sdk.Result{}

	// ExternalDNS re-creates what it owns every interval: stop it first.
	// The cluster is about to go, so an unreachable API is a warning only.
	if len(req.Cluster.Kubeconfig) > 0 {
		req.Progress("stopping ExternalDNS in %s", cluster)
		dyn, err := newClient(cluster, req.Cluster.Kubeconfig)
		if err == nil {
			err = stopExternalDNS(ctx, dyn, stopTimeout)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.Warnings = append(res.Warnings, sdk.Diagnostic{
				Severity: sdk.SeverityWarning,
				Summary:  fmt.Sprintf("could not stop ExternalDNS in cluster %s before removing its DNS records", cluster),
				Detail:   fmt.Sprintf("%v. If it still runs, it may write records again until the cluster is gone.", err),
			})
			req.Logger().Warn("could not stop ExternalDNS", "cluster", cluster, "err", err)
		}
	}

	req.Progress("removing DNS records of %s from the local DNS (%s)", cluster, ep)
	stats, err := removeOwned(ctx, ep, cluster, req.Logger())
	if err != nil {
		return nil, &StaleRecordsError{Cluster: cluster, Endpoint: ep, Err: err}
	}
	req.Progress("removed %d DNS record(s) of %s from the local DNS", len(stats.Deleted), cluster)
	req.Logger().Info("removed DNS records", "cluster", cluster, "deleted", len(stats.Deleted), "scanned", stats.Scanned)
	return res, nil
}
