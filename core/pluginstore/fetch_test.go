package pluginstore

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// releaseServer is an https server on 127.0.0.1 standing in for a release
// host: a binary, an archive, and the wrong things people link to.
func releaseServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	bin := readString(t, bins.v120)
	archive := filepath.Join(t.TempDir(), "acme.tar.gz")
	writeTarGz(t, archive, []tarEntry{
		{name: "marina-plugin.json", data: `{"name":"acme","version":"1.2.0","protocol":"1.0"}`},
		{name: "marina-plugin-acme", data: bin, mode: 0o755},
	})
	tgz := readString(t, archive)
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/download/marina-plugin-acme", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte(bin))
	})
	mux.HandleFunc("/download/acme.tar.gz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tgz)) })
	mux.HandleFunc("/releases/v1.2.0", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("\n  <!DOCTYPE html>\n<html lang=\"en\"><head><title>Release v1.2.0</title></head><body>assets</body></html>"))
	})
	mux.HandleFunc("/private/marina-plugin-acme", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"Not Found","documentation_url":"https://docs.example/rest"}`))
	})
	mux.HandleFunc("/api/asset", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"error":"token expired"}`))
	})
	mux.HandleFunc("/redirect-to-http", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/marina-plugin-acme", http.StatusFound)
	})
	mux.HandleFunc("/redirect-to-binary", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/download/marina-plugin-acme", http.StatusFound)
	})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestInstallFromHTTPS(t *testing.T) {
	srv, hits := releaseServer(t)
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("test server at %s, want 127.0.0.1 only", srv.URL)
	}
	binSum := sha(t, bins.v120)
	tests := []struct {
		name      string
		path      string
		opts      InstallOptions
		insecure  bool
		noRequest bool
		kind      error
		fragments []string
	}{
		{name: "binary with checksum", path: "/download/marina-plugin-acme", opts: InstallOptions{SHA256: binSum}},
		{name: "via redirect", path: "/redirect-to-binary", opts: InstallOptions{SHA256: binSum}},
		{name: "archive with checksum", path: "/download/acme.tar.gz", opts: InstallOptions{SHA256: "ARCHIVE"}},
		{name: "insecure skip", path: "/download/marina-plugin-acme", opts: InstallOptions{InsecureSkipChecksum: true}, insecure: true},
		{name: "checksum required", path: "/download/marina-plugin-acme", noRequest: true,
			kind: ErrChecksumRequired, fragments: []string{"needs the expected checksum: pass --sha256", "--insecure-skip-checksum"}},
		{name: "checksum mismatch", path: "/download/marina-plugin-acme", opts: InstallOptions{SHA256: strings.Repeat("0", 64)},
			kind: ErrChecksum, fragments: []string{"checksum mismatch", "it has sha256 " + binSum}},
		{name: "html release page", path: "/releases/v1.2.0", opts: InstallOptions{SHA256: binSum},
			kind: ErrNotPlugin, fragments: []string{"returned an HTML page, not a plugin binary or archive — is it a release page rather than the download link?"}},
		{name: "404 json body", path: "/private/marina-plugin-acme", opts: InstallOptions{SHA256: binSum},
			kind: ErrNotPlugin, fragments: []string{"the server answered 404 Not Found with a JSON document", `Not Found`, "check the download link"}},
		{name: "200 json body", path: "/api/asset", opts: InstallOptions{SHA256: binSum},
			kind: ErrNotPlugin, fragments: []string{`returned a JSON document: "{\"error\":\"token expired\"}", not a plugin binary or archive`}},
		{name: "redirect to http", path: "/redirect-to-http", opts: InstallOptions{SHA256: binSum},
			kind: nil, fragments: []string{"not https; refusing to download a plugin over plain http"}},
	}
	archiveSum := ""
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			s.HTTPClient = srv.Client()
			if tt.opts.SHA256 == "ARCHIVE" {
				if archiveSum == "" {
					resp, err := srv.Client().Get(srv.URL + tt.path)
					if err != nil {
						t.Fatal(err)
					}
					f := filepath.Join(t.TempDir(), "a.tar.gz")
					out, _ := os.Create(f)
					out.ReadFrom(resp.Body)
					out.Close()
					resp.Body.Close()
					archiveSum = sha(t, f)
				}
				tt.opts.SHA256 = archiveSum
			}
			before := hits.Load()
			inst, err := s.Install(testCtx(t), srv.URL+tt.path, tt.opts)
			if tt.noRequest && hits.Load() != before {
				t.Errorf("the server was contacted although the install could not proceed")
			}
			if tt.fragments != nil {
				wantErr(t, err, tt.kind, tt.fragments...)
				if list, _ := s.List(); len(list) != 0 {
					t.Fatalf("refused download installed %+v", list)
				}
				assertNoLeftovers(t, s.Root())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inst.Source != srv.URL+tt.path || inst.SHA256 != binSum || inst.InsecureSkipChecksum != tt.insecure {
				t.Fatalf("installed %+v", inst)
			}
			if err := s.Pin(inst, ""); err != nil {
				t.Fatal(err)
			}
			lf, _ := s.ReadLock()
			if e := lf.Plugins["acme"]; e.InsecureSkipChecksum != tt.insecure || e.Source != inst.Source {
				t.Fatalf("lock entry %+v", e)
			}
			assertNoLeftovers(t, s.Root())
		})
	}
}

func TestInstallRespectsSizeLimit(t *testing.T) {
	srv, _ := releaseServer(t)
	s := newStore(t)
	s.HTTPClient = srv.Client()
	s.MaxArtifactBytes = 1 << 20
	_, err := s.Install(testCtx(t), srv.URL+"/download/marina-plugin-acme", InstallOptions{InsecureSkipChecksum: true})
	wantErr(t, err, ErrInvalid, "larger than", "limit")
	_, err = s.Install(testCtx(t), bins.v120, InstallOptions{})
	wantErr(t, err, ErrInvalid, bins.v120+" is larger than 1 MiB")
	assertNoLeftovers(t, s.Root())
}

func TestInstallURLDoesNotRecordCredentials(t *testing.T) {
	srv, _ := releaseServer(t)
	s := newStore(t)
	s.HTTPClient = srv.Client()
	u := strings.Replace(srv.URL, "https://", "https://user:secret@", 1) + "/download/marina-plugin-acme"
	inst, err := s.Install(testCtx(t), u, InstallOptions{SHA256: sha(t, bins.v120)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inst.Source, "secret") || strings.Contains(readString(t, filepath.Join(filepath.Dir(inst.Path), ManifestFile)), "secret") {
		t.Fatalf("credentials recorded: %s", inst.Source)
	}
}
