package localdns

import (
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
)

// Config is the localdns plugin's configuration
// (plugins.localdns.config in ~/.marina/config.yaml). The zone, the two
// addresses, the network and the images are global settings (dns.*,
// images.dnsEtcd, images.dnsServer) that reach the plugin in Request.Env.
type Config struct {
	// EtcdContainer is the etcd container's name; its data volume is
	// EtcdContainer + "-data".
	EtcdContainer string `json:"etcdContainer" doc:"Name of the etcd container that stores the zone's records; its data volume is <name>-data."`
	// ServerContainer is the CoreDNS container's name.
	ServerContainer string `json:"serverContainer" doc:"Name of the CoreDNS container that answers for the zone."`
	// CacheSeconds caps how long CoreDNS caches answers; 0 caches nothing.
	CacheSeconds int `json:"cacheSeconds" marina:"min=0,max=3600" doc:"How long CoreDNS may cache answers, in seconds (0-3600); 0 caches nothing, so record changes show at once."`
	// LogQueries makes CoreDNS log every query (docker logs <serverContainer>).
	LogQueries bool `json:"logQueries" doc:"Log every DNS query to the CoreDNS container's output (docker logs marina-dns)."`
	// ReadyTimeout bounds the wait for each container to become ready.
	ReadyTimeout time.Duration `json:"readyTimeout" marina:"min=1s,max=10m" doc:"How long PostUp waits for etcd to report healthy and for CoreDNS to stay up (1s-10m)."`
	// Labels are extra labels put on both containers.
	Labels map[string]string `json:"labels" doc:"Extra Docker labels put on both containers (for your own tooling)."`
}

// Default container names.
const (
	DefaultEtcdContainer   = "marina-dns-etcd"
	DefaultServerContainer = "marina-dns"
)

// defaultConfig is the plugin's defaults (Info.Config).
func defaultConfig() *Config {
	return &Config{
		EtcdContainer:   DefaultEtcdContainer,
		ServerContainer: DefaultServerContainer,
		ReadyTimeout:    time.Minute,
	}
}

// containerName is what Docker accepts as a container name.
var containerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`) })

// LabelComponent marks the plugin's containers: "localdns-etcd" or "localdns-server".
const LabelComponent = "marina.dev/component"

// reservedLabels are set by the plugin and sdk/container; users cannot override them.
var reservedLabels = []string{LabelComponent, container.LabelSpec, container.LabelManagedBy}

// Validate checks the config; every problem names its field.
func (c *Config) Validate() []sdk.Diagnostic {
	var ds []sdk.Diagnostic
	for _, f := range []struct{ path, name string }{
		{"etcdContainer", c.EtcdContainer},
		{"serverContainer", c.ServerContainer},
	} {
		if !containerName().MatchString(f.name) {
			ds = append(ds, sdk.Errorf(f.path, "%q is not a Docker container name: use letters, digits, '_', '.' and '-', starting with a letter or digit (at most 128)", f.name))
		}
	}
	if c.EtcdContainer == c.ServerContainer && c.EtcdContainer != "" {
		ds = append(ds, sdk.Errorf("serverContainer", "is %q, the same as etcdContainer: the two containers need different names", c.ServerContainer))
	}
	// cacheSeconds and readyTimeout: bounded by their field rules.
	keys := make([]string, 0, len(c.Labels))
	for k := range c.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, r := range reservedLabels {
			if k == r {
				ds = append(ds, sdk.Errorf(fmt.Sprintf("labels.%s", k), "is set by marina and cannot be overridden; remove it"))
			}
		}
		if k == "" {
			ds = append(ds, sdk.Errorf("labels", "a label has an empty name; remove it"))
		}
	}
	return ds
}

// etcdVolume is the named volume holding etcd's data.
func (c *Config) etcdVolume() string { return c.EtcdContainer + "-data" }
