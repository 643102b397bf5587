package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

// GRPCPlugin is the go-plugin glue for marina's protocol. Plugins set Impl
// (Serve does this); the host leaves it nil and gets a *HostClient from
// go-plugin's Dispense. Authors do not use it.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl *Server
}

// GRPCServer registers the plugin's service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("sdk: GRPCPlugin has no Impl")
	}
	pb.RegisterPluginServer(s, p.Impl)
	return nil
}

// GRPCClient returns a *HostClient over the connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewHostClient(c), nil
}

// HostPluginSets is what the host passes as go-plugin's VersionedPlugins.
func HostPluginSets() map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{ProtocolMajor: {PluginName: &GRPCPlugin{}}}
}

// HostClient is the host's typed view of a running plugin (used by marina's
// core; authors do not use it).
type HostClient struct{ c pb.PluginClient }

// NewHostClient wraps a gRPC connection to a plugin.
func NewHostClient(c grpc.ClientConnInterface) *HostClient {
	return &HostClient{c: pb.NewPluginClient(c)}
}

// Describe asks the plugin who it is.
func (h *HostClient) Describe(ctx context.Context, hostVersion string) (*Description, error) {
	d, err := h.c.Describe(ctx, &pb.DescribeRequest{HostVersion: hostVersion, HostProtocolMinor: ProtocolMinor})
	if err != nil {
		return nil, err
	}
	return descriptionFromPB(d)
}

// ValidateConfig asks the plugin to check its config (JSON).
func (h *HostClient) ValidateConfig(ctx context.Context, configJSON []byte) ([]Diagnostic, error) {
	r, err := h.c.ValidateConfig(ctx, &pb.ValidateConfigRequest{ConfigJson: configJSON})
	if err != nil {
		return nil, err
	}
	return diagsFromPB(r.GetDiagnostics()), nil
}

// HookCall is one hook invocation, from the host's side.
type HookCall struct {
	Hook       Hook
	Env        Env
	Cluster    *Cluster
	ConfigJSON []byte
	Deps       map[string]map[string]string
	RunID      string
}

// RunHook runs a hook, passing progress messages to onProgress (may be nil).
func (h *HostClient) RunHook(ctx context.Context, call HookCall, onProgress func(string)) (*Result, error) {
	req := &pb.HookRequest{
		Hook: hookToPB[call.Hook], Env: envToPB(call.Env), Cluster: clusterToPB(call.Cluster),
		ConfigJson: call.ConfigJSON, RunId: call.RunID, DependencyOutputs: map[string]*pb.Outputs{},
	}
	if req.Hook == pb.Hook_HOOK_UNSPECIFIED {
		return nil, fmt.Errorf("unknown hook %q", call.Hook)
	}
	for name, vals := range call.Deps {
		req.DependencyOutputs[name] = &pb.Outputs{Values: vals}
	}
	stream, err := h.c.RunHook(ctx, req)
	if err != nil {
		return nil, err
	}
	var result *Result
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch e := ev.GetEvent().(type) {
		case *pb.HookEvent_Progress:
			if onProgress != nil {
				onProgress(e.Progress.GetMessage())
			}
		case *pb.HookEvent_Result:
			result = resultFromPB(e.Result)
		}
	}
	if result == nil {
		return nil, errors.New("the plugin ended the hook without a result")
	}
	return result, nil
}
