// Command bareplugin is the baseline of core/plugin's benchmarks: the
// smallest go-plugin gRPC plugin there is. Its one plugin, "hello", adds no
// service of its own: go-plugin's gRPC server already serves the standard
// gRPC health service, which the benchmark calls as its one RPC. It uses
// none of marina's SDK, so launching it measures go-plugin alone.
package main

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// handshake must match bareHandshake in core/plugin/bench_test.go.
var handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "MARINA_BARE_PLUGIN_COOKIE",
	MagicCookieValue: "bare",
}

// hello is a gRPC plugin (go-plugin picks gRPC only for a set of
// GRPCPlugins) with nothing to register.
type hello struct {
	goplugin.NetRPCUnsupportedPlugin
}

func (hello) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error { return nil }

func (hello) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

func main() {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         goplugin.PluginSet{"hello": hello{}},
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
}
