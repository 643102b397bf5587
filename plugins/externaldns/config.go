package externaldns

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bcollard/marina/sdk"
)

// Config is the externaldns plugin's configuration
// (plugins.externaldns.config in ~/.marina/config.yaml).
type Config struct {
	// Sources are the ExternalDNS sources (--source).
	Sources []string `json:"sources" marina:"min=1,enum=service|ingress" doc:"ExternalDNS sources: service and/or ingress."`
	// ServiceTypes restricts the service source to these Service types (--service-type-filter).
	ServiceTypes []string `json:"serviceTypes" marina:"enum=ClusterIP|NodePort|LoadBalancer|ExternalName" doc:"Service types the service source publishes: LoadBalancer, NodePort, ClusterIP, ExternalName."`
	// Interval is the time between two full synchronisations (--interval).
	// It is what bounds how fast a new Service's name appears: ExternalDNS
	// v0.23 delays a synchronisation triggered by a change (--events) by up
	// to 5 s (controller.ScheduleRunOnce), unless the next periodic one is
	// sooner. A full synchronisation here is one read of the local etcd.
	Interval time.Duration `json:"interval" marina:"min=1s" doc:"Time between two full synchronisations (at least 1s): how long a new Service's name takes to appear at most. Changes trigger one sooner too, but ExternalDNS delays those by up to 5s."`
	// MinEventSyncInterval is the least time between two synchronisations
	// (--min-event-sync-interval).
	MinEventSyncInterval time.Duration `json:"minEventSyncInterval" doc:"Least time between two synchronisations triggered by changes (100ms up to interval)."`
	// Policy is how records are synchronised (--policy).
	Policy string `json:"policy" marina:"enum=sync|upsert-only|create-only" doc:"Record policy: sync (create, update and delete), upsert-only (never delete) or create-only."`
	// StrictlyOwned stores the owner inside every etcd record and makes each
	// cluster's ExternalDNS see only its own records (--coredns-strictly-owned).
	StrictlyOwned bool `json:"strictlyOwned" doc:"Store the owner (cluster name) in every etcd record and let each cluster see only its own (ExternalDNS's multi-cluster mode for one etcd)."`
	// WaitReady makes PostCluster wait until the Deployment is Available.
	WaitReady bool `json:"waitReady" doc:"Wait until the ExternalDNS Deployment is Available (its image pulled and running) before the cluster counts as ready."`
	// ReadyTimeout bounds that wait.
	ReadyTimeout time.Duration `json:"readyTimeout" doc:"How long to wait for the Deployment to become Available when waitReady is set (the hook's own timeout also bounds it)."`
}

// defaultConfig is the plugin's defaults (Info.Config).
func defaultConfig() *Config {
	return &Config{
		Sources:              []string{"service"},
		ServiceTypes:         []string{"LoadBalancer"},
		Interval:             time.Second,
		MinEventSyncInterval: 500 * time.Millisecond,
		Policy:               "sync",
		StrictlyOwned:        true,
		WaitReady:            true,
		ReadyTimeout:         3 * time.Minute,
	}
}

// knownSources are the sources this plugin grants RBAC for (the enum of
// Config.Sources; TestEnumsAreKnownValues). Others need permissions (and
// often CRDs) the plugin does not render.
var knownSources = []string{"service", "ingress"}

// knownServiceTypes are the values --service-type-filter accepts
// (source/service.go, knownServiceTypes, in ExternalDNS v0.23.0): the enum
// of Config.ServiceTypes.
var knownServiceTypes = []string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}

// The values --policy accepts (pkg/apis/externaldns/types.go) are the
// enum of Config.Policy.

// maxReadyTimeout is a sanity bound; the PostCluster hook's deadline
// (plugins.externaldns.timeout) bounds the wait as well.
const maxReadyTimeout = time.Hour

// Validate checks the config; every problem names its field.
func (c *Config) Validate() []sdk.Diagnostic {
	var ds []sdk.Diagnostic
	seen := map[string]bool{}
	for i, s := range c.Sources {
		path := fmt.Sprintf("sources[%d]", i)
		switch {
		case !slices.Contains(knownSources, s):
			// the field's enum reports it
		case seen[s]:
			ds = append(ds, sdk.Errorf(path, "source %q is listed twice", s))
		}
		seen[s] = true
	}
	if slices.Contains(c.Sources, "service") && len(c.ServiceTypes) == 0 {
		ds = append(ds, sdk.Errorf("serviceTypes", "must name at least one Service type (%s)", strings.Join(knownServiceTypes, ", ")))
	}
	seen = map[string]bool{}
	for i, t := range c.ServiceTypes {
		path := fmt.Sprintf("serviceTypes[%d]", i)
		switch {
		case !slices.Contains(knownServiceTypes, t):
			// the field's enum reports it
		case seen[t]:
			ds = append(ds, sdk.Errorf(path, "Service type %q is listed twice", t))
		}
		seen[t] = true
	}
	if c.MinEventSyncInterval < 100*time.Millisecond || (c.Interval >= time.Second && c.MinEventSyncInterval > c.Interval) {
		ds = append(ds, sdk.Errorf("minEventSyncInterval", "must be between 100ms and interval (%s), got %s", c.Interval, c.MinEventSyncInterval))
	}
	if c.WaitReady && (c.ReadyTimeout < time.Second || c.ReadyTimeout > maxReadyTimeout) {
		ds = append(ds, sdk.Errorf("readyTimeout", "must be between 1s and %s when waitReady is set, got %s", maxReadyTimeout, c.ReadyTimeout))
	}
	return ds
}
