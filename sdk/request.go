package sdk

import (
	"fmt"
	"log/slog"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// Request is what a hook receives.
type Request struct {
	// Hook is the hook being run.
	Hook Hook
	// Env describes the VM, network and DNS the hook runs against.
	Env Env
	// Cluster is set for cluster hooks (PreCluster, PostCluster, PreClusterDelete).
	Cluster *Cluster
	// Deps holds the outputs published by the plugins this plugin depends on,
	// by plugin name.
	Deps map[string]map[string]string
	// RunID identifies this marina run (for log correlation).
	RunID string

	configJSON []byte
	defaults   any
	progress   func(string)
	logger     *slog.Logger
}

// NewRequest builds a Request; used by the SDK's server and by sdk/plugintest.
// configJSON is the user's config for the plugin (may be nil); defaults is
// Info.Config; progress receives Progress messages (may be nil).
func NewRequest(hook Hook, env Env, cluster *Cluster, deps map[string]map[string]string, configJSON []byte, defaults any, progress func(string), logger *slog.Logger) *Request {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Request{Hook: hook, Env: env, Cluster: cluster, Deps: deps, configJSON: configJSON, defaults: defaults, progress: progress, logger: logger}
}

// Config decodes the plugin's config into dst (a pointer to the same type as
// Info.Config): the defaults first, then the user's values, strictly (an
// unknown field is an error naming its path).
func (r *Request) Config(dst any) error {
	return DecodeConfig(r.configJSON, r.defaults, dst)
}

// ConfigJSON returns the user's config as JSON, before defaults.
func (r *Request) ConfigJSON() []byte { return r.configJSON }

// Progress reports what the hook is doing; the user sees it on the step's live line.
func (r *Request) Progress(format string, args ...any) {
	if r.progress != nil {
		r.progress(sprintf(format, args...))
	}
}

// Logger returns the plugin's logger. Records go to marina's log, prefixed
// with the plugin's name, at the level the user chose (never to stdout).
func (r *Request) Logger() *slog.Logger { return r.logger }

// Dep returns the output key published by dependency plugin, and whether it was.
func (r *Request) Dep(plugin, key string) (string, bool) {
	v, ok := r.Deps[plugin][key]
	return v, ok
}
