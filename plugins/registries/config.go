package registries

import (
	"net/netip"

	"github.com/bcollard/marina/sdk"
)

// Config is the registries plugin's configuration
// (plugins.registries.config in ~/.marina/config.yaml). The mirrors
// themselves, the registry image and the cache storage are global settings
// (registries.* and images.registry) that reach the plugin in sdk.Env.
type Config struct {
	// PublishAddress is the address on the Docker host each mirror's port is
	// published on; "" publishes nothing.
	PublishAddress string `json:"publishAddress" doc:"Address on the Docker host (the VM) where each mirror's port is published, e.g. 127.0.0.1 or 0.0.0.0; empty publishes nothing (cluster nodes reach the mirrors by name on the kind network either way)."`
	// LogLevel is the mirrors' log level.
	LogLevel string `json:"logLevel" marina:"enum=error|warn|info|debug" doc:"Log level of the mirror registries: error, warn, info or debug."`
}

// defaultConfig is the plugin's defaults (Info.Config).
func defaultConfig() *Config {
	return &Config{PublishAddress: "127.0.0.1", LogLevel: "info"}
}

// The levels distribution's registry accepts (log.level) are the enum of
// Config.LogLevel.

// Validate checks the config; it is called by the SDK after decoding.
func (c *Config) Validate() []sdk.Diagnostic {
	var ds []sdk.Diagnostic
	if c.PublishAddress != "" {
		if _, err := netip.ParseAddr(c.PublishAddress); err != nil {
			ds = append(ds, sdk.Errorf("publishAddress", "%q is not an IP address; use 127.0.0.1 (the default), 0.0.0.0, or \"\" to publish nothing", c.PublishAddress))
		}
	}
	return ds
}
