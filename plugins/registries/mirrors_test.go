package registries

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcollard/marina/sdk"
)

func TestCheckMirrors(t *testing.T) {
	ok := func(name string, port int, u string) sdk.Mirror {
		return sdk.Mirror{Name: name, Port: port, RemoteURL: u}
	}
	tests := []struct {
		name    string
		mirrors []sdk.Mirror
		// wantErr lists substrings of the error; none means valid.
		wantErr []string
	}{
		{name: "defaults", mirrors: defaultMirrors()},
		{name: "none"},
		{name: "trailing slash", mirrors: []sdk.Mirror{ok("m", 5000, "https://quay.io/")}},
		{name: "host with port", mirrors: []sdk.Mirror{ok("m", 5000, "http://10.0.0.1:5000")}},
		{name: "hostname as name", mirrors: []sdk.Mirror{ok("quay.io", 5000, "https://quay.io")},
			wantErr: []string{"registries.mirrors[0].name", `"quay.io"`, "shadow", `"registry-quay-io"`}},
		{name: "colon in name", mirrors: []sdk.Mirror{ok("host:5000", 5000, "https://quay.io")},
			wantErr: []string{"registries.mirrors[0].name", "registry-host-5000"}},
		{name: "upper case", mirrors: []sdk.Mirror{ok("Quay", 5000, "https://quay.io")}, wantErr: []string{"lower-case"}},
		{name: "empty name", mirrors: []sdk.Mirror{ok("", 5000, "https://quay.io")}, wantErr: []string{"registries.mirrors[0].name"}},
		{name: "leading dash", mirrors: []sdk.Mirror{ok("-m", 5000, "https://quay.io")}, wantErr: []string{"registries.mirrors[0].name"}},
		{name: "duplicate name", mirrors: []sdk.Mirror{ok("m", 5000, "https://quay.io"), ok("m", 5001, "https://gcr.io")},
			wantErr: []string{"registries.mirrors[1].name", "registries.mirrors[0]", "unique"}},
		{name: "port zero", mirrors: []sdk.Mirror{ok("m", 0, "https://quay.io")}, wantErr: []string{"registries.mirrors[0].port 0", "1-65535"}},
		{name: "port too big", mirrors: []sdk.Mirror{ok("m", 70000, "https://quay.io")}, wantErr: []string{"port 70000"}},
		{name: "duplicate port", mirrors: []sdk.Mirror{ok("a", 5000, "https://quay.io"), ok("b", 5000, "https://gcr.io")},
			wantErr: []string{"registries.mirrors[1].port 5000", "registries.mirrors[0]"}},
		{name: "ftp", mirrors: []sdk.Mirror{ok("m", 5000, "ftp://quay.io")}, wantErr: []string{"remoteURL", "https://"}},
		{name: "no scheme", mirrors: []sdk.Mirror{ok("m", 5000, "quay.io")}, wantErr: []string{"remoteURL", "https://"}},
		{name: "no host", mirrors: []sdk.Mirror{ok("m", 5000, "https://")}, wantErr: []string{"remoteURL", "no host"}},
		{name: "path", mirrors: []sdk.Mirror{ok("m", 5000, "https://example.com/v2")}, wantErr: []string{"remoteURL", "root URL"}},
		{name: "query", mirrors: []sdk.Mirror{ok("m", 5000, "https://example.com?x=1")}, wantErr: []string{"root URL"}},
		{name: "bad port in URL", mirrors: []sdk.Mirror{ok("m", 5000, "https://example.com:99999")}, wantErr: []string{"invalid port"}},
		{name: "credentials in URL", mirrors: []sdk.Mirror{ok("m", 5000, "https://bob:hunter2@example.com")},
			wantErr: []string{"remoteURL", "username and password", "bob:xxxxx@"}},
		{name: "unparsable URL", mirrors: []sdk.Mirror{ok("m", 5000, "https://bob:hunter2@exa mple.com")}, wantErr: []string{"not a URL"}},
		{name: "same upstream twice", mirrors: []sdk.Mirror{ok("a", 5000, "https://registry-1.docker.io"), ok("b", 5001, "https://index.docker.io")},
			wantErr: []string{"registries.mirrors[1].remoteURL", "docker.io", "one mirror per upstream"}},
		{name: "username without password", mirrors: []sdk.Mirror{{Name: "m", Port: 5000, RemoteURL: "https://quay.io", Username: "bob"}},
			wantErr: []string{"registries.mirrors[0]", "both username and password"}},
		{name: "every error at once", mirrors: []sdk.Mirror{ok("a.b", 0, "ftp://x")},
			wantErr: []string{".name", ".port", ".remoteURL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := checkMirrors(tt.mirrors)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if len(ms) != len(tt.mirrors) {
					t.Fatalf("%d mirrors back, want %d", len(ms), len(tt.mirrors))
				}
				return
			}
			if err == nil {
				t.Fatalf("checkMirrors accepted %+v", tt.mirrors)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestRegistryHostAndDir(t *testing.T) {
	tests := []struct{ url, host, dir string }{
		{"https://registry-1.docker.io", "docker.io", "/etc/containerd/certs.d/docker.io"},
		{"https://index.docker.io", "docker.io", "/etc/containerd/certs.d/docker.io"},
		{"https://docker.io", "docker.io", "/etc/containerd/certs.d/docker.io"},
		{"https://registry-1.docker.io:443", "registry-1.docker.io:443", "/etc/containerd/certs.d/registry-1.docker.io_443_"},
		{"https://quay.io", "quay.io", "/etc/containerd/certs.d/quay.io"},
		{"https://us-central1-docker.pkg.dev", "us-central1-docker.pkg.dev", "/etc/containerd/certs.d/us-central1-docker.pkg.dev"},
		{"http://registry.internal:5000", "registry.internal:5000", "/etc/containerd/certs.d/registry.internal_5000_"},
		{"http://10.1.2.3:5000", "10.1.2.3:5000", "/etc/containerd/certs.d/10.1.2.3_5000_"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		host := registryHost(u)
		if host != tt.host {
			t.Errorf("registryHost(%s) = %s, want %s", tt.url, host, tt.host)
		}
		if dir := hostsDir(host); dir != tt.dir {
			t.Errorf("hostsDir(%s) = %s, want %s", host, dir, tt.dir)
		}
	}
}

func TestSuggestName(t *testing.T) {
	for in, want := range map[string]string{
		"quay.io":              "registry-quay-io",
		"registry-1.docker.io": "registry-registry-1-docker-io",
		"Host:5000":            "registry-host-5000",
		"...":                  "registry-mirror",
	} {
		got := suggestName(in)
		if got != want {
			t.Errorf("suggestName(%q) = %q, want %q", in, got, want)
		}
		if !mirrorName().MatchString(got) {
			t.Errorf("suggestName(%q) = %q is not itself a valid name", in, got)
		}
	}
}

func TestHashKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "registries")
	k1, err := hashKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != keySize {
		t.Fatalf("key of %d bytes, want %d", len(k1), keySize)
	}
	st, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %o, want 0600", st.Mode().Perm())
	}
	if dst, err := os.Stat(dir); err != nil || dst.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v, %v; want mode 0700", dst.Mode().Perm(), err)
	}
	k2, err := hashKey(dir)
	if err != nil || string(k2) != string(k1) {
		t.Fatalf("second hashKey = %x, %v; want the stored key %x", k2, err, k1)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("state dir holds %d entries, want only %s (no temporary files left)", len(entries), keyFile)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := hashKey(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("hashKey over a damaged key = %v, want an error with the fix", err)
	}
	if _, err := hashKey(""); err == nil {
		t.Fatal("hashKey with no state dir succeeded")
	}
}

func TestCacheMount(t *testing.T) {
	ms, err := checkMirrors([]sdk.Mirror{{Name: "registry-quayio", Port: 5010, RemoteURL: "https://quay.io"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		storage, dir string
		wantType     string
		wantSource   string
		wantErr      string
	}{
		{"guest", "", "volume", "marina-registry-cache-registry-quayio", ""},
		{"", "", "volume", "marina-registry-cache-registry-quayio", ""},
		{"host", "/Users/me/.marina/registry-cache", "bind", "/Users/me/.marina/registry-cache/registry-quayio", ""},
		{"host", "relative/cache", "", "", "absolute"},
		{"disk", "", "", "", "not host or guest"},
	}
	for _, tt := range tests {
		env := sdk.Env{RegistryCacheStorage: tt.storage, RegistryCacheDir: tt.dir}
		m, err := cacheMount(env, ms[0])
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("cacheMount(%s, %s) = %v, want an error with %q", tt.storage, tt.dir, err, tt.wantErr)
			}
			continue
		}
		if err != nil || m.Type != tt.wantType || m.Source != tt.wantSource || m.Target != "/var/lib/registry" {
			t.Errorf("cacheMount(%s, %s) = %+v, %v; want %s %s at /var/lib/registry", tt.storage, tt.dir, m, err, tt.wantType, tt.wantSource)
		}
	}
}
