package pluginstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// OCI conventions for plugin artifacts. None is required to install: a
// manifest with one layer holding the binary or .tar.gz is enough.
const (
	// OCIArtifactType is the artifactType publishers should set
	// (`oras push --artifact-type application/vnd.marina.plugin.v1`).
	OCIArtifactType = "application/vnd.marina.plugin.v1"
	// OCIProtocolAnnotation on the manifest carries the plugin protocol
	// ("1.0"), so an incompatible plugin is refused before its layer is
	// downloaded.
	OCIProtocolAnnotation = "dev.marina.plugin.protocol"
	// OCICapabilitiesAnnotation on a platform manifest lists the
	// capabilities the plugin declares, comma-separated ("" for none):
	// what pluginTrust.capabilities decides on before the layer is
	// downloaded. Absent: not said (decided after download).
	OCICapabilitiesAnnotation = "dev.marina.plugin.capabilities"
	// OCISignatureAnnotation on a platform manifest carries the signature
	// of its layer (pluginsign.Signature as JSON; `marina plugin publish`
	// copies it from the archive's .sig).
	OCISignatureAnnotation = "dev.marina.plugin.signature"
)

const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
	maxManifestBytes            = 4 << 20
	maxTags                     = 10000
)

// fetchOCI pulls a plugin artifact from an OCI registry: resolves the tag
// (or picks the highest semver tag matching c), follows an image index to
// this platform's manifest, picks the plugin layer, downloads it and checks
// its digest. Loopback registries are spoken to over plain HTTP.
func (s *Store) fetchOCI(ctx context.Context, source, tmp string, target Platform, want string, c *semver.Constraints) (*fetched, error) {
	ref, err := registry.ParseReference(strings.TrimPrefix(source, "oci://"))
	if err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("plugin source %s is not a valid OCI reference (oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST]): %v", source, err))
	}
	repo := s.repository(ref)
	label := source
	reference := ref.Reference
	if reference == "" {
		tag, err := pickTag(ctx, repo, c, source)
		if err != nil {
			return nil, err
		}
		reference, label = tag, source+":"+tag
	}
	top, data, err := fetchManifest(ctx, repo, reference, label)
	if err != nil {
		return nil, err
	}
	desc := top
	if desc.MediaType == ocispec.MediaTypeImageIndex || desc.MediaType == mediaTypeDockerManifestList {
		var idx ocispec.Index
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("%s: the image index is invalid: %v", label, err))
		}
		var have []string
		var chosen *ocispec.Descriptor
		for i, m := range idx.Manifests {
			if m.Platform == nil {
				continue
			}
			have = append(have, m.Platform.OS+"/"+m.Platform.Architecture)
			if chosen == nil && m.Platform.OS == target.OS && m.Platform.Architecture == target.Arch {
				chosen = &idx.Manifests[i]
			}
		}
		if chosen == nil {
			sort.Strings(have)
			return nil, newError(ErrPlatform, fmt.Sprintf("%s has builds for %s, not for %s: ask the publisher for a %s build", label, orNone(have), target, target))
		}
		desc, data, err = fetchManifest(ctx, repo, chosen.Digest.String(), label+" ("+target.String()+")")
		if err != nil {
			return nil, err
		}
	}
	switch desc.MediaType {
	case ocispec.MediaTypeImageManifest, mediaTypeDockerManifest:
	default:
		return nil, newError(ErrNotPlugin, fmt.Sprintf("%s is a %s, not an OCI image manifest or index", label, desc.MediaType))
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(data, &man); err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: the manifest is invalid: %v", label, err))
	}
	if p := man.Annotations[OCIProtocolAnnotation]; p != "" {
		if err := checkProtocol("plugin "+label+" (per its "+OCIProtocolAnnotation+" annotation)", p); err != nil {
			return nil, err
		}
	}
	layer, err := pluginLayer(man.Layers, label)
	if err != nil {
		return nil, err
	}
	max := s.maxBytes()
	if layer.Size > max {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: the plugin layer is %d MiB, larger than the %d MiB limit (Store.MaxArtifactBytes)", label, layer.Size>>20, max>>20))
	}
	if layer.Digest.Algorithm() != digest.SHA256 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: the plugin layer's digest %s is not sha256", label, layer.Digest))
	}
	var sig *pluginsign.Signature
	if raw := man.Annotations[OCISignatureAnnotation]; raw != "" {
		parsed, err := pluginsign.ParseSignature([]byte(raw))
		if err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("%s: the %s annotation: %v", label, OCISignatureAnnotation, err))
		}
		sig = &parsed
	}
	// The manifest says whether the layer is signed, and by whom, and
	// what the plugin declares: a build the trust policy refuses is not
	// downloaded.
	if err := s.refuseUntrusted(label, sig, layer.Digest.String(), RepositoryOf(source)); err != nil {
		return nil, err
	}
	if caps, ok := annotatedCapabilities(man.Annotations); ok {
		if err := s.refuseCapabilities(label, &sdk.Description{Capabilities: caps}, RepositoryOf(source)); err != nil {
			return nil, err
		}
	}
	rc, err := repo.Fetch(ctx, layer)
	if err != nil {
		return nil, fmt.Errorf("%s: fetch layer %s: %w", label, layer.Digest, err)
	}
	defer rc.Close()
	artifact := filepath.Join(tmp, "artifact")
	kind, sum, err := copyArtifact(io.LimitReader(rc, layer.Size+1), artifact, max, label, func(kind artifactKind, what string) error {
		if kind == kindUnknown {
			return newError(ErrNotPlugin, fmt.Sprintf("the layer %s of %s is %s, not a plugin binary or a .tar.gz archive", layer.Digest, label, what))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sum != layer.Digest.Encoded() {
		return nil, newError(ErrChecksum, fmt.Sprintf("%s: the registry sent a layer with sha256 %s instead of %s; nothing was installed", label, sum, layer.Digest.Encoded()))
	}
	if err := checkSum(label, sum, want); err != nil {
		return nil, err
	}
	f, err := s.unpack(artifact, kind, sum, tmp, target, label)
	if err != nil {
		return nil, err
	}
	f.sourceDigest = top.Digest.String()
	f.signedDigest = layer.Digest.String()
	f.signature = sig
	return f, nil
}

// fetchManifest fetches and reads a manifest or index, checking its digest.
func fetchManifest(ctx context.Context, repo *remote.Repository, reference, label string) (ocispec.Descriptor, []byte, error) {
	desc, rc, err := repo.FetchReference(ctx, reference)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return desc, nil, newError(ErrSourceNotFound, fmt.Sprintf("%s: not found in the registry; check the repository and tag", label))
		}
		return desc, nil, fmt.Errorf("%s: %w (for a private registry, log in with `docker login %s`)", label, err, repo.Reference.Registry)
	}
	defer rc.Close()
	if desc.Size > maxManifestBytes {
		return desc, nil, newError(ErrInvalid, fmt.Sprintf("%s: the manifest is %d bytes, more than a plugin manifest can be", label, desc.Size))
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return desc, nil, fmt.Errorf("%s: read manifest: %w", label, err)
	}
	if got := digest.FromBytes(data); desc.Digest != "" && got != desc.Digest {
		return desc, nil, newError(ErrChecksum, fmt.Sprintf("%s: the registry sent a manifest with digest %s instead of %s", label, got, desc.Digest))
	}
	return desc, data, nil
}

