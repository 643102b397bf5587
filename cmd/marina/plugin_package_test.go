package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/sdk/dockertest"
)

// TestPluginPackage: `marina plugin package` builds a scaffolded plugin into
// an archive with its marina-plugin.json (name, version, protocol,
// platform, the binary's sha256, hooks, config schema) and SHA256SUMS;
// install takes the archive, and refuses it when the manifest's sha256 or
// hooks do not match the binary. (One platform, this machine's: the cross
// builds are the same go build with GOOS/GOARCH.)
func TestPluginPackage(t *testing.T) {
	home := t.TempDir()
	dir := scaffoldAcme(t, home, t.TempDir())
	host := runtime.GOOS + "/" + runtime.GOARCH
	out := filepath.Join(t.TempDir(), "dist")

	// Bad input first: a platform that is not os/arch, a version that is not semver.
	if r := marina(t, home, nil, "plugin", "package", dir, "--platform", "linux"); r.code != 2 || !strings.Contains(r.stderr, "--platform") {
		t.Errorf("--platform linux: exit %d\n%s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "package", dir, "--version", "v1"); r.code != 2 || !strings.Contains(r.stderr, "--version") {
		t.Errorf("--version v1: exit %d\n%s", r.code, r.stderr)
	}

	r := marina(t, home, nil, "plugin", "package", dir, "--version", "2.0.0", "--platform", host, "--out", out, "-o", "json")
	if r.code != 0 {
		t.Fatalf("plugin package: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res pluginstore.PackageResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if res.Name != "acme" || res.Version != "2.0.0" || len(res.Artifacts) != 1 || res.Artifacts[0].Platform != host {
		t.Fatalf("result = %+v", res)
	}
	archive := res.Artifacts[0].Path
	if want := "marina-plugin-acme_2.0.0_" + strings.Replace(host, "/", "_", 1) + ".tar.gz"; filepath.Base(archive) != want {
		t.Errorf("archive %s, want %s", archive, want)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil || !strings.Contains(string(sums), res.Artifacts[0].SHA256+"  "+filepath.Base(archive)) {
		t.Errorf("SHA256SUMS: %v\n%s", err, sums)
	}
	files := readTarGz(t, archive)
	var m pluginstore.SourceManifest
	if err := json.Unmarshal(files["marina-plugin.json"], &m); err != nil {
		t.Fatalf("marina-plugin.json: %v", err)
	}
	if m.Name != "acme" || m.Version != "2.0.0" || m.Protocol != "1.0" || strings.Join(m.Platforms, ",") != host ||
		m.SHA256[host] != res.Artifacts[0].BinarySHA256 || strings.Join(m.Hooks, ",") != "PostCluster" ||
		!strings.Contains(string(m.ConfigSchema), `"greeting"`) || m.Binary != "marina-plugin-acme" {
		t.Errorf("manifest = %+v", m)
	}
	if len(files["marina-plugin-acme"]) == 0 {
		t.Fatal("the archive has no binary")
	}

	// The manifest is checked at install: altered, the archive is refused.
	for name, edit := range map[string]func(*pluginstore.SourceManifest){
		"sha256": func(m *pluginstore.SourceManifest) { m.SHA256[host] = strings.Repeat("0", 64) },
		"hooks":  func(m *pluginstore.SourceManifest) { m.Hooks = []string{"PostUp"} },
	} {
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.MkdirAll(bad, 0o755); err != nil {
			t.Fatal(err)
		}
		mm := m
		mm.SHA256 = map[string]string{host: m.SHA256[host]}
		edit(&mm)
		b, _ := json.Marshal(mm)
		if err := os.WriteFile(filepath.Join(bad, "marina-plugin.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bad, "marina-plugin-acme"), files["marina-plugin-acme"], 0o755); err != nil {
			t.Fatal(err)
		}
		if r := marina(t, home, nil, "plugin", "install", bad); r.code == 0 || !strings.Contains(r.stderr, "marina-plugin.json") {
			t.Errorf("install with a wrong %s in the manifest: exit %d\n%s", name, r.code, r.stderr)
		}
	}
	if r := marina(t, home, nil, "plugin", "install", archive); r.code != 0 || !strings.Contains(r.stdout, "installed acme 2.0.0") {
		t.Fatalf("install the archive: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// readTarGz returns the regular files of a .tar.gz by name.
func readTarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// TestPluginPublishInstall (tier 2): package → publish to the distribution
// registry (a container on 127.0.0.1) → install by constraint from it →
// list and verify; publishing the same version again is refused.
func TestPluginPublishInstall(t *testing.T) {
	hostport := dockertest.Registry(t)
	home := t.TempDir()
	dir := scaffoldAcme(t, home, t.TempDir())
	dist := filepath.Join(t.TempDir(), "dist")
	if r := marina(t, home, nil, "plugin", "package", dir, "--version", "1.4.0", "--platform", runtime.GOOS+"/"+runtime.GOARCH, "--out", dist); r.code != 0 {
		t.Fatalf("package: %d %s", r.code, r.stderr)
	}
	ref := "oci://" + hostport + "/team/acme"
	if r := marina(t, home, nil, "plugin", "publish", ref, "--dir", dist); r.code != 0 || !strings.Contains(r.stdout, "published acme 1.4.0 to "+ref+":1.4.0") ||
		!strings.Contains(r.stdout, "  not signed (marina plugin package --sign KEY") {
		t.Fatalf("publish: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "publish", ref, "--dir", dist); r.code != 2 || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("publish again: %d\n%s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "install", ref, "--version", "^1.4"); r.code != 0 || !strings.Contains(r.stdout, "installed acme 1.4.0") {
		t.Fatalf("install from the registry: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "verify"); r.code != 0 {
		t.Fatalf("verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// Newer versions appear in the registry: versions lists them, outdated
	// compares, upgrade installs the newest the constraint allows.
	writeConfigFile(t, home, "plugins:\n  acme:\n    enabled: true\n    version: \"^1\"\n")
	// From 1.5.0 on, acme asks for the clusters' kubeconfigs: upgrading
	// to it needs the user's grant.
	src := filepath.Join(dir, "plugin.go")
	code, err := os.ReadFile(src)
	if err != nil || !strings.Contains(string(code), "Outputs:     []string{\"greeting\"},") {
		t.Fatalf("scaffold's plugin.go: %v\n%s", err, code)
	}
	code = []byte(strings.Replace(string(code), "Outputs:     []string{\"greeting\"},", "Outputs:     []string{\"greeting\"},\n\t\tCapabilities: []string{sdk.CapKubeconfig},", 1))
	if err := os.WriteFile(src, code, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.5.0", "2.0.0"} {
		d := filepath.Join(t.TempDir(), "dist")
		if r := marina(t, home, nil, "plugin", "package", dir, "--version", v, "--platform", runtime.GOOS+"/"+runtime.GOARCH, "--out", d); r.code != 0 {
			t.Fatalf("package %s: %d %s", v, r.code, r.stderr)
		}
		if r := marina(t, home, nil, "plugin", "publish", ref, "--dir", d); r.code != 0 {
			t.Fatalf("publish %s: %d %s", v, r.code, r.stderr)
		}
	}
	r := marina(t, home, nil, "plugin", "versions", "acme", "-o", "json")
	var vs []pluginstore.RemoteVersion
	if err := json.Unmarshal([]byte(r.stdout), &vs); err != nil || r.code != 0 {
		t.Fatalf("versions: %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if len(vs) != 3 || vs[0].Version != "2.0.0" || vs[2].Version != "1.4.0" || !vs[0].Runnable || vs[0].Protocol != "1.0" {
		t.Fatalf("versions = %+v", vs)
	}
	// What each version declares travels from package to the registry.
	if strings.Join(vs[1].Capabilities, ",") != "kubeconfig" || vs[2].Capabilities == nil || len(vs[2].Capabilities) != 0 {
		t.Fatalf("versions' capabilities: 1.5.0 %v, 1.4.0 %#v; want [kubeconfig] and []", vs[1].Capabilities, vs[2].Capabilities)
	}
	r = marina(t, home, nil, "plugin", "outdated", "-o", "json")
	var rows []outdatedRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || r.code != 0 {
		t.Fatalf("outdated: %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if len(rows) != 1 || rows[0].Installed != "1.4.0" || rows[0].Wanted != "1.5.0" || rows[0].Latest != "2.0.0" || rows[0].Source != ref {
		t.Fatalf("outdated = %+v", rows)
	}
	if r := marina(t, home, nil, "plugin", "upgrade"); r.code != 2 || !strings.Contains(r.stderr, "plugin acme 1.5.0 asks for capabilities kubeconfig: pass --yes to grant them (nothing was installed)") ||
		!strings.Contains(r.stderr, "kubeconfig            every cluster's admin kubeconfig") {
		t.Fatalf("upgrade to a version asking for more, without a terminal or --yes: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 1 {
		t.Fatalf("an upgrade not granted installed something: %+v", got)
	}
	if r := marina(t, home, nil, "plugin", "upgrade", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "acme 1.4.0 -> 1.5.0 (granted now: kubeconfig)") {
		t.Fatalf("upgrade: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 2 || got[1].Version != "1.5.0" || got[1].Status != "active" {
		t.Fatalf("after upgrade: %+v", got)
	}
	// One spelling of the source, however each version was installed
	// (by constraint, by upgrade with a tag): the repository.
	if got := rowsFor(listPlugins(t, home), "acme"); got[0].Source != ref || got[1].Source != ref {
		t.Fatalf("sources after install and upgrade: %q, %q; want both %q", got[0].Source, got[1].Source, ref)
	}
	lock, err := os.ReadFile(filepath.Join(home, ".marina", "plugins.lock"))
	if err != nil || !strings.Contains(string(lock), `"version": "1.5.0"`) || !strings.Contains(string(lock), `"source": "`+ref+`"`) {
		t.Fatalf("lock after upgrade: %v\n%s", err, lock)
	}
	if r := marina(t, home, nil, "plugin", "upgrade", "acme"); r.code != 0 || !strings.Contains(r.stdout, "up to date") {
		t.Fatalf("upgrade again: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "versions", "nosuch"); r.code != 2 || !strings.Contains(r.stderr, "marina plugin versions oci://") {
		t.Fatalf("versions of an unknown plugin: %d\n%s", r.code, r.stderr)
	}

	// Discovery through pluginSources: search lists what the namespace
	// offers; install NAME@CONSTRAINT finds it there.
	if r := marina(t, home, nil, "plugin", "search"); r.code != 2 || !strings.Contains(r.stderr, "no pluginSources in the config") {
		t.Fatalf("search without sources: %d\n%s", r.code, r.stderr)
	}
	writeConfigFile(t, home, "pluginSources: [\"oci://"+hostport+"/team\"]\nplugins:\n  acme:\n    enabled: true\n    version: \"^1\"\n")
	r = marina(t, home, nil, "plugin", "search", "ACME", "-o", "json")
	var found []pluginstore.Found
	if err := json.Unmarshal([]byte(r.stdout), &found); err != nil || r.code != 0 {
		t.Fatalf("search: %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if len(found) != 1 || found[0].Name != "acme" || found[0].Latest != "2.0.0" || found[0].Versions != 3 || found[0].Description != "The acme marina plugin." || found[0].Source != ref {
		t.Fatalf("search = %+v", found)
	}
	if r := marina(t, home, nil, "plugin", "search", "nothing-like-this"); r.code != 0 || !strings.Contains(r.stdout, "no plugin matches") {
		t.Fatalf("search for nothing: %d\n%s", r.code, r.stdout)
	}
	// The config enables acme already: install says which version runs,
	// not how to enable it.
	if r := marina(t, home, nil, "plugin", "install", "acme@~1.4.0"); r.code != 0 || !strings.Contains(r.stdout, "installed acme 1.4.0") || !strings.Contains(r.stderr, "acme is "+ref) ||
		strings.Contains(r.stdout, "enable it with") || !strings.Contains(r.stdout, "plugin acme is enabled in the config: version 1.5.0 runs (plugins.acme.version: ^1)") {
		t.Fatalf("install acme@~1.4.0: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "install", "nosuch@1"); r.code != 2 || !strings.Contains(r.stderr, "no plugin nosuch in pluginSources") {
		t.Fatalf("install an unknown name: %d\n%s", r.code, r.stderr)
	}

	// Before any install, versions finds NAME through pluginSources too,
	// as search and install NAME do.
	fresh := t.TempDir()
	writeConfigFile(t, fresh, "pluginSources: [\"oci://"+hostport+"/team\"]\n")
	r = marina(t, fresh, nil, "plugin", "versions", "acme", "-o", "json")
	vs = nil
	if err := json.Unmarshal([]byte(r.stdout), &vs); err != nil || r.code != 0 || len(vs) != 3 || vs[0].Version != "2.0.0" {
		t.Fatalf("versions before any install: %d %v %+v\n%s", r.code, err, vs, r.stderr)
	}
	if r := marina(t, fresh, nil, "plugin", "versions", "nosuch"); r.code != 2 || !strings.Contains(r.stderr, "nor in pluginSources") {
		t.Fatalf("versions of a name no source has: %d\n%s", r.code, r.stderr)
	}
}

// TestPluginSigning (tier 2): keygen → package --sign → install (from the
// archive and, through publish, from the real registry) with
// pluginTrust.policy enforce: signed by a trusted key installs and says so;
// unsigned, signed by an untrusted key or with an altered signature is
// refused with the fix; under warn they install with a warning; an enforce
// policy set after install makes list and verify flag the unsigned one.
func TestPluginSigning(t *testing.T) {
	hostport := dockertest.Registry(t)
	home := t.TempDir()
	work := t.TempDir()
	key := filepath.Join(work, "team.key")
	r := marina(t, home, nil, "plugin", "keygen", "--out", key, "--name", "team")
	if r.code != 0 || !strings.Contains(r.stdout, "publicKey: marina-ed25519-pub:") {
		t.Fatalf("keygen: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", err, st)
	}
	if r := marina(t, home, nil, "plugin", "keygen", "--out", key); r.code != 2 || !strings.Contains(r.stderr, "never overwritten") {
		t.Fatalf("keygen over a key: %d %s", r.code, r.stderr)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(work, "other.key")
	if r := marina(t, home, nil, "plugin", "keygen", "--out", other); r.code != 0 {
		t.Fatal(r.stderr)
	}

	dir := scaffoldAcme(t, home, work)
	host := runtime.GOOS + "/" + runtime.GOARCH
	pack := func(version, signWith string) string {
		t.Helper()
		d := filepath.Join(work, "dist-"+version)
		args := []string{"plugin", "package", dir, "--version", version, "--platform", host, "--out", d}
		if signWith != "" {
			args = append(args, "--sign", signWith)
		}
		if r := marina(t, home, nil, args...); r.code != 0 {
			t.Fatalf("package %s: %d %s", version, r.code, r.stderr)
		}
		return d
	}
	archive := func(d, version string) string {
		return filepath.Join(d, "marina-plugin-acme_"+version+"_"+strings.Replace(host, "/", "_", 1)+".tar.gz")
	}
	signed := pack("1.0.0", key)
	unsigned := pack("1.1.0", "")
	byOther := pack("1.2.0", other)
	if _, err := os.Stat(archive(signed, "1.0.0") + ".sig"); err != nil {
		t.Fatalf("no signature beside the archive: %v", err)
	}
	policy := func(p string) {
		writeConfigFile(t, home, "pluginSources: [\"oci://"+hostport+"/team\"]\npluginTrust:\n  policy: "+p+"\n  keys:\n  - name: team\n    publicKey: "+strings.TrimSpace(string(pub))+
			"\n    sources: [\""+work+"/\", \"oci://"+hostport+"/team/\"]\n")
	}
	policy("enforce")

	if r := marina(t, home, nil, "plugin", "install", archive(signed, "1.0.0")); r.code != 0 || !strings.Contains(r.stdout, "signed by team") {
		t.Fatalf("signed install: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct{ src, want string }{
		{archive(unsigned, "1.1.0"), "is unsigned (no signature), and pluginTrust.policy is enforce"},
		{archive(byOther, "1.2.0"), "is untrusted (key"},
	} {
		if r := marina(t, home, nil, "plugin", "install", tc.src); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("install %s under enforce: %d\n%s", filepath.Base(tc.src), r.code, r.stderr)
		}
	}
	// A signature moved onto another archive does not verify.
	sig, _ := os.ReadFile(archive(signed, "1.0.0") + ".sig")
	if err := os.WriteFile(archive(unsigned, "1.1.0")+".sig", sig, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := marina(t, home, nil, "plugin", "install", archive(unsigned, "1.1.0")); r.code == 0 || !strings.Contains(r.stderr, "is invalid (the signature is for sha256:") {
		t.Errorf("install with another archive's signature: %d\n%s", r.code, r.stderr)
	}
	os.Remove(archive(unsigned, "1.1.0") + ".sig")

	// Through the registry: the signature travels as a manifest annotation.
	ref := "oci://" + hostport + "/team/acme"
	if r := marina(t, home, nil, "plugin", "publish", ref, "--dir", signed, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"signed": true`) {
		t.Fatalf("publish signed: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "publish", ref, "--dir", unsigned); r.code != 0 || !strings.Contains(r.stdout, "not signed") {
		t.Fatalf("publish unsigned: %d %s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "remove", "acme"); r.code != 0 {
		t.Fatalf("remove: %d %s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "install", ref+":1.0.0"); r.code != 0 || !strings.Contains(r.stdout, "signed by team") {
		t.Fatalf("signed install from the registry: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "plugin", "install", ref+":1.1.0"); r.code == 0 || !strings.Contains(r.stderr, "unsigned") {
		t.Errorf("unsigned install from the registry under enforce: %d\n%s", r.code, r.stderr)
	}
	// versions shows each version's signature before anything is downloaded.
	r = marina(t, home, nil, "plugin", "versions", ref, "-o", "json")
	var vs []pluginstore.RemoteVersion
	if err := json.Unmarshal([]byte(r.stdout), &vs); err != nil || r.code != 0 || len(vs) != 2 ||
		vs[0].Version != "1.1.0" || !strings.HasPrefix(vs[0].Signature, "unsigned") || vs[1].Signature != "signed by team" {
		t.Errorf("versions: %d %v %+v\n%s", r.code, err, vs, r.stderr)
	}
	// Discovery takes install's trust decision: under enforce the unsigned
	// 1.1.0 does not run here, and search's LATEST is the signed 1.0.0.
	if len(vs) == 2 && (vs[0].Runnable || !strings.Contains(vs[0].Why, "refused by pluginTrust: unsigned") || !vs[1].Runnable) {
		t.Errorf("versions under enforce: %+v", vs)
	}
	r = marina(t, home, nil, "plugin", "search", "acme", "-o", "json")
	var found []pluginstore.Found
	if err := json.Unmarshal([]byte(r.stdout), &found); err != nil || r.code != 0 || len(found) != 1 || found[0].Latest != "1.0.0" {
		t.Errorf("search under enforce: %d %v %+v\n%s", r.code, err, found, r.stderr)
	}
	// upgrade takes the same decision: with acme enabled at ^1, the
	// unsigned 1.1.0 is not what it installs; 1.0.0 is up to date.
	policy("enforce")
	cfg := filepath.Join(home, ".marina", "config.yaml")
	withPlugin, _ := os.ReadFile(cfg)
	writeConfigFile(t, home, string(withPlugin)+"plugins:\n  acme:\n    enabled: true\n    version: \"^1\"\n")
	if r := marina(t, home, nil, "plugin", "upgrade", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "acme 1.0.0: up to date") {
		t.Errorf("upgrade under enforce with a newer unsigned version: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := rowsFor(listPlugins(t, home), "acme"); len(got) != 1 || got[0].Version != "1.0.0" {
		t.Errorf("after upgrade under enforce: %+v", got)
	}
	policy("enforce")

	// Under warn the unsigned build installs, with a warning; back under
	// enforce, list and verify flag it and a run would refuse it.
	policy("warn")
	if r := marina(t, home, nil, "plugin", "install", ref+":1.1.0"); r.code != 0 || !strings.Contains(r.stderr, "Warning: plugin acme 1.1.0 is unsigned") {
		t.Fatalf("unsigned install under warn: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	policy("enforce")
	r = marina(t, home, nil, "plugin", "list", "-o", "json")
	var all []pluginset.Row
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 1 {
		t.Fatalf("list under enforce with an unsigned build: exit %d (want 1) %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	rows := rowsFor(all, "acme")
	if len(rows) != 2 || rows[0].Signature != "signed by team" || !strings.HasPrefix(rows[1].Signature, "unsigned") ||
		!strings.Contains(rows[1].Detail, "pluginTrust.policy is enforce") {
		t.Fatalf("list: %+v", rows)
	}
	// Intact but refused by the policy: UNTRUSTED with the rule, not MODIFIED.
	if r := marina(t, home, nil, "plugin", "verify"); r.code == 0 || !strings.Contains(r.stdout, "UNTRUSTED acme 1.1.0") ||
		!strings.Contains(r.stdout, "unsigned") || !strings.Contains(r.stdout, "pluginTrust") || strings.Contains(r.stdout, "MODIFIED") {
		t.Errorf("verify under enforce with an unsigned build: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "config", "validate", "--set", "pluginTrust.policy=enforced"); r.code != 2 || !strings.Contains(r.stderr, "pluginTrust.policy") {
		t.Errorf("a bad policy: %d\n%s", r.code, r.stderr)
	}
}

// scaffoldAcme writes the scaffold of plugin acme under parent with this
// development build's SDK (no flags) and runs go mod tidy in it.
func scaffoldAcme(t *testing.T, home, parent string) string {
	t.Helper()
	dir := filepath.Join(parent, "marina-plugin-acme")
	if r := marina(t, home, nil, "plugin", "new", "acme", "--dir", dir); r.code != 0 {
		t.Fatalf("plugin new: %d %s", r.code, r.stderr)
	}
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = dir
	tidy.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	return dir
}

// TestPluginPackageProgress: plugin package builds the platforms side by
// side (--jobs) and shows each build's start and end. On a terminal, a
// line per finished platform under a live line naming those building;
// otherwise plain lines ("building linux/arm64 …", "built linux/arm64 in
// 41s (24.8 MB)"). The archives are listed sorted by platform. A platform
// that fails to build is named with the compiler's output, and --out is
// left as it was.
func TestPluginPackageProgress(t *testing.T) {
	t.Run("terminal", func(t *testing.T) {
		t.Setenv("NO_COLOR", "1")
		var b strings.Builder
		p := newPackageProgress(&b, true)
		p.tick = time.Hour // no spinner frame between the events
		amd, arm := pluginstore.Platform{OS: "linux", Arch: "amd64"}, pluginstore.Platform{OS: "linux", Arch: "arm64"}
		mac, intel := pluginstore.Platform{OS: "darwin", Arch: "arm64"}, pluginstore.Platform{OS: "darwin", Arch: "amd64"}
		ev := func(pl pluginstore.Platform, ph pluginstore.PackagePhase, d time.Duration, size int64) pluginstore.PackageEvent {
			return pluginstore.PackageEvent{Platform: pl, Phase: ph, Total: 4, Elapsed: d, Size: size}
		}
		for _, e := range []pluginstore.PackageEvent{
			ev(amd, pluginstore.PackageBuilding, 0, 0),
			ev(arm, pluginstore.PackageBuilding, 0, 0),
			ev(amd, pluginstore.PackageBuilt, 12300*time.Millisecond, 24_800_000),
			ev(mac, pluginstore.PackageBuilding, 0, 0),
			ev(arm, pluginstore.PackageFailed, 3100*time.Millisecond, 0),
			ev(mac, pluginstore.PackageCancelled, 3200*time.Millisecond, 0),
			ev(intel, pluginstore.PackageNotRun, 0, 0),
		} {
			p.handle(e)
		}
		p.close()
		p.close()
		const erase = "\r\x1b[2K"
		out := b.String()
		for _, want := range []string{
			erase + "⠋ Building linux/amd64 (0/4 done)",
			erase + "⠋ Building linux/amd64, linux/arm64 (0/4 done)",
			erase + "✓ Build linux/amd64 (12.3s, 24.8 MB)\n" + erase + "⠋ Building linux/arm64 (1/4 done)",
			erase + "⠋ Building linux/arm64, darwin/arm64 (1/4 done)",
			erase + "✗ Build linux/arm64 (3.1s)\n" + erase + "⠋ Building darwin/arm64 (2/4 done)",
			erase + "✗ Build darwin/arm64 (cancelled after 3.2s)\n",
			erase + "- Build darwin/amd64 (not run)\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in\n%q", want, out)
			}
		}
		if strings.Contains(out, "\x1b[3") || !strings.HasSuffix(out, "(not run)\n") {
			t.Errorf("colours under NO_COLOR, or a live line left after the last build:\n%q", out)
		}
	})

	t.Run("plain", func(t *testing.T) {
		home := t.TempDir()
		dir := scaffoldAcme(t, home, t.TempDir())
		// The Go caches of this test run, not a cold pair in the fresh HOME.
		var env []string
		for _, name := range []string{"GOCACHE", "GOMODCACHE"} {
			v, err := exec.Command("go", "env", name).Output()
			if err != nil {
				t.Fatal(err)
			}
			env = append(env, name+"="+strings.TrimSpace(string(v)))
		}
		other := map[bool]string{true: "amd64", false: "arm64"}[runtime.GOARCH == "arm64"]
		host, cross := runtime.GOOS+"/"+runtime.GOARCH, "linux/"+other
		out := filepath.Join(t.TempDir(), "dist")

		if r := marina(t, home, env, "plugin", "package", dir, "--jobs", "0"); r.code != 2 || !strings.Contains(r.stderr, "--jobs 0: give at least 1") {
			t.Errorf("--jobs 0: exit %d\n%s", r.code, r.stderr)
		}
		if r := marina(t, home, env, "plugin", "package", dir, "--progress", "json"); r.code != 2 || !strings.Contains(r.stderr, `--progress "json": use auto`) {
			t.Errorf("--progress json: exit %d\n%s", r.code, r.stderr)
		}

		r := marina(t, home, env, "plugin", "package", dir, "--version", "2.0.0", "--platform", cross+","+host, "--jobs", "2", "--out", out)
		if r.code != 0 {
			t.Fatalf("plugin package: %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "plugin package: "))
		}
		firstBuilt := len(lines)
		for _, pl := range []string{host, cross} {
			building := slices.Index(lines, "building "+pl+" …")
			built := slices.IndexFunc(lines, regexp.MustCompile(`^built `+regexp.QuoteMeta(pl)+` in ([0-9.]+(ms|s)|[0-9]+m[0-9]+s) \([0-9.]+ MB\)$`).MatchString)
			if building < 0 || built < building {
				t.Errorf("%s: no `building` line, or no `built in (MB)` line after it:\n%s", pl, r.stderr)
			}
			firstBuilt = min(firstBuilt, built)
		}
		// Side by side: both started before either ended.
		if runtime.NumCPU() >= 2 && (slices.Index(lines, "building "+host+" …") > firstBuilt || slices.Index(lines, "building "+cross+" …") > firstBuilt) {
			t.Errorf("--jobs 2 built one platform after the other:\n%s", r.stderr)
		}
		var listed []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 2 && strings.HasSuffix(f[1], ".tar.gz") {
				listed = append(listed, f[0])
			}
		}
		want := []string{host, cross}
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("archives listed %v, want %v (sorted by platform):\n%s", listed, want, r.stdout)
		}

		// One platform does not compile: it is named with the compiler's
		// output, and the archives of the last run stay as they were.
		dirDigest := func() map[string]string {
			t.Helper()
			entries, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(out, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				m[e.Name()] = fmt.Sprintf("%x", sha256.Sum256(data))
			}
			return m
		}
		before := dirDigest()
		if err := os.WriteFile(filepath.Join(dir, "broken_"+other+".go"), []byte("package main\n\nvar _ = nosuchIdentifier\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r = marina(t, home, env, "plugin", "package", dir, "--version", "2.0.1", "--platform", host+","+cross, "--jobs", "2", "--out", out)
		if r.code != 1 || !strings.Contains(r.stderr, "go build for "+cross) || !strings.Contains(r.stderr, "undefined: nosuchIdentifier") ||
			!strings.Contains(r.stderr, "plugin package: "+cross+" FAILED after ") {
			t.Errorf("a platform that does not compile: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if after := dirDigest(); !maps.Equal(before, after) {
			t.Errorf("--out changed by a failed run:\nbefore %v\nafter  %v", before, after)
		}
	})
}
