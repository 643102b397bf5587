package pluginstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/bcollard/marina/sdk/dockertest"
)

// testRegistry implements the part of the OCI distribution API that oras
// uses to push and pull (blob upload, manifests by tag and digest, blobs,
// tag list), in memory, on 127.0.0.1. The store's install talks to it
// through the same oras remote.Repository code path as to a real registry.
type testRegistry struct {
	mu        sync.Mutex
	blobs     map[string][]byte // repo@digest
	manifests map[digest.Digest]stored
	tags      map[string]map[string]digest.Digest // repo -> tag -> digest
	uploads   int
	gets      []string // paths of GET requests
}

type stored struct {
	mediaType string
	data      []byte
}

func newTestRegistry(t testing.TB) (*testRegistry, string) {
	r := &testRegistry{blobs: map[string][]byte{}, manifests: map[digest.Digest]stored{}, tags: map[string]map[string]digest.Digest{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, strings.TrimPrefix(srv.URL, "http://")
}

func ociError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, code, strings.ToLower(code))
}

func (r *testRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := req.URL.Path
	if req.Method == http.MethodGet {
		r.gets = append(r.gets, p)
	}
	if p == "/v2/" || p == "/v2" {
		w.WriteHeader(http.StatusOK)
		return
	}
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		ociError(w, http.StatusNotFound, "NAME_UNKNOWN")
		return
	}
	switch {
	case rest == "_catalog":
		repos := make([]string, 0, len(r.tags))
		for repo := range r.tags {
			repos = append(repos, repo)
		}
		sort.Strings(repos)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"repositories": repos})
		return
	case strings.HasSuffix(rest, "/tags/list"):
		repo := strings.TrimSuffix(rest, "/tags/list")
		tags, ok := r.tags[repo]
		if !ok {
			ociError(w, http.StatusNotFound, "NAME_UNKNOWN")
			return
		}
		list := make([]string, 0, len(tags))
		for t := range tags {
			list = append(list, t)
		}
		sort.Strings(list)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"name": repo, "tags": list})
	case strings.Contains(rest, "/blobs/uploads/"):
		repo, id, _ := strings.Cut(rest, "/blobs/uploads/")
		switch req.Method {
		case http.MethodPost:
			r.uploads++
			w.Header().Set("Location", fmt.Sprintf("/v2/%s/blobs/uploads/u%d", repo, r.uploads))
			w.WriteHeader(http.StatusAccepted)
		case http.MethodPut:
			data, _ := io.ReadAll(req.Body)
			want := digest.Digest(req.URL.Query().Get("digest"))
			if id == "" || digest.FromBytes(data) != want {
				ociError(w, http.StatusBadRequest, "DIGEST_INVALID")
				return
			}
			r.blobs[repo+"@"+want.String()] = data
			w.Header().Set("Location", fmt.Sprintf("/v2/%s/blobs/%s", repo, want))
			w.Header().Set("Docker-Content-Digest", want.String())
			w.WriteHeader(http.StatusCreated)
		default:
			ociError(w, http.StatusMethodNotAllowed, "UNSUPPORTED")
		}
	case strings.Contains(rest, "/blobs/"):
		repo, d, _ := strings.Cut(rest, "/blobs/")
		data, ok := r.blobs[repo+"@"+d]
		if !ok {
			ociError(w, http.StatusNotFound, "BLOB_UNKNOWN")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", d)
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		if req.Method == http.MethodGet {
			w.Write(data)
		}
	case strings.Contains(rest, "/manifests/"):
		i := strings.LastIndex(rest, "/manifests/")
		repo, ref := rest[:i], rest[i+len("/manifests/"):]
		switch req.Method {
		case http.MethodPut:
			data, _ := io.ReadAll(req.Body)
			d := digest.FromBytes(data)
			r.manifests[d] = stored{mediaType: req.Header.Get("Content-Type"), data: data}
			if _, err := digest.Parse(ref); err != nil {
				if r.tags[repo] == nil {
					r.tags[repo] = map[string]digest.Digest{}
				}
				r.tags[repo][ref] = d
			} else if r.tags[repo] == nil {
				r.tags[repo] = map[string]digest.Digest{}
			}
			w.Header().Set("Docker-Content-Digest", d.String())
			w.WriteHeader(http.StatusCreated)
		case http.MethodGet, http.MethodHead:
			d := digest.Digest(ref)
			if _, err := digest.Parse(ref); err != nil {
				d = r.tags[repo][ref]
			}
			m, ok := r.manifests[d]
			if !ok {
				ociError(w, http.StatusNotFound, "MANIFEST_UNKNOWN")
				return
			}
			w.Header().Set("Content-Type", m.mediaType)
			w.Header().Set("Docker-Content-Digest", d.String())
			w.Header().Set("Content-Length", fmt.Sprint(len(m.data)))
			if req.Method == http.MethodGet {
				w.Write(m.data)
			}
		default:
			ociError(w, http.StatusMethodNotAllowed, "UNSUPPORTED")
		}
	default:
		ociError(w, http.StatusNotFound, "NAME_UNKNOWN")
	}
}

