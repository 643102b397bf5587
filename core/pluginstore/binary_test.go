package pluginstore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSniff(t *testing.T) {
	tests := []struct {
		name string
		head string
		kind artifactKind
		what string
	}{
		{"elf", "\x7fELF\x02\x01\x01", kindELF, ""},
		{"mach-o 64 little endian", "\xcf\xfa\xed\xfe\x07\x00", kindMachO, ""},
		{"mach-o fat", "\xca\xfe\xba\xbe\x00\x00\x00\x02", kindMachO, ""},
		{"script", "#!/bin/sh\nexec foo", kindScript, ""},
		{"gzip", "\x1f\x8b\x08\x00", kindGzip, ""},
		{"html doctype", "\ufeff\n  <!doctype HTML><html>", kindUnknown, "an HTML page"},
		{"html tag", "<html><head>", kindUnknown, "an HTML page"},
		{"json object", `  {"message": "Not Found"}`, kindUnknown, `a JSON document: "{\"message\": \"Not Found\"}"`},
		{"json array", `[1,2]`, kindUnknown, "a JSON document"},
		{"zip", "PK\x03\x04\x14\x00", kindUnknown, "a zip archive"},
		{"windows exe", "MZ\x90\x00", kindUnknown, "a Windows executable"},
		{"xml", "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>", kindUnknown, "an XML document"},
		{"text", "Not Found\n", kindUnknown, `text: "Not Found"`},
		{"empty", "", kindUnknown, "an empty file"},
		{"binary junk", "\x00\x01\x02\x03\xff\xfe", kindUnknown, "unknown format (it starts with 00 01 02 03 ff fe)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, what := sniff([]byte(tt.head))
			if kind != tt.kind || !strings.Contains(what, tt.what) {
				t.Fatalf("sniff = %v %q, want %v containing %q", kind, what, tt.kind, tt.what)
			}
		})
	}
}

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		in   string
		want Platform
		ok   bool
	}{
		{"linux/amd64", Platform{"linux", "amd64"}, true},
		{"darwin_arm64", Platform{"darwin", "arm64"}, true},
		{"linux/ppc64le", Platform{"linux", "ppc64le"}, true},
		{"linux", Platform{}, false},
		{"linux/", Platform{}, false},
		{"/amd64", Platform{}, false},
		{"linux/amd64/v8", Platform{}, false},
		{"Linux/AMD64", Platform{}, false},
		{"../x", Platform{}, false},
	}
	for _, tt := range tests {
		got, err := ParsePlatform(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParsePlatform(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestCheckPlatformReadsHeaders(t *testing.T) {
	if err := checkPlatform(bins.v120, "x", kindELF, host); host.OS == "linux" && err != nil {
		t.Fatalf("host binary refused: %v", err)
	}
	err := checkPlatform(bins.other, "the binary", kindForHost(), host)
	wantErr(t, err, ErrPlatform, "the binary is built for "+host.OS+"/"+otherArch)
	truncated := filepath.Join(t.TempDir(), "trunc")
	data, _ := os.ReadFile(bins.v120)
	os.WriteFile(truncated, data[:64], 0o755)
	wantErr(t, checkPlatform(truncated, "the download", kindForHost(), host), ErrNotPlugin, "headers are unreadable")
}

func kindForHost() artifactKind {
	if host.OS == "darwin" {
		return kindMachO
	}
	return kindELF
}

func FuzzParseSourceManifest(f *testing.F) {
	f.Add([]byte(`{"name":"acme","version":"1.2.0","protocol":"1.0","binary":"bin/marina-plugin-acme"}`))
	f.Add([]byte(`{"name":"acme","version":"1.2.0","binaries":{"linux/amd64":"a"}}`))
	f.Add([]byte(`{"name":"acme","version":"1.2.0","binary":"../../etc/passwd"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseSourceManifest(data, "fuzz")
		if err != nil {
			return
		}
		rel, err := m.binaryFor(host, "fuzz")
		if err == nil && !filepath.IsLocal(filepath.FromSlash(rel)) {
			t.Fatalf("accepted binary path %q outside the directory", rel)
		}
	})
}

func FuzzExtractTarGz(f *testing.F) {
	seed := func(names ...string) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, n := range names {
			tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte("x"))
		}
		tw.Close()
		gz.Close()
		return buf.Bytes()
	}
	f.Add(seed("marina-plugin-acme"))
	f.Add(seed("../escape"))
	f.Add(seed("a/b/c", "/abs"))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		dest := filepath.Join(base, "dest")
		os.Mkdir(dest, 0o755)
		archive := filepath.Join(base, "a.tar.gz")
		os.WriteFile(archive, data, 0o644)
		_ = extractTarGz(archive, dest, 1<<20, "fuzz")
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.Name() != "dest" && e.Name() != "a.tar.gz" {
				t.Fatalf("archive wrote %s outside its destination", e.Name())
			}
		}
	})
}

// TestSourceManifestPackageFields: what `marina plugin package` adds to
// marina-plugin.json is checked when read: sha256 per os/arch as hex, a
// config schema that is JSON.
func TestSourceManifestPackageFields(t *testing.T) {
	good := `{"name":"acme","version":"1.0.0","sha256":{"linux/amd64":"` + strings.Repeat("a", 64) + `"},"hooks":["PostCluster"],"configSchema":{"type":"object"},"description":"x"}`
	if _, err := parseSourceManifest([]byte(good), "m"); err != nil {
		t.Fatalf("a packaged manifest: %v", err)
	}
	for _, tc := range []struct{ json, want string }{
		{`{"name":"acme","version":"1.0.0","sha256":{"linux":"` + strings.Repeat("a", 64) + `"}}`, "sha256:"},
		{`{"name":"acme","version":"1.0.0","sha256":{"linux/amd64":"abc"}}`, `sha256[linux/amd64]: "abc" is not a hex sha256`},
		{`{"name":"acme","version":"1.0.0","hook":["PostUp"]}`, "fields are name, version, protocol, platforms, binary, binaries, sha256, description, hooks, configSchema"},
	} {
		if _, err := parseSourceManifest([]byte(tc.json), "m"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}
