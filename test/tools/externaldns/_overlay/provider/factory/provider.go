// marina's test build of ExternalDNS (test/tools/build.sh): this file replaces
// sigs.k8s.io/external-dns@v0.23.0's provider/factory/provider.go in a copy of
// the module made in the test cache. It keeps the file's API (Select,
// ProviderConstructor, providers) and the providers marina's tests use —
// coredns (and its alias skydns) and inmemory — so that the build does not
// compile every cloud provider's SDK (AWS, Azure, Google, OCI, Alibaba, ...),
// which is most of a cold ExternalDNS build. Everything else — flags, sources,
// registry, plan, controller loop, the coredns provider — is upstream's code,
// unchanged. Asking this build for another provider fails with a message that
// says so.

package factory

import (
	"context"
	"fmt"

	"sigs.k8s.io/external-dns/endpoint"
	"sigs.k8s.io/external-dns/pkg/apis/externaldns"
	"sigs.k8s.io/external-dns/provider"
	"sigs.k8s.io/external-dns/provider/coredns"
	"sigs.k8s.io/external-dns/provider/inmemory"
)

// ProviderConstructor is a function that creates a provider from configuration.
type ProviderConstructor func(
	ctx context.Context,
	cfg *externaldns.Config,
	domainFilter *endpoint.DomainFilter,
) (provider.Provider, error)

// Select creates a provider based on the given configuration (upstream's
// Select, with this build's provider table).
func Select(
	ctx context.Context,
	cfg *externaldns.Config,
	domainFilter *endpoint.DomainFilter) (provider.Provider, error) {
	constructor, ok := providers(cfg.Provider)
	if !ok {
		return nil, fmt.Errorf("unknown dns provider: %s (marina's test build of ExternalDNS has only coredns, skydns and inmemory; see marina's test/tools/README.md)", cfg.Provider)
	}
	p, err := constructor(ctx, cfg, domainFilter)
	if err != nil {
		return nil, err
	}
	if cfg.ProviderCacheTime > 0 {
		p = provider.NewCachedProvider(p, cfg.ProviderCacheTime)
	}
	return newAliasNormalizingMiddleware(p), nil
}

// providers looks up the constructor for the named provider.
func providers(selector string) (ProviderConstructor, bool) {
	m := map[string]ProviderConstructor{
		externaldns.ProviderCoreDNS:  coredns.New,
		externaldns.ProviderSkyDNS:   coredns.New,
		externaldns.ProviderInMemory: inmemory.New,
	}
	c, ok := m[selector]
	return c, ok
}