// publisher pushes plugin artifacts with oras-go, as a plugin's CI would.
type publisher struct {
	t    *testing.T
	ctx  context.Context
	repo *remote.Repository
}

func newPublisher(t *testing.T, hostport, repo string) *publisher {
	r, err := remote.NewRepository(hostport + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	return &publisher{t: t, ctx: testCtx(t), repo: r}
}

// layer pushes a file as a layer titled title.
func (p *publisher) layer(path, title string) ocispec.Descriptor {
	data := []byte(readString(p.t, path))
	desc := content.NewDescriptorFromBytes("application/vnd.marina.plugin.layer.v1", data)
	desc.Annotations = map[string]string{ocispec.AnnotationTitle: title}
	if err := p.repo.Push(p.ctx, desc, bytes.NewReader(data)); err != nil {
		p.t.Fatal(err)
	}
	return desc
}

// manifest packs a manifest of layers, tags it if tag is set.
func (p *publisher) manifest(tag string, annotations map[string]string, layers ...ocispec.Descriptor) ocispec.Descriptor {
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ocispec.AnnotationCreated] = "2030-01-01T00:00:00Z"
	desc, err := oras.PackManifest(p.ctx, p.repo, oras.PackManifestVersion1_1, OCIArtifactType, oras.PackManifestOptions{
		Layers: layers, ManifestAnnotations: annotations,
	})
	if err != nil {
		p.t.Fatal(err)
	}
	if tag != "" {
		if err := p.repo.Tag(p.ctx, desc, tag); err != nil {
			p.t.Fatal(err)
		}
	}
	return desc
}

// index pushes an image index of per-platform manifests under tag.
func (p *publisher) index(tag string, manifests map[Platform]ocispec.Descriptor) ocispec.Descriptor {
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for plat, d := range manifests {
		d.Platform = &ocispec.Platform{OS: plat.OS, Architecture: plat.Arch}
		idx.Manifests = append(idx.Manifests, d)
	}
	sort.Slice(idx.Manifests, func(i, j int) bool {
		return idx.Manifests[i].Platform.Architecture < idx.Manifests[j].Platform.Architecture
	})
	data, _ := json.Marshal(idx)
	desc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, data)
	if err := p.repo.PushReference(p.ctx, desc, bytes.NewReader(data), tag); err != nil {
		p.t.Fatal(err)
	}
	return desc
}

// TestInstallFromOCI installs from an in-memory registry, which can also
// misbehave (serve bytes that do not match a digest) and records which blobs
// were fetched.
func TestInstallFromOCI(t *testing.T) {
	reg, hostport := newTestRegistry(t)
	testOCIInstall(t, hostport, reg)
}

// TestInstallFromOCIRealRegistry (tier 2) runs the same installs against the
// real distribution registry (marina-test/registry, built from
// github.com/distribution/distribution/v3) in a container published on
// 127.0.0.1.
func TestInstallFromOCIRealRegistry(t *testing.T) {
	hostport := dockertest.Registry(t)
	testOCIInstall(t, hostport, nil)
}

