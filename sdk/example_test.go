package sdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bcollard/marina/sdk"
)

// Config is the example plugin's config; its defaults are the value Info
// returns, its JSON Schema comes from the json and doc tags.
type Config struct {
	Replicas int           `json:"replicas" doc:"metrics-server replicas."`
	Wait     time.Duration `json:"wait" doc:"How long to wait for the rollout."`
}

// Validate checks what JSON types cannot; it runs after decoding.
func (c *Config) Validate() []sdk.Diagnostic {
	if c.Replicas < 1 {
		return []sdk.Diagnostic{sdk.Errorf("replicas", "must be at least 1, got %d", c.Replicas)}
	}
	return nil
}

// metricsServer is a complete minimal plugin: who it is, one hook, a config.
type metricsServer struct{}

func (metricsServer) Info() sdk.Info {
	return sdk.Info{
		Name:        "metrics-server",
		Version:     "1.0.0",
		Description: "Installs metrics-server in every cluster",
		Timeouts:    map[sdk.Hook]time.Duration{sdk.PostCluster: 3 * time.Minute},
		Config:      &Config{Replicas: 1, Wait: 2 * time.Minute},
	}
}

func (metricsServer) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	req.Progress("installing metrics-server (%d replicas) in %s", cfg.Replicas, req.Cluster.Name)
	// ... apply the manifests with req.Cluster.Kubeconfig, honouring ctx ...
	return &sdk.Result{Outputs: map[string]string{"namespace": "kube-system"}}, nil
}

// A plugin's main is one line: func main() { sdk.Serve(metricsServer{}) }.
// Describe shows what marina learns from it (`marina plugin info`); test its
// hooks with sdk/plugintest.
func ExampleDescribe() {
	d, err := sdk.Describe(metricsServer{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Name, d.Version, "protocol", d.Protocol)
	fmt.Println("hooks:", d.Hooks)
	fmt.Println("PostCluster deadline:", d.Timeout(sdk.PostCluster))
	fmt.Println("PreCluster deadline:", d.Timeout(sdk.PreCluster))
	fmt.Println("defaults:", string(d.ConfigDefaults))
	fmt.Println(string(d.ConfigSchema))

	var cfg Config
	err = sdk.DecodeConfig([]byte(`{"replicas": 0, "wiat": "1m"}`), metricsServer{}.Info().Config, &cfg)
	fmt.Println(err)
	err = sdk.DecodeConfig([]byte(`{"replicas": 0}`), metricsServer{}.Info().Config, &cfg)
	fmt.Println(err)
	// Output:
	// metrics-server 1.0.0 protocol 1.0
	// hooks: [PostCluster]
	// PostCluster deadline: 3m0s
	// PreCluster deadline: 5m0s
	// defaults: {"replicas":1,"wait":"2m0s"}
	// {
	//   "$schema": "https://json-schema.org/draft/2020-12/schema",
	//   "additionalProperties": false,
	//   "properties": {
	//     "replicas": {
	//       "default": 1,
	//       "description": "metrics-server replicas.",
	//       "type": "integer"
	//     },
	//     "wait": {
	//       "default": "2m0s",
	//       "description": "How long to wait for the rollout.",
	//       "format": "duration",
	//       "type": "string"
	//     }
	//   },
	//   "type": "object"
	// }
	// invalid plugin config: wiat: unknown field "wiat"; did you mean "wait"?
	// invalid plugin config: replicas: must be at least 1, got 0
}
