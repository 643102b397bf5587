package sdk

import (
	"fmt"
	"time"

	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

var hookToPB = map[Hook]pb.Hook{
	PostUp:           pb.Hook_HOOK_POST_UP,
	PreCluster:       pb.Hook_HOOK_PRE_CLUSTER,
	PostCluster:      pb.Hook_HOOK_POST_CLUSTER,
	PreClusterDelete: pb.Hook_HOOK_PRE_CLUSTER_DELETE,
	PreDown:          pb.Hook_HOOK_PRE_DOWN,
	PreDestroy:       pb.Hook_HOOK_PRE_DESTROY,
}

func hookFromPB(h pb.Hook) (Hook, error) {
	for k, v := range hookToPB {
		if v == h {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown hook %v", h)
}

// ParseHook returns the Hook named s (e.g. "PostCluster").
func ParseHook(s string) (Hook, error) {
	for _, h := range AllHooks {
		if string(h) == s {
			return h, nil
		}
	}
	return "", fmt.Errorf("unknown hook %q; hooks are %v", s, AllHooks)
}

func envToPB(e Env) *pb.Env {
	out := &pb.Env{
		HostVersion: e.HostVersion, VmName: e.VMName, Driver: e.Driver, HostOs: e.HostOS,
		DockerHost: e.DockerHost, NetworkName: e.NetworkName, BridgeCidr: e.BridgeCIDR,
		Gateway: e.Gateway, DynamicIpRange: e.DynamicIPRange, DnsZone: e.DNSZone,
		DnsEtcdIp: e.DNSEtcdIP, DnsServerIp: e.DNSServerIP, StateDir: e.StateDir,
		Images: e.Images, RegistryCacheStorage: e.RegistryCacheStorage, RegistryCacheDir: e.RegistryCacheDir,
		ExtraCas: e.ExtraCAs,
	}
	for _, r := range e.CustomDNSResolvers {
		out.CustomDnsResolvers = append(out.CustomDnsResolvers, &pb.DomainResolvers{Domain: r.Domain, Resolvers: r.Resolvers})
	}
	for _, m := range e.Mirrors {
		out.Mirrors = append(out.Mirrors, &pb.Mirror{Name: m.Name, Port: int32(m.Port), RemoteUrl: m.RemoteURL, Username: m.Username, Password: m.Password})
	}
	if e.Proxy.Set() || len(e.Proxy.NoProxy) > 0 {
		out.Proxy = &pb.Proxy{Http: e.Proxy.HTTP, Https: e.Proxy.HTTPS, NoProxy: e.Proxy.NoProxy}
	}
	if e.LabCA != (LabCA{}) {
		out.LabCa = &pb.LabCA{Cert: e.LabCA.Cert, Key: e.LabCA.Key}
	}
	return out
}

func envFromPB(e *pb.Env) Env {
	out := Env{
		HostVersion: e.GetHostVersion(), VMName: e.GetVmName(), Driver: e.GetDriver(), HostOS: e.GetHostOs(),
		DockerHost: e.GetDockerHost(), NetworkName: e.GetNetworkName(), BridgeCIDR: e.GetBridgeCidr(),
		Gateway: e.GetGateway(), DynamicIPRange: e.GetDynamicIpRange(), DNSZone: e.GetDnsZone(),
		DNSEtcdIP: e.GetDnsEtcdIp(), DNSServerIP: e.GetDnsServerIp(), StateDir: e.GetStateDir(),
		Images: e.GetImages(), RegistryCacheStorage: e.GetRegistryCacheStorage(), RegistryCacheDir: e.GetRegistryCacheDir(),
		ExtraCAs: e.GetExtraCas(),
	}
	for _, r := range e.GetCustomDnsResolvers() {
		out.CustomDNSResolvers = append(out.CustomDNSResolvers, DomainResolvers{Domain: r.GetDomain(), Resolvers: r.GetResolvers()})
	}
	for _, m := range e.GetMirrors() {
		out.Mirrors = append(out.Mirrors, Mirror{Name: m.GetName(), Port: int(m.GetPort()), RemoteURL: m.GetRemoteUrl(), Username: m.GetUsername(), Password: m.GetPassword()})
	}
	if p := e.GetProxy(); p != nil {
		out.Proxy = Proxy{HTTP: p.GetHttp(), HTTPS: p.GetHttps(), NoProxy: p.GetNoProxy()}
	}
	if ca := e.GetLabCa(); ca != nil {
		out.LabCA = LabCA{Cert: ca.GetCert(), Key: ca.GetKey()}
	}
	return out
}

func clusterToPB(c *Cluster) *pb.Cluster {
	if c == nil {
		return nil
	}
	out := &pb.Cluster{
		Name: c.Name, Slot: int32(c.Slot), ApiPort: int32(c.APIPort), ServiceSubnet: c.ServiceSubnet,
		PodSubnet: c.PodSubnet, NodeVersion: c.NodeVersion, NodeImage: c.NodeImage, Labels: c.Labels,
		Kubeconfig: c.Kubeconfig, KubeconfigPath: c.KubeconfigPath, Workers: int32(c.Workers), Mirrors: c.Mirrors,
	}
	for _, p := range c.MetalLBPools {
		out.MetallbPools = append(out.MetallbPools, &pb.AddressRange{First: p.First, Last: p.Last})
	}
	return out
}

func clusterFromPB(c *pb.Cluster) *Cluster {
	if c == nil {
		return nil
	}
	out := &Cluster{
		Name: c.GetName(), Slot: int(c.GetSlot()), APIPort: int(c.GetApiPort()), ServiceSubnet: c.GetServiceSubnet(),
		PodSubnet: c.GetPodSubnet(), NodeVersion: c.GetNodeVersion(), NodeImage: c.GetNodeImage(), Labels: c.GetLabels(),
		Kubeconfig: c.GetKubeconfig(), KubeconfigPath: c.GetKubeconfigPath(), Workers: int(c.GetWorkers()), Mirrors: c.GetMirrors(),
	}
	for _, p := range c.GetMetallbPools() {
		out.MetalLBPools = append(out.MetalLBPools, AddressRange{First: p.GetFirst(), Last: p.GetLast()})
	}
	return out
}

func diagsToPB(ds []Diagnostic) []*pb.Diagnostic {
	var out []*pb.Diagnostic
	for _, d := range ds {
		sev := pb.Diagnostic_SEVERITY_ERROR
		if d.Severity == SeverityWarning {
			sev = pb.Diagnostic_SEVERITY_WARNING
		}
		out = append(out, &pb.Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail, Path: d.Path})
	}
	return out
}

func diagsFromPB(ds []*pb.Diagnostic) []Diagnostic {
	var out []Diagnostic
	for _, d := range ds {
		sev := SeverityError
		if d.GetSeverity() == pb.Diagnostic_SEVERITY_WARNING {
			sev = SeverityWarning
		}
		out = append(out, Diagnostic{Severity: sev, Summary: d.GetSummary(), Detail: d.GetDetail(), Path: d.GetPath()})
	}
	return out
}

func resultToPB(r *Result) *pb.HookResult {
	if r == nil {
		return &pb.HookResult{}
	}
	out := &pb.HookResult{Outputs: r.Outputs, Diagnostics: diagsToPB(r.Warnings)}
	if k := r.Kind; k != nil {
		pk := &pb.KindContribution{ContainerdConfigPatches: k.ContainerdConfigPatches, KubeadmConfigPatches: k.KubeadmConfigPatches, NodeLabels: k.NodeLabels}
		for _, f := range k.NodeFiles {
			pk.NodeFiles = append(pk.NodeFiles, &pb.NodeFile{Path: f.Path, Content: f.Content, Mode: f.Mode})
		}
		for _, m := range k.PortMappings {
			pk.PortMappings = append(pk.PortMappings, &pb.PortMapping{ContainerPort: int32(m.ContainerPort), HostPort: int32(m.HostPort), ListenAddress: m.ListenAddress, Protocol: m.Protocol})
		}
		out.Kind = pk
	}
	for _, c := range r.HostChanges {
		pc := &pb.HostChange{Reason: c.Reason}
		if c.Resolver != nil {
			pc.Change = &pb.HostChange_Resolver{Resolver: &pb.ResolverChange{Domain: c.Resolver.Domain, Nameservers: c.Resolver.Nameservers, Remove: c.Resolver.Remove}}
		}
		out.HostChanges = append(out.HostChanges, pc)
	}
	if r.Steady != nil {
		ps := &pb.Steady{}
		for _, c := range r.Steady.Containers {
			ps.Containers = append(ps.Containers, &pb.SteadyContainer{Id: c.ID, Spec: c.Spec})
		}
		out.Steady = ps
	}
	return out
}

func resultFromPB(r *pb.HookResult) *Result {
	out := &Result{Outputs: r.GetOutputs(), Warnings: diagsFromPB(r.GetDiagnostics())}
	if k := r.GetKind(); k != nil {
		rk := &KindContribution{ContainerdConfigPatches: k.GetContainerdConfigPatches(), KubeadmConfigPatches: k.GetKubeadmConfigPatches(), NodeLabels: k.GetNodeLabels()}
		for _, f := range k.GetNodeFiles() {
			rk.NodeFiles = append(rk.NodeFiles, NodeFile{Path: f.GetPath(), Content: f.GetContent(), Mode: f.GetMode()})
		}
		for _, m := range k.GetPortMappings() {
			rk.PortMappings = append(rk.PortMappings, PortMapping{ContainerPort: int(m.GetContainerPort()), HostPort: int(m.GetHostPort()), ListenAddress: m.GetListenAddress(), Protocol: m.GetProtocol()})
		}
		out.Kind = rk
	}
	for _, c := range r.GetHostChanges() {
		hc := HostChange{Reason: c.GetReason()}
		if rc := c.GetResolver(); rc != nil {
			hc.Resolver = &ResolverChange{Domain: rc.GetDomain(), Nameservers: rc.GetNameservers(), Remove: rc.GetRemove()}
		}
		out.HostChanges = append(out.HostChanges, hc)
	}
	if ps := r.GetSteady(); ps != nil {
		st := &Steady{}
		for _, c := range ps.GetContainers() {
			st.Containers = append(st.Containers, SteadyContainer{ID: c.GetId(), Spec: c.GetSpec()})
		}
		out.Steady = st
	}
	return out
}

// Description is what a plugin says about itself (the host's view of Info).
type Description struct {
	Name           string                 `json:"name"`
	Version        string                 `json:"version"`
	Protocol       string                 `json:"protocol"`
	Description    string                 `json:"description,omitempty"`
	Maintainer     string                 `json:"maintainer,omitempty"`
	Hooks          []Hook                 `json:"hooks"`
	Dependencies   []Dependency           `json:"dependencies,omitempty"`
	ConfigSchema   []byte                 `json:"configSchema,omitempty"`
	ConfigDefaults []byte                 `json:"configDefaults,omitempty"`
	Capabilities   []string               `json:"capabilities,omitempty"`
	Timeouts       map[Hook]time.Duration `json:"timeouts,omitempty"`
	Outputs        []string               `json:"outputs,omitempty"`
}

// Timeout returns the plugin's default deadline for hook h.
func (d *Description) Timeout(h Hook) time.Duration {
	if t, ok := d.Timeouts[h]; ok && t > 0 {
		return t
	}
	return DefaultTimeout
}

// Has reports whether the plugin implements hook h.
func (d *Description) Has(h Hook) bool {
	for _, x := range d.Hooks {
		if x == h {
			return true
		}
	}
	return false
}

func descriptionToPB(d *Description) *pb.Description {
	out := &pb.Description{
		Name: d.Name, Version: d.Version, Protocol: d.Protocol, Description: d.Description, Maintainer: d.Maintainer,
		ConfigSchemaJson: d.ConfigSchema, ConfigDefaultsJson: d.ConfigDefaults, Capabilities: d.Capabilities, Outputs: d.Outputs,
		TimeoutsMs: map[int32]int64{},
	}
	for _, h := range d.Hooks {
		out.Hooks = append(out.Hooks, hookToPB[h])
	}
	for _, dep := range d.Dependencies {
		out.Dependencies = append(out.Dependencies, &pb.Dependency{Name: dep.Name, Version: dep.Version, Optional: dep.Optional})
	}
	for h, t := range d.Timeouts {
		out.TimeoutsMs[int32(hookToPB[h])] = t.Milliseconds()
	}
	return out
}

func descriptionFromPB(p *pb.Description) (*Description, error) {
	d := &Description{
		Name: p.GetName(), Version: p.GetVersion(), Protocol: p.GetProtocol(), Description: p.GetDescription(), Maintainer: p.GetMaintainer(),
		ConfigSchema: p.GetConfigSchemaJson(), ConfigDefaults: p.GetConfigDefaultsJson(), Capabilities: p.GetCapabilities(), Outputs: p.GetOutputs(),
		Timeouts: map[Hook]time.Duration{},
	}
	for _, h := range p.GetHooks() {
		hk, err := hookFromPB(h)
		if err != nil {
			return nil, fmt.Errorf("plugin %s declares %w (it may need a newer marina)", d.Name, err)
		}
		d.Hooks = append(d.Hooks, hk)
	}
	for _, dep := range p.GetDependencies() {
		d.Dependencies = append(d.Dependencies, Dependency{Name: dep.GetName(), Version: dep.GetVersion(), Optional: dep.GetOptional()})
	}
	for h, ms := range p.GetTimeoutsMs() {
		hk, err := hookFromPB(pb.Hook(h))
		if err != nil {
			continue
		}
		d.Timeouts[hk] = time.Duration(ms) * time.Millisecond
	}
	return d, nil
}
