package pluginstore

import (
	"bytes"
	"context"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
)

// TestArtifactManifestMatchesOras: the manifest publish pushes is the one
// oras's PackManifest (OCI 1.1) pushes for the same layer and annotations —
// the same bytes, so the same digest — and the empty config blob is pushed
// with it.
func TestArtifactManifestMatchesOras(t *testing.T) {
	ctx := context.Background()
	layer := content.NewDescriptorFromBytes(OCILayerMediaType, []byte("archive"))
	layer.Annotations = map[string]string{ocispec.AnnotationTitle: "demo_1.0.0_linux_amd64.tar.gz"}
	ann := func() map[string]string {
		return map[string]string{
			ocispec.AnnotationTitle: "demo", ocispec.AnnotationVersion: "1.0.0",
			ocispec.AnnotationCreated: "1970-01-01T00:00:00Z", OCIProtocolAnnotation: "1.0",
		}
	}
	ours, theirs := memory.New(), memory.New()
	for _, st := range []content.Storage{ours, theirs} {
		if err := st.Push(ctx, layer, bytes.NewReader([]byte("archive"))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := pushArtifactManifest(ctx, ours, layer, ann())
	if err != nil {
		t.Fatal(err)
	}
	want, err := oras.PackManifest(ctx, theirs, oras.PackManifestVersion1_1, OCIArtifactType, oras.PackManifestOptions{
		Layers: []ocispec.Descriptor{layer}, ManifestAnnotations: ann(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.Digest || got.Size != want.Size || got.MediaType != want.MediaType || got.ArtifactType != want.ArtifactType {
		t.Fatalf("manifest = %+v, oras's = %+v", got, want)
	}
	for _, d := range []ocispec.Descriptor{got, ocispec.DescriptorEmptyJSON} {
		if ok, err := ours.Exists(ctx, d); err != nil || !ok {
			t.Errorf("%s (%s) was not pushed: %v", d.Digest, d.MediaType, err)
		}
	}
	// Pushing again is not an error (a republish with --force).
	if _, err := pushArtifactManifest(ctx, ours, layer, ann()); err != nil {
		t.Errorf("second push: %v", err)
	}
}
