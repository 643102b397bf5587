// Command rawplugin speaks go-plugin directly (not through sdk.Serve) to
// claim protocol versions marina does not speak, for the tests of package
// core/plugin:
//
//	-proto 2      serves only protocol major 2 (the handshake fails)
//	-minor 9      serves major 1 but describes itself as protocol 1.9
//	-caps gpu     describes itself with these capabilities (comma-separated),
//	              which a newer SDK might know
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/bcollard/marina/sdk"
	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

type plug struct{}

func (plug) Info() sdk.Info { return sdk.Info{Name: "raw", Version: "1.0.0"} }
func (plug) PostUp(context.Context, *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{}, nil
}

// minorServer reports a newer protocol minor than the SDK's.
type minorServer struct {
	*sdk.Server
	protocol string
	caps     []string
}

func (m minorServer) Describe(ctx context.Context, r *pb.DescribeRequest) (*pb.Description, error) {
	d, err := m.Server.Describe(ctx, r)
	if err != nil {
		return nil, err
	}
	d.Protocol = m.protocol
	d.Capabilities = append(d.Capabilities, m.caps...)
	return d, nil
}

type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv pb.PluginServer
}

func (p grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterPluginServer(s, p.srv)
	return nil
}

func (grpcPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("server only")
}

func main() {
	proto := flag.Int("proto", 1, "protocol major to serve")
	minor := flag.Int("minor", 0, "protocol minor to describe")
	caps := flag.String("caps", "", "capabilities to describe, comma-separated")
	_ = flag.String("marker", "", "marker for the process table")
	flag.Parse()
	srv, err := sdk.NewServer(plug{}, sdk.NewLogger(os.Stderr, slog.LevelDebug))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hs := sdk.Handshake
	hs.ProtocolVersion = uint(*proto)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: map[int]goplugin.PluginSet{*proto: {sdk.PluginName: grpcPlugin{srv: minorServer{Server: srv, protocol: fmt.Sprintf("%d.%d", *proto, *minor), caps: strings.FieldsFunc(*caps, func(r rune) bool { return r == ',' })}}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
	})
}
