package pluginstore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/bcollard/marina/sdk/dockertest"
)

// packagedDist writes what `marina plugin package` writes for acme 1.2.0:
// an archive for this machine and one for otherArch, each with its
// marina-plugin.json (sha256, hooks, protocol).
func packagedDist(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	for _, b := range []struct {
		p   Platform
		bin string
	}{{host, bins.v120}, {Platform{OS: host.OS, Arch: otherArch}, bins.other}} {
		sum := sha(t, b.bin)
		m := SourceManifest{Name: "acme", Version: "1.2.0", Protocol: "1.0", Platforms: []string{b.p.String()},
			Binary: "marina-plugin-acme", SHA256: map[string]string{b.p.String(): sum}, Description: "test plugin"}
		data, _ := json.Marshal(m)
		archive := filepath.Join(dist, fmt.Sprintf("marina-plugin-acme_1.2.0_%s_%s.tar.gz", b.p.OS, b.p.Arch))
		if err := writeArchive(archive, data, b.bin, "marina-plugin-acme"); err != nil {
			t.Fatal(err)
		}
	}
	return dist
}

// TestPublish publishes packaged archives to an in-memory registry and
// installs them back; TestPublishRealRegistry (tier 2) does the same
// against the distribution registry.
func TestPublish(t *testing.T) {
	_, hostport := newTestRegistry(t)
	testPublish(t, hostport)
}

func TestPublishRealRegistry(t *testing.T) {
	hostport := dockertest.Registry(t)
	testPublish(t, hostport)
}

func testPublish(t *testing.T, hostport string) {
	dist := packagedDist(t)
	s := newStore(t)
	ref := "oci://" + hostport + "/plugins/acme"
	res, err := s.Publish(testCtx(t), PublishOptions{Ref: ref, Dir: dist})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if res.Tag != "1.2.0" || res.Name != "acme" || len(res.Platforms) != 2 || !strings.HasPrefix(res.Digest, "sha256:") {
		t.Fatalf("result = %+v", res)
	}
	// The index: one manifest per platform, artifactType and protocol annotation.
	repo, err := remote.NewRepository(hostport + "/plugins/acme")
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	_, data, err := fetchManifest(testCtx(t), repo, "1.2.0", "test")
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil || len(idx.Manifests) != 2 || idx.Manifests[0].ArtifactType != OCIArtifactType {
		t.Fatalf("index: %v %s", err, data)
	}
	_, mdata, err := fetchManifest(testCtx(t), repo, idx.Manifests[0].Digest.String(), "test")
	if err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(mdata, &man); err != nil || man.ArtifactType != OCIArtifactType || man.Annotations[OCIProtocolAnnotation] != "1.0" ||
		len(man.Layers) != 1 || man.Layers[0].MediaType != OCILayerMediaType {
		t.Fatalf("manifest: %v %s", err, mdata)
	}

	// Published versions are immutable unless --force.
	_, err = s.Publish(testCtx(t), PublishOptions{Ref: ref, Dir: dist})
	wantErr(t, err, ErrInvalid, "1.2.0 already exists", "--force")
	if _, err := s.Publish(testCtx(t), PublishOptions{Ref: ref, Dir: dist, Force: true}); err != nil {
		t.Fatalf("Publish --force: %v", err)
	}

	// Install picks this machine's archive from the index and checks it
	// against its marina-plugin.json.
	inst := mustInstall(t, newStore(t), ref+":1.2.0", InstallOptions{})
	if inst.Version != "1.2.0" || inst.SHA256 != sha(t, bins.v120) || inst.SourceDigest != res.Digest {
		t.Fatalf("installed %+v", inst)
	}

	// Bad input.
	_, err = s.Publish(testCtx(t), PublishOptions{Ref: ref + ":1.2.0", Dir: dist})
	wantErr(t, err, ErrInvalid, "names a tag or digest")
	_, err = s.Publish(testCtx(t), PublishOptions{Ref: ref, Dir: t.TempDir()})
	wantErr(t, err, ErrInvalid, "no marina-plugin-*.tar.gz", "marina plugin package")
	mixed := packagedDist(t)
	data2, _ := json.Marshal(SourceManifest{Name: "acme", Version: "1.3.0", Platforms: []string{"linux/riscv64"}, Binary: "marina-plugin-acme"})
	if err := writeArchive(filepath.Join(mixed, "marina-plugin-acme_1.3.0_linux_riscv64.tar.gz"), data2, bins.v130, "marina-plugin-acme"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Publish(testCtx(t), PublishOptions{Ref: ref, Dir: mixed})
	wantErr(t, err, ErrInvalid, "publish one version at a time")
	if _, err := os.Stat(mixed); err != nil {
		t.Fatal(err)
	}
}

func TestRepositoryOfAndNewest(t *testing.T) {
	for src, want := range map[string]string{
		"oci://127.0.0.1:5000/team/acme:1.2.0":                     "oci://127.0.0.1:5000/team/acme",
		"oci://reg.example/acme@sha256:" + strings.Repeat("a", 64): "oci://reg.example/acme",
		"oci://reg.example/acme":                                   "oci://reg.example/acme",
		"/home/me/acme":                                            "",
		"https://example.com/acme.tar.gz":                          "",
	} {
		if got := RepositoryOf(src); got != want {
			t.Errorf("RepositoryOf(%s) = %q, want %q", src, got, want)
		}
	}
	vs := []RemoteVersion{
		{Version: "3.0.0", Runnable: false, Why: "needs protocol 2.0"},
		{Version: "2.1.0-rc.1", Runnable: true},
		{Version: "2.0.0", Runnable: true},
		{Version: "1.5.0", Runnable: true},
	}
	for c, want := range map[string]string{"": "2.0.0", "^1": "1.5.0", ">=2.1.0-0": "2.1.0-rc.1", "^4": ""} {
		got, err := Newest(vs, c)
		if err != nil {
			t.Fatal(err)
		}
		if g := ""; got != nil {
			g = got.Version
			if g != want {
				t.Errorf("Newest(%q) = %s, want %s", c, g, want)
			}
		} else if want != "" {
			t.Errorf("Newest(%q) = nil, want %s", c, want)
		}
	}
	if _, err := Newest(vs, "not a constraint"); err == nil {
		t.Error("a bad constraint is accepted")
	}
}
