package registries_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bcollard/marina/plugins/registries"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

func defaultMirrors() []sdk.Mirror {
	return []sdk.Mirror{
		{Name: "registry-dockerio", Port: 5030, RemoteURL: "https://registry-1.docker.io"},
		{Name: "registry-quayio", Port: 5010, RemoteURL: "https://quay.io"},
		{Name: "registry-gcrio", Port: 5020, RemoteURL: "https://gcr.io"},
		{Name: "registry-us-docker-pkgdev", Port: 5040, RemoteURL: "https://us-docker.pkg.dev"},
		{Name: "registry-us-central1-docker-pkgdev", Port: 5050, RemoteURL: "https://us-central1-docker.pkg.dev"},
	}
}

func withMirrors(ms []sdk.Mirror) plugintest.Option {
	return plugintest.WithEnv(func(e *sdk.Env) { e.Mirrors = ms })
}

func TestDescribe(t *testing.T) {
	h := plugintest.New(t, registries.New())
	d := h.Describe()
	if d.Name != "registries" || d.Version != registries.Version {
		t.Fatalf("Describe = %s %s", d.Name, d.Version)
	}
	for _, hook := range []sdk.Hook{sdk.PostUp, sdk.PreCluster, sdk.PostCluster, sdk.PreDestroy} {
		if !d.Has(hook) {
			t.Errorf("plugin does not declare %s", hook)
		}
	}
	// Hooks with nothing to do are not implemented (the restart policy
	// brings the mirrors back after marina down).
	for _, hook := range []sdk.Hook{sdk.PreDown, sdk.PreClusterDelete} {
		if d.Has(hook) {
			t.Errorf("plugin declares %s, which it has no use for", hook)
		}
	}
}

// TestPreClusterSelection runs PreCluster through the SDK's gRPC path and
// checks which host files a cluster gets for its mirror selection.
func TestPreClusterSelection(t *testing.T) {
	h := plugintest.New(t, registries.New())
	tests := []struct {
		name      string
		mirrors   []sdk.Mirror
		selection []string
		wantFiles []string // host namespace directories, in order
		wantErr   []string
	}{
		{name: "all by default", mirrors: defaultMirrors(),
			wantFiles: []string{"docker.io", "quay.io", "gcr.io", "us-docker.pkg.dev", "us-central1-docker.pkg.dev"}},
		{name: "subset in configured order", mirrors: defaultMirrors(), selection: []string{"registry-gcrio", "registry-dockerio"},
			wantFiles: []string{"docker.io", "gcr.io"}},
		{name: "duplicates in the selection", mirrors: defaultMirrors(), selection: []string{"registry-quayio", "registry-quayio"},
			wantFiles: []string{"quay.io"}},
		{name: "unknown name", mirrors: defaultMirrors(), selection: []string{"registry-quayio", "registry-ghcr", "nope"},
			wantErr: []string{"registry-ghcr, nope", "no such mirror", "configured: registry-dockerio, registry-quayio, registry-gcrio"}},
		{name: "selection but no mirrors", selection: []string{"registry-quayio"},
			wantErr: []string{"registry-quayio", "none are configured"}},
		{name: "no mirrors"},
		{name: "invalid mirror", mirrors: []sdk.Mirror{{Name: "quay.io", Port: 5010, RemoteURL: "https://quay.io"}},
			wantErr: []string{"registries.mirrors[0].name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.Run(sdk.PreCluster, withMirrors(tt.mirrors),
				plugintest.WithCluster(func(c *sdk.Cluster) { c.Mirrors = tt.selection }))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("PreCluster succeeded: %+v", res)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.wantFiles) == 0 {
				if res.Kind != nil && (len(res.Kind.NodeFiles) > 0 || len(res.Kind.ContainerdConfigPatches) > 0) {
					t.Fatalf("no mirrors, yet a contribution: %+v", res.Kind)
				}
				return
			}
			var got []string
			for _, f := range res.Kind.NodeFiles {
				got = append(got, strings.TrimSuffix(strings.TrimPrefix(f.Path, "/etc/containerd/certs.d/"), "/hosts.toml"))
			}
			if strings.Join(got, " ") != strings.Join(tt.wantFiles, " ") {
				t.Fatalf("host files for %v, want %v", got, tt.wantFiles)
			}
			if len(res.Kind.ContainerdConfigPatches) != 1 || !strings.Contains(res.Kind.ContainerdConfigPatches[0], "config_path = '/etc/containerd/certs.d'") {
				t.Fatalf("containerd patches = %q", res.Kind.ContainerdConfigPatches)
			}
		})
	}
	h.RequireIdempotent(t, sdk.PreCluster, withMirrors(defaultMirrors()))
}