// pluginLayer picks the layer holding the plugin: the only one, or the one
// titled marina-plugin-* or *.tar.gz.
func pluginLayer(layers []ocispec.Descriptor, label string) (ocispec.Descriptor, error) {
	switch len(layers) {
	case 0:
		return ocispec.Descriptor{}, newError(ErrNotPlugin, fmt.Sprintf("%s has no layers; a plugin artifact has one layer holding the binary or a .tar.gz", label))
	case 1:
		return layers[0], nil
	}
	var match []ocispec.Descriptor
	var titles []string
	for _, l := range layers {
		t := l.Annotations[ocispec.AnnotationTitle]
		titles = append(titles, fmt.Sprintf("%q", t))
		if strings.HasPrefix(t, BinaryPrefix) || strings.HasSuffix(t, ".tar.gz") || strings.HasSuffix(t, ".tgz") {
			match = append(match, l)
		}
	}
	if len(match) == 1 {
		return match[0], nil
	}
	return ocispec.Descriptor{}, newError(ErrNotPlugin, fmt.Sprintf("%s has %d layers (titles %s) and not exactly one titled %s* or *.tar.gz; push the plugin as a single layer", label, len(layers), strings.Join(titles, ", "), BinaryPrefix))
}

// pickTag returns the highest semver tag of repo that satisfies c (default:
// the highest release). Tags may carry a leading "v".
func pickTag(ctx context.Context, repo *remote.Repository, c *semver.Constraints, source string) (string, error) {
	tags, err := listTags(ctx, repo, source)
	if err != nil {
		return "", err
	}
	var bestTag string
	var best *semver.Version
	var versions []string
	others := 0
	for _, t := range tags {
		v, err := semver.StrictNewVersion(strings.TrimPrefix(t, "v"))
		if err != nil {
			others++
			continue
		}
		versions = append(versions, t)
		if c != nil && !c.Check(v) || c == nil && v.Prerelease() != "" {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestTag = v, t
		}
	}
	if best != nil {
		return bestTag, nil
	}
	if len(versions) == 0 {
		return "", newError(ErrNoMatch, fmt.Sprintf("%s has no semver tags (%d other tags); name a tag: %s:TAG", source, others, source))
	}
	want := "a release"
	if c != nil {
		want = fmt.Sprintf("%q", c.String())
	}
	return "", newError(ErrNoMatch, fmt.Sprintf("%s has no tag matching %s; semver tags: %s", source, want, strings.Join(versions, ", ")))
}

