package pluginstore

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"oras.land/oras-go/v2/registry/remote"
)

// maxCatalog bounds how many repositories a source's catalog may list.
const maxCatalog = 5000

// Found is one plugin a source offers.
type Found struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Latest is the newest version this marina can run here ("" if none);
	// Versions counts every semver version published.
	Latest   string `json:"latest,omitempty"`
	Versions int    `json:"versions"`
	Source   string `json:"source"`
	Why      string `json:"why,omitempty"` // when Latest is "": why nothing runs here
}

// Search lists the plugins under the OCI namespaces sources
// (oci://HOST[:PORT][/PATH]: every repository under PATH is a plugin,
// named by its last path element), whose name or description contains term
// (case-insensitive; "" matches all). It reads each registry's catalog, and
// each matching repository's tags and manifests (Versions).
func (s *Store) Search(ctx context.Context, sources []string, term string) ([]Found, error) {
	var out []Found
	for _, src := range sources {
		repos, err := s.catalog(ctx, src)
		if err != nil {
			return nil, err
		}
		for _, repo := range repos {
			name := repo[strings.LastIndex(repo, "/")+1:]
			vs, err := s.Versions(ctx, repo)
			if err != nil {
				return nil, err
			}
			f := Found{Name: name, Source: repo, Versions: len(vs)}
			if newest, _ := Newest(vs, ""); newest != nil {
				f.Latest, f.Description = newest.Version, newest.Description
			} else if len(vs) > 0 {
				f.Why = vs[0].Why
			}
			if term != "" && !strings.Contains(strings.ToLower(f.Name+" "+f.Description), strings.ToLower(term)) {
				continue
			}
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Find returns the repository of the plugin named name in sources (the
// first source that has it), or "" when none does.
func (s *Store) Find(ctx context.Context, sources []string, name string) (string, error) {
	for _, src := range sources {
		repos, err := s.catalog(ctx, src)
		if err != nil {
			return "", err
		}
		for _, repo := range repos {
			if repo[strings.LastIndex(repo, "/")+1:] == name {
				return repo, nil
			}
		}
	}
	return "", nil
}

// catalog lists the repositories under an OCI namespace as oci:// refs.
func (s *Store) catalog(ctx context.Context, src string) ([]string, error) {
	u, err := url.Parse(src)
	if err != nil || u.Scheme != "oci" || u.Host == "" {
		return nil, newError(ErrInvalid, fmt.Sprintf("plugin source %q is not an OCI registry namespace (oci://HOST[:PORT][/PATH])", src))
	}
	prefix := strings.Trim(u.Path, "/")
	reg, err := remote.NewRegistry(u.Host)
	if err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("plugin source %q: %v", src, err))
	}
	reg.PlainHTTP = isLoopbackHost(u.Host)
	reg.Client = s.registryClient()
	var repos []string
	err = reg.Repositories(ctx, "", func(page []string) error {
		for _, r := range page {
			if prefix == "" || strings.HasPrefix(r, prefix+"/") {
				repos = append(repos, "oci://"+u.Host+"/"+r)
			}
		}
		if len(repos) > maxCatalog {
			return fmt.Errorf("more than %d repositories", maxCatalog)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("plugin source %s: listing the registry's repositories (its catalog API): %w (for a private registry, log in with `docker login %s`)", src, err, u.Host)
	}
	return repos, nil
}
