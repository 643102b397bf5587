package sdk

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

// ValidateConfig checks configJSON (the plugin's config section, as JSON)
// against p without serving p: it gives the diagnostics that p's
// ValidateConfig RPC answers when p is served, through the same code (the
// checks derived from the config struct's schema, then the struct's own
// Validate, then the answer's conversion to the wire message and back).
// A host that has p's code compiled in can so check p's config without
// starting a process; marina does this for its built-in plugins.
//
// The error is what the RPC would fail with: an invalid Info, a panic in
// p's code (a gRPC status with code Internal whose message says "panicked
// in ValidateConfig" and carries the stack), or an answer that cannot be
// encoded on the wire (text that is not valid UTF-8).
func ValidateConfig(p Plugin, configJSON []byte) ([]Diagnostic, error) {
	srv, err := NewServer(p, nil)
	if err != nil {
		return nil, err
	}
	resp, err := srv.ValidateConfig(context.Background(), &pb.ValidateConfigRequest{ConfigJson: configJSON})
	if err != nil {
		return nil, err
	}
	// Over the wire the answer is marshalled by the plugin and unmarshalled
	// by the host: do the same, so that what cannot cross the wire fails
	// here too, and what can arrives exactly as it would.
	b, err := proto.Marshal(resp)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	var back pb.ValidateConfigResponse
	if err := proto.Unmarshal(b, &back); err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return diagsFromPB(back.GetDiagnostics()), nil
}