// repository is the remote repository of ref as the store speaks to every
// registry: plain HTTP only on loopback, credentials from Docker's config.
func (s *Store) repository(ref registry.Reference) *remote.Repository {
	return &remote.Repository{
		Reference:       ref,
		PlainHTTP:       isLoopbackHost(ref.Registry),
		Client:          s.registryClient(),
		TagListMaxPages: 100,
	}
}

// registryClient is the HTTP client for registries: the store's, with
// credentials from Docker's config, asked for only when a registry wants
// them.
func (s *Store) registryClient() *auth.Client {
	return &auth.Client{Client: s.httpClient(), Credential: dockerCredential, Cache: auth.NewCache()}
}

// listTags lists a repository's tags (at most maxTags).
func listTags(ctx context.Context, repo *remote.Repository, source string) ([]string, error) {
	var tags []string
	err := repo.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		if len(tags) > maxTags {
			return fmt.Errorf("more than %d tags", maxTags)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, newError(ErrSourceNotFound, fmt.Sprintf("%s: repository not found in the registry", source))
		}
		return nil, fmt.Errorf("%s: list tags: %w (for a private registry, log in with `docker login %s`)", source, err, repo.Reference.Registry)
	}
	return tags, nil
}

// isLoopbackHost reports whether host[:port] is this machine, where a
// registry without TLS is acceptable (a local test or dev registry).
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// dockerCredential resolves registry credentials from the docker config
// (~/.docker/config.json or $DOCKER_CONFIG, with its credential helpers).
// oras calls it only when a registry asks for authentication.
func dockerCredential(ctx context.Context, hostport string) (auth.Credential, error) {
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return auth.EmptyCredential, fmt.Errorf("read docker credentials for %s: %w", hostport, err)
	}
	return credentials.Credential(store)(ctx, hostport)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "no platform"
	}
	return strings.Join(list, ", ")
}

// annotatedCapabilities reads the OCICapabilitiesAnnotation of a
// manifest; ok is false when it is absent.
func annotatedCapabilities(ann map[string]string) (caps []string, ok bool) {
	raw, ok := ann[OCICapabilitiesAnnotation]
	if !ok {
		return nil, false
	}
	caps = []string{}
	for _, c := range strings.Split(raw, ",") {
		if c = strings.TrimSpace(c); c != "" {
			caps = append(caps, c)
		}
	}
	return caps, true
}
