package pluginstore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
)

// OCILayerMediaType is the media type of a plugin archive layer that
// `marina plugin publish` pushes (a .tar.gz from `marina plugin package`).
const OCILayerMediaType = "application/vnd.marina.plugin.layer.v1.tar+gzip"

// PublishOptions say what Publish pushes where.
type PublishOptions struct {
	// Ref is oci://HOST[:PORT]/REPOSITORY (no tag: the version is the tag).
	Ref string
	// Dir holds the archives of one version (`marina plugin package`'s
	// --out): marina-plugin-NAME_VERSION_OS_ARCH.tar.gz.
	Dir string
	// Force replaces a tag that already exists (published versions are
	// otherwise immutable).
	Force bool
}

// PublishResult is what Publish pushed.
type PublishResult struct {
	Ref       string   `json:"ref"`
	Tag       string   `json:"tag"`
	Digest    string   `json:"digest"`
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Platforms []string `json:"platforms"`
	// Signed: every platform's archive had a signature, now on its manifest.
	Signed bool `json:"signed"`
}

// Publish pushes the archives of one plugin version to an OCI registry as
// `marina plugin install oci://...` reads them: per platform, a manifest
// with artifactType OCIArtifactType, the protocol annotation and one layer
// (the archive, OCILayerMediaType, titled with its file name); an image
// index of those manifests with each one's platform; the index tagged with
// the version. A tag that exists is refused unless Force. Loopback
// registries are spoken to over plain HTTP; credentials come from Docker's
// config, as for install.
func (s *Store) Publish(ctx context.Context, o PublishOptions) (*PublishResult, error) {
	if !strings.HasPrefix(o.Ref, "oci://") {
		return nil, newError(ErrInvalid, fmt.Sprintf("publish: %q is not an oci:// reference (oci://HOST[:PORT]/REPOSITORY)", o.Ref))
	}
	ref, err := registry.ParseReference(strings.TrimPrefix(o.Ref, "oci://"))
	if err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s is not a valid OCI reference (oci://HOST[:PORT]/REPOSITORY): %v", o.Ref, err))
	}
	if ref.Reference != "" {
		return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s names a tag or digest; give the repository only, the plugin's version is the tag", o.Ref))
	}
	archives, err := filepath.Glob(filepath.Join(o.Dir, BinaryPrefix+"*.tar.gz"))
	if err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, newError(ErrInvalid, fmt.Sprintf("publish: no %s*.tar.gz in %s; build them with `marina plugin package`", BinaryPrefix, o.Dir))
	}
	sort.Strings(archives)
	type part struct {
		path     string
		manifest *SourceManifest
		platform Platform
	}
	var parts []part
	for _, a := range archives {
		m, err := archiveManifest(a)
		if err != nil {
			return nil, err
		}
		if len(m.Platforms) != 1 {
			return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s: its %s lists %d platforms; publish takes one archive per platform (marina plugin package)", a, SourceManifestFile, len(m.Platforms)))
		}
		p, err := ParsePlatform(m.Platforms[0])
		if err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s: %v", a, err))
		}
		if len(parts) > 0 && (m.Name != parts[0].manifest.Name || m.Version != parts[0].manifest.Version) {
			return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s holds %s %s and %s %s; publish one version at a time", o.Dir,
				parts[0].manifest.Name, parts[0].manifest.Version, m.Name, m.Version))
		}
		for _, q := range parts {
			if q.platform == p {
				return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s and %s are both for %s", q.path, a, p))
			}
		}
		parts = append(parts, part{path: a, manifest: m, platform: p})
	}
	name, version := parts[0].manifest.Name, parts[0].manifest.Version

	repo := s.repository(ref)
	label := o.Ref + ":" + version
	if !o.Force {
		_, err := repo.Resolve(ctx, version)
		switch {
		case err == nil:
			return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s already exists; a published version is not replaced (pass --force to replace it, or publish a new version)", label))
		case !errors.Is(err, errdef.ErrNotFound):
			return nil, fmt.Errorf("publish: checking %s: %w", label, err)
		}
	}
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Annotations: map[string]string{ocispec.AnnotationTitle: name, ocispec.AnnotationVersion: version}}
	res := &PublishResult{Ref: o.Ref, Tag: version, Name: name, Version: version}
	signed := 0
	for _, pt := range parts {
		data, err := os.ReadFile(pt.path)
		if err != nil {
			return nil, err
		}
		layer := content.NewDescriptorFromBytes(OCILayerMediaType, data)
		layer.Annotations = map[string]string{ocispec.AnnotationTitle: filepath.Base(pt.path)}
		if err := pushBlob(ctx, repo, layer, data); err != nil {
			return nil, fmt.Errorf("publish: pushing %s to %s: %w", filepath.Base(pt.path), o.Ref, err)
		}
		ann := map[string]string{
			ocispec.AnnotationTitle: name, ocispec.AnnotationVersion: version,
			ocispec.AnnotationCreated: "1970-01-01T00:00:00Z", // reproducible: the same archives, the same digest
		}
		if pt.manifest.Protocol != "" {
			ann[OCIProtocolAnnotation] = pt.manifest.Protocol
		}
		if pt.manifest.Description != "" {
			ann[ocispec.AnnotationDescription] = pt.manifest.Description
		}
		if pt.manifest.Capabilities != nil {
			ann[OCICapabilitiesAnnotation] = strings.Join(*pt.manifest.Capabilities, ",")
		}
		sig, err := readSignatureFile(pt.path + SignatureSuffix)
		if err != nil {
			return nil, err
		}
		if sig != nil {
			if sig.Digest != layer.Digest.String() {
				return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s%s signs %s, not this archive (%s): package and sign again", pt.path, SignatureSuffix, sig.Digest, layer.Digest))
			}
			ann[OCISignatureAnnotation] = string(sig.Marshal())
			signed++
		}
		desc, err := pushArtifactManifest(ctx, repo, layer, ann)
		if err != nil {
			return nil, fmt.Errorf("publish: pushing the %s manifest to %s: %w", pt.platform, o.Ref, err)
		}
		desc.Platform = &ocispec.Platform{OS: pt.platform.OS, Architecture: pt.platform.Arch}
		desc.ArtifactType = OCIArtifactType
		idx.Manifests = append(idx.Manifests, desc)
		res.Platforms = append(res.Platforms, pt.platform.String())
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	top := content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, data)
	if err := repo.PushReference(ctx, top, bytes.NewReader(data), version); err != nil {
		return nil, fmt.Errorf("publish: tagging %s: %w", label, err)
	}
	res.Digest = top.Digest.String()
	res.Signed = signed == len(parts)
	return res, nil
}

