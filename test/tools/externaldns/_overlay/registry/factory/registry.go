// marina's test build of ExternalDNS (test/tools/build.sh): this file replaces
// sigs.k8s.io/external-dns@v0.23.0's registry/factory/registry.go in a copy of
// the module made in the test cache. It keeps the file's API and the
// registries that need no cloud SDK — txt (what marina deploys ExternalDNS
// with), noop and crd — and leaves out dynamodb and aws-sd, which link the AWS
// SDK. Asking this build for those fails with a message that says so.

package factory

import (
	"fmt"

	"sigs.k8s.io/external-dns/pkg/apis/externaldns"
	"sigs.k8s.io/external-dns/provider"
	"sigs.k8s.io/external-dns/registry"
	"sigs.k8s.io/external-dns/registry/crd"
	"sigs.k8s.io/external-dns/registry/noop"
	"sigs.k8s.io/external-dns/registry/txt"
)

// RegistryConstructor is a function that creates a Registry from configuration and a provider.
type RegistryConstructor func(cfg *externaldns.Config, p provider.Provider) (registry.Registry, error)

// Select creates a registry based on the given configuration.
func Select(cfg *externaldns.Config, p provider.Provider) (registry.Registry, error) {
	constructor, ok := registries(cfg.Registry)
	if !ok {
		return nil, fmt.Errorf("unknown registry: %s (marina's test build of ExternalDNS has only txt, noop and crd; see marina's test/tools/README.md)", cfg.Registry)
	}
	return constructor(cfg, p)
}

// registries looks up the constructor for the named registry.
func registries(selector string) (RegistryConstructor, bool) {
	m := map[string]RegistryConstructor{
		externaldns.RegistryNoop: noop.New,
		externaldns.RegistryTXT:  txt.New,
		externaldns.RegistryCRD:  crd.New,
	}
	c, ok := m[selector]
	return c, ok
}
