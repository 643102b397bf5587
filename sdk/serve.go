package sdk

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bcollard/marina/sdk/peercred"
	pb "github.com/bcollard/marina/sdk/proto/marina/plugin/v1"
)

// Handshake is shared by marina and every plugin. The cookie only keeps a
// plugin binary from being run by mistake; it is not a security measure.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolMajor,
	MagicCookieKey:   "MARINA_PLUGIN_COOKIE",
	MagicCookieValue: "marina-plugin-7c1e0b5d",
}

// PluginName is the name of the service in go-plugin's plugin set.
const PluginName = "marina"

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`) })

// Describe builds the Description of p, checking Info: a plugin whose Info
// is invalid cannot be served.
func Describe(p Plugin) (*Description, error) {
	info := p.Info()
	var problems []string
	if !nameRE().MatchString(info.Name) {
		problems = append(problems, fmt.Sprintf("Name %q must be lower-case letters, digits and '-', starting with a letter", info.Name))
	}
	if _, err := semver.StrictNewVersion(info.Version); err != nil {
		problems = append(problems, fmt.Sprintf("Version %q must be a semantic version such as 1.2.3 (no leading v)", info.Version))
	}
	hooks := Hooks(p)
	if len(hooks) == 0 {
		problems = append(problems, "the plugin implements no hook (PostUp, PreCluster, PostCluster, PreClusterDelete, PreDown or PreDestroy)")
	}
	for _, d := range info.Dependencies {
		if !nameRE().MatchString(d.Name) || d.Name == info.Name {
			problems = append(problems, fmt.Sprintf("dependency %q is not a valid plugin name", d.Name))
		}
		if d.Version != "" {
			if _, err := semver.NewConstraint(d.Version); err != nil {
				problems = append(problems, fmt.Sprintf("dependency %s: version %q is not a semver constraint", d.Name, d.Version))
			}
		}
	}
	for _, c := range (&Description{Capabilities: info.Capabilities}).UnknownCapabilities() {
		problems = append(problems, fmt.Sprintf("capability %q is unknown or declared twice; declare each of %s at most once", c, capabilityNames()))
	}
	for h := range info.Timeouts {
		if _, ok := hooks[h]; !ok {
			problems = append(problems, fmt.Sprintf("Timeouts names hook %s, which the plugin does not implement", h))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("plugin %q: invalid Info: %s", info.Name, strings.Join(problems, "; "))
	}
	d := &Description{
		Name: info.Name, Version: info.Version, Protocol: fmt.Sprintf("%d.%d", ProtocolMajor, ProtocolMinor),
		Description: info.Description, Maintainer: info.Maintainer, Dependencies: info.Dependencies,
		Capabilities: info.Capabilities, Outputs: info.Outputs, Timeouts: info.Timeouts,
	}
	for _, h := range AllHooks {
		if _, ok := hooks[h]; ok {
			d.Hooks = append(d.Hooks, h)
		}
	}
	if info.Config != nil {
		schema, err := ConfigSchema(info.Config)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: config schema: %w", info.Name, err)
		}
		defaults, err := configDefaultsJSON(info.Config)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: config defaults: %w", info.Name, err)
		}
		d.ConfigSchema, d.ConfigDefaults = schema, defaults
	}
	return d, nil
}

// Serve runs p as a marina plugin. It never returns normally; call it from main.
// Running the binary by hand prints a short explanation and exits 1.
//
// Serve binds the plugin's processes to marina's: when marina asks the
// plugin to stop, sends it SIGTERM, or exits (even by SIGKILL), Serve
// kills every process the plugin started (children and their descendants,
// setsid(2) or not; on Linux the plugin is a child subreaper, so orphaned
// descendants stay in its tree) and then exits.
func Serve(p Plugin) {
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		d, err := Describe(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "This is the marina plugin %s %s (hooks: %v); marina runs it.\nInstall it with: marina plugin install %s\n", d.Name, d.Version, d.Hooks, os.Args[0])
		os.Exit(1)
	}
	srv, err := NewServer(p, NewLogger(os.Stderr, slog.LevelDebug))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lt := startLifetime()
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{ProtocolMajor: {PluginName: &GRPCPlugin{Impl: srv}}},
		// Peer credentials (sdk/peercred): only the marina that started
		// the plugin may connect; TLS only if that marina asked for it.
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, peercred.ServerOptions()...)...)
		},
	})
	// The server stopped (marina's shutdown request): nothing the plugin
	// started may outlive it.
	lt.exit(0, "")
}

// NewLogger returns a slog logger writing JSON lines in the format go-plugin
// hosts parse (@level, @message, @timestamp), so records keep their level.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	}))
}

// Server implements the wire protocol for one plugin value. Serve uses it;
// sdk/plugintest uses it in-process.
type Server struct {
	pb.UnimplementedPluginServer
	plugin Plugin
	desc   *Description
	info   Info
	hooks  map[Hook]HookFunc
	log    *slog.Logger
}

// NewServer checks p's Info and returns a Server for it.
func NewServer(p Plugin, log *slog.Logger) (*Server, error) {
	d, err := Describe(p)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{plugin: p, desc: d, info: p.Info(), hooks: Hooks(p), log: log}, nil
}

// Describe implements the Describe RPC.
func (s *Server) Describe(context.Context, *pb.DescribeRequest) (*pb.Description, error) {
	return descriptionToPB(s.desc), nil
}

// ValidateConfig implements the ValidateConfig RPC.
func (s *Server) ValidateConfig(_ context.Context, req *pb.ValidateConfigRequest) (resp *pb.ValidateConfigResponse, err error) {
	defer recoverRPC(s.desc.Name, "ValidateConfig", &err)
	if s.info.Config == nil {
		if raw := strings.TrimSpace(string(req.GetConfigJson())); raw != "" && raw != "null" && raw != "{}" {
			return &pb.ValidateConfigResponse{Diagnostics: diagsToPB([]Diagnostic{Errorf("", "plugin %s takes no config; remove its config section", s.desc.Name)})}, nil
		}
		return &pb.ValidateConfigResponse{}, nil
	}
	dst := newLike(s.info.Config)
	if err := DecodeConfig(req.GetConfigJson(), s.info.Config, dst); err != nil {
		if ce, ok := err.(*ConfigError); ok {
			return &pb.ValidateConfigResponse{Diagnostics: diagsToPB(ce.Diagnostics)}, nil
		}
		return nil, err
	}
	var warnings []Diagnostic
	if v, ok := dst.(configValidator); ok {
		for _, d := range v.Validate() {
			if d.Severity == SeverityWarning {
				warnings = append(warnings, d)
			}
		}
	}
	return &pb.ValidateConfigResponse{Diagnostics: diagsToPB(warnings)}, nil
}

// RunHook implements the RunHook RPC: progress events, then one result.
func (s *Server) RunHook(req *pb.HookRequest, stream grpc.ServerStreamingServer[pb.HookEvent]) (err error) {
	hook, herr := hookFromPB(req.GetHook())
	if herr != nil {
		return status.Error(codes.InvalidArgument, herr.Error())
	}
	fn, ok := s.hooks[hook]
	if !ok {
		return status.Errorf(codes.Unimplemented, "plugin %s does not implement %s", s.desc.Name, hook)
	}
	defer recoverRPC(s.desc.Name, string(hook), &err)
	deps := map[string]map[string]string{}
	for name, o := range req.GetDependencyOutputs() {
		deps[name] = o.GetValues()
	}
	// A gRPC stream must not be sent on concurrently, and not at all once
	// the handler has returned: hooks may report progress from goroutines.
	var mu sync.Mutex
	done := false
	progress := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = stream.Send(&pb.HookEvent{Event: &pb.HookEvent_Progress{Progress: &pb.Progress{Message: msg}}})
		}
	}
	defer func() {
		mu.Lock()
		done = true
		mu.Unlock()
	}()
	log := s.log.With("hook", string(hook))
	r := NewRequest(hook, envFromPB(req.GetEnv()), clusterFromPB(req.GetCluster()), deps, req.GetConfigJson(), s.info.Config, progress, log)
	r.RunID = req.GetRunId()
	res, herr := fn(stream.Context(), r)
	if herr != nil {
		if _, ok := status.FromError(herr); ok && status.Code(herr) != codes.Unknown {
			return herr
		}
		if cerr := stream.Context().Err(); cerr != nil {
			return status.Errorf(status.FromContextError(cerr).Code(), "%v (%v)", herr, cerr)
		}
		return status.Error(codes.Unknown, herr.Error())
	}
	mu.Lock()
	defer mu.Unlock()
	return stream.Send(&pb.HookEvent{Event: &pb.HookEvent_Result{Result: resultToPB(res)}})
}

// recoverRPC turns a panic in plugin code into an error carrying the stack.
func recoverRPC(plugin, what string, err *error) {
	if v := recover(); v != nil {
		*err = status.Errorf(codes.Internal, "plugin %s panicked in %s: %v\n%s", plugin, what, v, debug.Stack())
	}
}

// newLike returns a new pointer to a zero value of the type v points to.
func newLike(v any) any {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return reflect.New(t).Interface()
}

// capabilityNames lists the known capabilities, comma-separated.
func capabilityNames() string {
	names := make([]string, len(KnownCapabilities))
	for i, c := range KnownCapabilities {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