// pushArtifactManifest pushes an OCI 1.1 artifact manifest of type
// OCIArtifactType with one layer and the empty config: what oras's
// PackManifest(PackManifestVersion1_1) writes, byte for byte (the same
// digest), without linking oras's root package, whose init compiles a
// regular expression in every marina command (docs/bench.md).
// The annotations must hold ocispec.AnnotationCreated.
func pushArtifactManifest(ctx context.Context, repo content.Storage, layer ocispec.Descriptor, ann map[string]string) (ocispec.Descriptor, error) {
	if err := pushBlob(ctx, repo, ocispec.DescriptorEmptyJSON, ocispec.DescriptorEmptyJSON.Data); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("failed to push config: %w", err)
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		Config:       ocispec.DescriptorEmptyJSON,
		MediaType:    ocispec.MediaTypeImageManifest,
		Layers:       []ocispec.Descriptor{layer},
		ArtifactType: OCIArtifactType,
		Annotations:  ann,
	}
	data, err := json.Marshal(m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := content.NewDescriptorFromBytes(m.MediaType, data)
	desc.ArtifactType, desc.Annotations = m.ArtifactType, m.Annotations
	if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return ocispec.Descriptor{}, fmt.Errorf("failed to push manifest: %w", err)
	}
	return desc, nil
}

// pushBlob pushes a blob unless the registry has it already.
func pushBlob(ctx context.Context, repo content.Storage, desc ocispec.Descriptor, data []byte) error {
	if ok, err := repo.Exists(ctx, desc); err == nil && ok {
		return nil
	}
	err := repo.Push(ctx, desc, bytes.NewReader(data))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		return nil
	}
	return err
}

// archiveManifest reads and checks the marina-plugin.json of a .tar.gz.
func archiveManifest(path string) (*SourceManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s is not a .tar.gz: %v", path, err))
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, newError(ErrInvalid, fmt.Sprintf("publish: %s has no %s; build it with `marina plugin package`", path, SourceManifestFile))
		}
		if err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("publish: reading %s: %v", path, err))
		}
		if filepath.Clean(h.Name) != SourceManifestFile {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, 1<<20))
		if err != nil {
			return nil, err
		}
		return parseSourceManifest(data, path+": "+SourceManifestFile)
	}
}