// TestConfigValidation checks the plugin's config through the
// ValidateConfig RPC, as marina does before anything changes.
func TestConfigValidation(t *testing.T) {
	h := plugintest.New(t, registries.New())
	tests := []struct {
		config string
		want   []string // "path: substring"
	}{
		{config: ""},
		{config: `{"publishAddress": "", "logLevel": "debug"}`},
		{config: `{"publishAddress": "0.0.0.0"}`},
		{config: `{"publishAddress": "localhost"}`, want: []string{"publishAddress: not an IP address"}},
		{config: `{"logLevel": "verbose"}`, want: []string{"logLevel: error, warn, info, debug"}},
		{config: `{"publishAdress": "127.0.0.1"}`, want: []string{"publishAdress: publishAddress"}},
	}
	for _, tt := range tests {
		ds := h.ValidateConfig(tt.config)
		var errs []sdk.Diagnostic
		for _, d := range ds {
			if d.Severity == sdk.SeverityError {
				errs = append(errs, d)
			}
		}
		if len(errs) != len(tt.want) {
			t.Errorf("config %s: diagnostics %+v, want %d errors", tt.config, errs, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			path, sub, _ := strings.Cut(w, ": ")
			if errs[i].Path != path || !strings.Contains(errs[i].Summary, sub) {
				t.Errorf("config %s: diagnostic %+v, want path %s and %q", tt.config, errs[i], path, sub)
			}
		}
	}
	// A bad config stops PostUp before it touches Docker.
	_, err := h.Run(sdk.PostUp, plugintest.WithConfig(`{"logLevel": "loud"}`),
		plugintest.WithEnv(func(e *sdk.Env) { e.DockerHost = "unix:///nonexistent/docker.sock" }))
	var ce *sdk.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("PostUp with a bad config = %v, want a config error", err)
	}
}

// TestPostUpRejectsBadSettingsBeforeDocker: invalid mirrors or cache
// settings fail PostUp with the setting to fix, before any Docker call (the
// endpoint does not exist, and the error does not mention it).
func TestPostUpRejectsBadSettingsBeforeDocker(t *testing.T) {
	h := plugintest.New(t, registries.New())
	tests := []struct {
		name    string
		edit    func(*sdk.Env)
		wantErr string
	}{
		{"hostname as mirror name", func(e *sdk.Env) {
			e.Mirrors = []sdk.Mirror{{Name: "quay.io", Port: 5010, RemoteURL: "https://quay.io"}}
		}, "registries.mirrors[0].name"},
		{"unknown cache storage", func(e *sdk.Env) {
			e.Mirrors, e.RegistryCacheStorage = defaultMirrors(), "disk"
		}, "registries.cacheStorage"},
		{"relative cache dir", func(e *sdk.Env) {
			e.Mirrors, e.RegistryCacheStorage, e.RegistryCacheDir = defaultMirrors(), "host", "cache"
		}, "registries.cacheDir"},
		{"no network", func(e *sdk.Env) { e.Mirrors, e.NetworkName = defaultMirrors(), "" }, "NetworkName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Run(sdk.PostUp, plugintest.WithEnv(func(e *sdk.Env) {
				e.DockerHost = "unix:///nonexistent/docker.sock"
				tt.edit(e)
			}))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "nonexistent") {
				t.Fatalf("PostUp = %v, want an error about %s and no Docker call", err, tt.wantErr)
			}
		})
	}
}