// testOCIInstall publishes plugin artifacts to the registry at hostport and
// installs them. reg is the in-memory registry (nil for a real one): only it
// can serve corrupt bytes and report which blobs were fetched.
func testOCIInstall(t *testing.T, hostport string, reg *testRegistry) {
	otherPlat := Platform{OS: host.OS, Arch: otherArch}

	// plugins/acme: 1.2.0 is a plain binary artifact; 1.3.0 (also "latest") a
	// multi-platform index whose entry for this machine is a .tar.gz.
	acme := newPublisher(t, hostport, "plugins/acme")
	m120 := acme.manifest("1.2.0", map[string]string{OCIProtocolAnnotation: "1.0"}, acme.layer(bins.v120, "marina-plugin-acme"))
	archive := filepath.Join(t.TempDir(), "acme_1.3.0.tar.gz")
	writeTarGz(t, archive, []tarEntry{
		{name: "marina-plugin.json", data: `{"name":"acme","version":"1.3.0"}`},
		{name: "marina-plugin-acme", data: readString(t, bins.v130), mode: 0o755},
	})
	hostM := acme.manifest("", nil, acme.layer(archive, "acme_1.3.0.tar.gz"))
	otherM := acme.manifest("", nil, acme.layer(bins.other, "marina-plugin-acme"))
	idx130 := acme.index("1.3.0", map[Platform]ocispec.Descriptor{host: hostM, otherPlat: otherM})
	if err := acme.repo.Tag(acme.ctx, idx130, "latest"); err != nil {
		t.Fatal(err)
	}
	// plugins/future speaks protocol 2.1 and says so in an annotation.
	future := newPublisher(t, hostport, "plugins/future")
	futureLayer := future.layer(bins.v200, "marina-plugin-acme")
	future.manifest("2.0.0", map[string]string{OCIProtocolAnnotation: "2.1"}, futureLayer)
	// plugins/unsigned: no signature annotation; refused under enforce.
	unsigned := newPublisher(t, hostport, "plugins/unsigned")
	unsignedLayer := unsigned.layer(bins.v120, "marina-plugin-acme")
	unsigned.manifest("1.0.0", map[string]string{OCIProtocolAnnotation: "1.0"}, unsignedLayer)
	// plugins/dockery says it declares the docker capability; a limit
	// allows its source only kubeconfig.
	dockery := newPublisher(t, hostport, "plugins/dockery")
	dockeryLayer := dockery.layer(bins.v120, "marina-plugin-acme")
	dockery.manifest("1.0.0", map[string]string{OCIProtocolAnnotation: "1.0", OCICapabilitiesAnnotation: "kubeconfig,docker"}, dockeryLayer)
	limits := []CapabilityLimit{{Rule: "pluginTrust.capabilities[0]", Sources: []string{"oci://" + hostport + "/plugins/dock"}, Allow: []string{"kubeconfig"}}}
	// plugins/elsewhere is published for another platform only.
	elsewhere := newPublisher(t, hostport, "plugins/elsewhere")
	elsewhere.index("1.0.0", map[Platform]ocispec.Descriptor{otherPlat: elsewhere.manifest("", nil, elsewhere.layer(bins.other, "marina-plugin-acme"))})
	// plugins/evil: the registry serves bytes that do not match the layer digest.
	if reg != nil {
		evil := newPublisher(t, hostport, "plugins/evil")
		evilLayer := evil.layer(bins.v120, "marina-plugin-acme")
		evil.manifest("1.2.0", nil, evilLayer)
		reg.mu.Lock()
		reg.blobs["plugins/evil@"+evilLayer.Digest.String()] = []byte(readString(t, bins.v130))
		reg.mu.Unlock()
	}

	ref := "oci://" + hostport
	tests := []struct {
		name        string
		src         string
		opts        InstallOptions
		wantVersion string
		wantDigest  digest.Digest
		kind        error
		fragments   []string
		// enforce: the store's pluginTrust.policy is enforce.
		enforce bool
		// limits are the store's pluginTrust.capabilities.
		limits []CapabilityLimit
	}{
		{name: "by tag", src: ref + "/plugins/acme:1.2.0", wantVersion: "1.2.0", wantDigest: m120.Digest},
		{name: "by digest", src: ref + "/plugins/acme@" + m120.Digest.String(), wantVersion: "1.2.0", wantDigest: m120.Digest},
		{name: "highest tag through an index", src: ref + "/plugins/acme", wantVersion: "1.3.0", wantDigest: idx130.Digest},
		{name: "constraint picks tag", src: ref + "/plugins/acme", opts: InstallOptions{Version: "~1.2"}, wantVersion: "1.2.0", wantDigest: m120.Digest},
		{name: "non-semver tag", src: ref + "/plugins/acme:latest", wantVersion: "1.3.0", wantDigest: idx130.Digest},
		{name: "layer checksum given", src: ref + "/plugins/acme:1.2.0", opts: InstallOptions{SHA256: sha(t, bins.v120)}, wantVersion: "1.2.0", wantDigest: m120.Digest},
		{name: "layer checksum wrong", src: ref + "/plugins/acme:1.2.0", opts: InstallOptions{SHA256: sha(t, bins.v130)},
			kind: ErrChecksum, fragments: []string{"checksum mismatch"}},
		{name: "no matching tag", src: ref + "/plugins/acme", opts: InstallOptions{Version: "^3"},
			kind: ErrNoMatch, fragments: []string{`has no tag matching "^3"; semver tags: 1.2.0, 1.3.0`}},
		{name: "unknown tag", src: ref + "/plugins/acme:9.9.9", kind: ErrSourceNotFound, fragments: []string{"not found in the registry"}},
		{name: "protocol refused before download", src: ref + "/plugins/future:2.0.0",
			kind: ErrProtocol, fragments: []string{"speaks protocol 2.1; this marina speaks protocol 1.0 — it needs a marina release that speaks protocol 2.x"}},
		{name: "unsigned refused before download under enforce", src: ref + "/plugins/unsigned:1.0.0", enforce: true,
			kind: ErrUntrusted, fragments: []string{"is unsigned", "pluginTrust.policy is enforce"}},
		{name: "capability over a limit refused before download", src: ref + "/plugins/dockery:1.0.0", limits: limits,
			kind: ErrUntrusted, fragments: []string{"declares capability docker, but pluginTrust.capabilities[0] allows plugins from oci://" + hostport + "/plugins/dock only kubeconfig"}},
		{name: "no build for this platform", src: ref + "/plugins/elsewhere:1.0.0",
			kind: ErrPlatform, fragments: []string{"has builds for " + otherPlat.String() + ", not for " + host.String()}},
		{name: "registry serves wrong bytes", src: ref + "/plugins/evil:1.2.0", kind: ErrChecksum, fragments: []string{"the registry sent a layer with sha256"}},
		{name: "invalid reference", src: "oci://" + hostport, kind: ErrInvalid, fragments: []string{"not a valid OCI reference"}},
	}
	for _, tt := range tests {
		if reg == nil && strings.Contains(tt.src, "/plugins/evil") {
			continue // only the in-memory registry can serve corrupt bytes
		}
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			s.Trust.Enforce = tt.enforce
			s.Trust.Capabilities = tt.limits
			inst, err := s.Install(testCtx(t), tt.src, tt.opts)
			if tt.kind != nil {
				wantErr(t, err, tt.kind, tt.fragments...)
				if list, _ := s.List(); len(list) != 0 {
					t.Fatalf("refused artifact installed: %+v", list)
				}
				assertNoLeftovers(t, s.Root())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inst.Version != tt.wantVersion || inst.SourceDigest != tt.wantDigest.String() || inst.Source != RepositoryOf(tt.src) || sha(t, inst.Path) != inst.SHA256 {
				t.Fatalf("installed %+v; want version %s from %s, recorded as the repository %s", inst, tt.wantVersion, tt.wantDigest, RepositoryOf(tt.src))
			}
			assertNoLeftovers(t, s.Root())
		})
	}

	// versions takes the same decision, from the same annotation.
	s := newStore(t)
	s.Trust.Capabilities = limits
	vs, err := s.Versions(testCtx(t), ref+"/plugins/dockery")
	if err != nil || len(vs) != 1 || vs[0].Runnable || vs[0].Why != "refused by pluginTrust.capabilities[0]: declares docker" ||
		strings.Join(vs[0].Capabilities, ",") != "kubeconfig,docker" {
		t.Errorf("versions of a build over a capability limit: %v %+v", err, vs)
	}

	if reg == nil {
		return
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, g := range reg.gets {
		if strings.HasSuffix(g, "plugins/dockery/blobs/"+dockeryLayer.Digest.String()) {
			t.Errorf("the layer of a build over a capability limit was downloaded (%s); the manifest should have refused it first", g)
		}
		if strings.HasSuffix(g, "/blobs/"+futureLayer.Digest.String()) {
			t.Errorf("the protocol-2.1 plugin's layer was downloaded (%s); the annotation should have refused it first", g)
		}
		if strings.HasSuffix(g, "plugins/unsigned/blobs/"+unsignedLayer.Digest.String()) {
			t.Errorf("the unsigned plugin's layer was downloaded under enforce (%s); the manifest should have refused it first", g)
		}
	}
}
