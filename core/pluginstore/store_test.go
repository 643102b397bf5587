package pluginstore

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/sdk"
)

var host = HostPlatform()

func TestInstallLocalBinary(t *testing.T) {
	s := newStore(t)
	c := &counting{next: describeReal}
	s.describe = c.describe
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Now = func() time.Time { return fixed }

	inst := mustInstall(t, s, bins.v120, InstallOptions{})
	wantPath := filepath.Join(s.Root(), "acme", "1.2.0", host.OS+"_"+host.Arch, "marina-plugin-acme")
	got := struct {
		Name, Version, Platform, Path, SHA256, Source, SourceDigest, Protocol string
		Hooks                                                                 []sdk.Hook
		Insecure                                                              bool
		At                                                                    time.Time
	}{inst.Name, inst.Version, inst.Platform, inst.Path, inst.SHA256, inst.Source, inst.SourceDigest, inst.Description.Protocol, inst.Description.Hooks, inst.InsecureSkipChecksum, inst.InstalledAt}
	want := got
	want.Name, want.Version, want.Platform, want.Path = "acme", "1.2.0", host.String(), wantPath
	want.SHA256, want.Source, want.SourceDigest = sha(t, bins.v120), bins.v120, "sha256:"+sha(t, bins.v120)
	want.Protocol, want.Hooks, want.Insecure, want.At = "1.0", []sdk.Hook{sdk.PostCluster}, false, fixed
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("installed:\n got %+v\nwant %+v", got, want)
	}
	st, err := os.Stat(wantPath)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("binary %s: %v, mode %v; want 0755", wantPath, err, st.Mode())
	}
	if sha(t, wantPath) != sha(t, bins.v120) {
		t.Fatal("installed binary differs from the source")
	}
	if c.n.Load() != 1 {
		t.Fatalf("describer launched %d times during install, want 1", c.n.Load())
	}

	// The manifest on disk is what List reads; listing launches nothing.
	var m map[string]any
	data, err := os.ReadFile(filepath.Join(filepath.Dir(wantPath), ManifestFile))
	if err != nil || json.Unmarshal(data, &m) != nil {
		t.Fatalf("manifest: %v", err)
	}
	if m["sha256"] != inst.SHA256 || m["source"] != bins.v120 || m["schema"] != float64(1) {
		t.Fatalf("manifest.json = %s", data)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].SHA256 != inst.SHA256 || list[0].Description.Name != "acme" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if c.n.Load() != 1 {
		t.Fatalf("List launched the plugin (describer calls %d)", c.n.Load())
	}

	// Installing the same build again is a no-op (same install time).
	s.Now = func() time.Time { return fixed.Add(time.Hour) }
	again := mustInstall(t, s, bins.v120, InstallOptions{SHA256: "SHA256:" + strings.ToUpper(inst.SHA256)})
	if !again.InstalledAt.Equal(fixed) {
		t.Fatalf("reinstall changed the install (installedAt %v)", again.InstalledAt)
	}
	assertNoLeftovers(t, s.Root())
}

func TestInstallSourceChecks(t *testing.T) {
	dir := t.TempDir()
	html := filepath.Join(dir, "release.html")
	os.WriteFile(html, []byte("<!DOCTYPE html>\n<html><body>Release v1.2.0</body></html>"), 0o644)
	zip := filepath.Join(dir, "acme.zip")
	os.WriteFile(zip, []byte("PK\x03\x04rest-of-zip"), 0o644)
	script := filepath.Join(dir, "marina-plugin-sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho not a plugin >&2\nexit 3\n"), 0o755)

	tests := []struct {
		name      string
		src       string
		opts      InstallOptions
		kind      error
		fragments []string
	}{
		{"html file", html, InstallOptions{}, ErrNotPlugin, []string{html + " is an HTML page, not a plugin binary"}},
		{"zip file", zip, InstallOptions{}, ErrNotPlugin, []string{"a zip archive"}},
		{"not a marina plugin", script, InstallOptions{}, ErrNotPlugin, []string{"did not describe itself", "built with the marina SDK"}},
		{"wrong checksum", bins.v120, InstallOptions{SHA256: strings.Repeat("ab", 32)}, ErrChecksum, []string{"checksum mismatch for " + bins.v120, "expected abab"}},
		{"bad checksum syntax", bins.v120, InstallOptions{SHA256: "xyz"}, ErrInvalid, []string{"--sha256 \"xyz\""}},
		{"version constraint", bins.v120, InstallOptions{Version: "^2"}, ErrNoMatch, []string{"plugin acme 1.2.0", "does not satisfy --version \"^2\""}},
		{"missing source", filepath.Join(dir, "nope"), InstallOptions{}, ErrSourceNotFound, []string{"does not exist"}},
		{"plain http", "http://127.0.0.1:1/acme", InstallOptions{}, ErrInvalid, []string{"plain http"}},
		{"wrong arch", bins.other, InstallOptions{}, ErrPlatform, []string{
			fmt.Sprintf("is built for %s/%s, this machine is %s", host.OS, otherArch, host)}},
		{"wrong target", bins.v120, InstallOptions{Platform: host.OS + "/" + otherArch}, ErrPlatform, []string{
			fmt.Sprintf("is built for %s, the install targets %s/%s", host, host.OS, otherArch)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Install(testCtx(t), tt.src, tt.opts)
			wantErr(t, err, tt.kind, tt.fragments...)
			if list, _ := s.List(); len(list) != 0 {
				t.Fatalf("a refused install left %+v", list)
			}
			assertNoLeftovers(t, s.Root())
		})
	}
}

func TestInstallRefusesProtocolAtInstall(t *testing.T) {
	dir := t.TempDir()
	s := Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "lock"), fixedDescriber(sdk.Description{
		Name: "acme", Version: "2.0.0", Protocol: "2.1", Hooks: []sdk.Hook{sdk.PostCluster},
	}))
	_, err := s.Install(testCtx(t), bins.v200, InstallOptions{})
	wantErr(t, err, ErrProtocol, "plugin acme 2.0.0 speaks protocol 2.1; this marina speaks protocol 1.0 — it needs a marina release that speaks protocol 2.x")
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("refused plugin was installed: %+v", list)
	}
	assertNoLeftovers(t, s.Root())
}

func TestCheckProtocol(t *testing.T) {
	hostP := fmt.Sprintf("%d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor)
	tests := []struct {
		protocol string
		ok       bool
		fragment string
	}{
		{hostP, true, ""},
		{fmt.Sprintf("%d.0", sdk.ProtocolMajor), true, ""},
		{fmt.Sprintf("%d.%d", sdk.ProtocolMajor, sdk.ProtocolMinor+1), false, fmt.Sprintf("needs a marina release that speaks protocol %d.%d or later", sdk.ProtocolMajor, sdk.ProtocolMinor+1)},
		{fmt.Sprintf("%d.0", sdk.ProtocolMajor+1), false, fmt.Sprintf("needs a marina release that speaks protocol %d.x", sdk.ProtocolMajor+1)},
		{fmt.Sprintf("%d.3", sdk.ProtocolMajor-1), false, fmt.Sprintf("needs an older marina release that speaks protocol %d.x", sdk.ProtocolMajor-1)},
		{"1", false, "not MAJOR.MINOR"},
		{"", false, "not MAJOR.MINOR"},
		{"v1.0", false, "not MAJOR.MINOR"},
	}
	for _, tt := range tests {
		err := checkProtocol("plugin x 1.0.0", tt.protocol)
		if tt.ok {
			if err != nil {
				t.Errorf("checkProtocol(%q) = %v, want nil", tt.protocol, err)
			}
			continue
		}
		wantErr(t, err, ErrProtocol, "plugin x 1.0.0", "this marina speaks protocol "+hostP, tt.fragment)
	}
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, data, link string
	mode             int64
	typ              byte
}

func writeTarGz(t *testing.T, path string, entries []tarEntry) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, _ := gzip.NewWriterLevel(f, gzip.NoCompression) // stored blocks: fast under -race, still real gzip
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Mode: mode, Size: int64(len(e.data)), Typeflag: typ, Linkname: e.link}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInstallDirectoryAndArchive(t *testing.T) {
	bin := readString(t, bins.v120)
	other := readString(t, bins.other)
	manifest := func(fields string) string { return `{"name":"acme","version":"1.2.0"` + fields + `}` }

	tests := []struct {
		name    string
		archive bool // else a directory
		entries []tarEntry
		// wantErr is empty for a successful install.
		kind      error
		fragments []string
	}{
		{name: "dir with manifest", entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(`,"protocol":"1.0","binary":"bin/marina-plugin-acme"`)},
			{name: "bin/marina-plugin-acme", data: bin, mode: 0o755}}},
		{name: "dir without manifest", entries: []tarEntry{
			{name: "README.md", data: "hi"}, {name: "marina-plugin-acme", data: bin, mode: 0o755}}},
		{name: "tar.gz with top dir", archive: true, entries: []tarEntry{
			{name: "acme_1.2.0/", typ: tar.TypeDir},
			{name: "acme_1.2.0/marina-plugin.json", data: manifest("")},
			{name: "acme_1.2.0/marina-plugin-acme", data: bin, mode: 0o755},
			{name: "acme_1.2.0/LICENSE", data: "MIT"}}},
		{name: "tar.gz with binaries per platform", archive: true, entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(fmt.Sprintf(`,"binaries":{"%s":"a/marina-plugin-acme","%s/%s":"b/marina-plugin-acme"}`, host, host.OS, otherArch))},
			{name: "a/marina-plugin-acme", data: bin, mode: 0o755},
			{name: "b/marina-plugin-acme", data: other, mode: 0o755}}},
		{name: "manifest disagrees with binary", archive: true, entries: []tarEntry{
			{name: "marina-plugin.json", data: `{"name":"acme","version":"1.3.0"}`},
			{name: "marina-plugin-acme", data: bin}},
			kind: ErrInvalid, fragments: []string{"says acme 1.3.0, but the binary describes itself as acme 1.2.0"}},
		{name: "manifest protocol disagrees", entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(`,"protocol":"1.7"`)},
			{name: "marina-plugin-acme", data: bin}},
			kind: ErrInvalid, fragments: []string{"says protocol 1.7, but plugin acme 1.2.0 speaks protocol 1.0"}},
		{name: "manifest capabilities disagree", entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(`,"capabilities":["docker"]`)},
			{name: "marina-plugin-acme", data: bin}},
			kind: ErrInvalid, fragments: []string{"lists capabilities [docker], but plugin acme 1.2.0 declares []"}},
		{name: "not published for this platform", archive: true, entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(`,"platforms":["plan9/amd64"]`)},
			{name: "marina-plugin-acme", data: bin}},
			kind: ErrPlatform, fragments: []string{"is published for plan9/amd64", "not for " + host.String()}},
		{name: "manifest typo", entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(`,"binnary":"x"`)}, {name: "marina-plugin-acme", data: bin}},
			kind: ErrInvalid, fragments: []string{`unknown field "binnary"`}},
		{name: "binary escapes", entries: []tarEntry{
			{name: "marina-plugin.json", data: manifest(`,"binary":"../marina-plugin-acme"`)}},
			kind: ErrInvalid, fragments: []string{"must be a relative path inside the directory"}},
		{name: "two candidate binaries", entries: []tarEntry{
			{name: "marina-plugin-acme", data: bin}, {name: "marina-plugin-other", data: bin}},
			kind: ErrInvalid, fragments: []string{"not exactly one marina-plugin-* file (found marina-plugin-acme, marina-plugin-other)"}},
		{name: "archive path traversal", archive: true, entries: []tarEntry{
			{name: "../../evil", data: "x"}},
			kind: ErrInvalid, fragments: []string{`entry "../../evil" escapes the archive`}},
		{name: "archive symlink", archive: true, entries: []tarEntry{
			{name: "marina-plugin-acme", typ: tar.TypeSymlink, link: "/bin/sh"}},
			kind: ErrInvalid, fragments: []string{"is a link"}},
		{name: "archive of an html page", archive: true, entries: []tarEntry{
			{name: "marina-plugin-acme", data: "<html><body>404</body></html>"}},
			kind: ErrNotPlugin, fragments: []string{"is an HTML page, not an executable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			src := filepath.Join(t.TempDir(), "src")
			if tt.archive {
				src += ".tar.gz"
				writeTarGz(t, src, tt.entries)
			} else {
				for _, e := range tt.entries {
					if e.typ == tar.TypeDir {
						continue
					}
					mode := os.FileMode(e.mode)
					if mode == 0 {
						mode = 0o644
					}
					p := filepath.Join(src, e.name)
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.WriteFile(p, []byte(e.data), mode); err != nil {
						t.Fatal(err)
					}
				}
			}
			inst, err := s.Install(testCtx(t), src, InstallOptions{})
			if tt.kind != nil {
				wantErr(t, err, tt.kind, tt.fragments...)
				assertNoLeftovers(t, s.Root())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inst.Name != "acme" || inst.Version != "1.2.0" || inst.SHA256 != sha(t, bins.v120) || sha(t, inst.Path) != inst.SHA256 {
				t.Fatalf("installed %+v", inst)
			}
			if tt.archive && inst.SourceDigest != "sha256:"+sha(t, src) {
				t.Fatalf("SourceDigest = %s, want the archive's digest", inst.SourceDigest)
			}
			assertNoLeftovers(t, s.Root())
		})
	}
}

func TestResolve(t *testing.T) {
	s := newStore(t)
	mustInstall(t, s, bins.v120, InstallOptions{})
	mustInstall(t, s, bins.v130, InstallOptions{})
	tests := []struct {
		constraint string
		want       string
		kind       error
		fragments  []string
	}{
		{constraint: "^1.2", want: "1.3.0"},
		{constraint: "~1.2.0", want: "1.2.0"},
		{constraint: "", want: "1.3.0"},
		{constraint: "1.2.0", want: "1.2.0"},
		{constraint: "<1.3", want: "1.2.0"},
		{constraint: ">=2", kind: ErrNoMatch, fragments: []string{
			`no installed version of plugin acme matches ">=2"`, `1.2.0 ("1.2.0" is less than "2")`, `1.3.0 ("1.3.0" is less than "2")`, "--version '>=2'"}},
		{constraint: "not a constraint", kind: ErrInvalid, fragments: []string{`version constraint "not a constraint" is invalid`}},
	}
	for _, tt := range tests {
		t.Run(tt.constraint, func(t *testing.T) {
			got, err := s.Resolve("acme", tt.constraint)
			if tt.kind != nil {
				wantErr(t, err, tt.kind, tt.fragments...)
				return
			}
			if err != nil || got.Version != tt.want {
				t.Fatalf("Resolve(%q) = %+v, %v; want %s", tt.constraint, got, err, tt.want)
			}
		})
	}
	_, err := s.Resolve("other", "^1")
	wantErr(t, err, ErrNotInstalled, "plugin other is not installed")
}

func TestLockPinAndVerify(t *testing.T) {
	s := newStore(t)
	mustInstall(t, s, bins.v120, InstallOptions{})
	mustInstall(t, s, bins.v130, InstallOptions{})
	inst, err := s.Resolve("acme", "^1.2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(inst, "^1.2"); err != nil {
		t.Fatal(err)
	}

	// The lock file on disk records version, constraint, sha256, source, protocol.
	var onDisk struct {
		Version int
		Plugins map[string]struct {
			Version, Constraint, Source, Protocol string
			SHA256                                map[string]string
		}
	}
	if err := json.Unmarshal([]byte(readString(t, s.LockPath())), &onDisk); err != nil {
		t.Fatal(err)
	}
	e := onDisk.Plugins["acme"]
	if onDisk.Version != 1 || e.Version != "1.3.0" || e.Constraint != "^1.2" || e.Source != bins.v130 || e.Protocol != "1.0" ||
		e.SHA256[host.String()] != sha(t, bins.v130) || len(e.SHA256) != 1 {
		t.Fatalf("lock file = %s", readString(t, s.LockPath()))
	}
	if err := s.Verify(inst); err != nil {
		t.Fatalf("Verify of an intact install: %v", err)
	}

	// Flip one byte of the installed binary: the next launch is refused.
	data, _ := os.ReadFile(inst.Path)
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(inst.Path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	err = s.Verify(inst)
	wantErr(t, err, ErrModified, fmt.Sprintf("plugin acme 1.3.0: binary %s was modified after install (sha256 ", inst.Path),
		", expected "+sha(t, bins.v130)[:12]+"…)", "reinstall it with `marina plugin install "+bins.v130+"`")
	results, err := s.VerifyAll()
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]error{}
	for _, r := range results {
		status[r.Installed.Version] = r.Err
		if r.Pinned != (r.Installed.Version == "1.3.0") {
			t.Errorf("VerifyAll: %s pinned=%v", r.Installed.Version, r.Pinned)
		}
	}
	if len(results) != 2 || status["1.2.0"] != nil || !errors.Is(status["1.3.0"], ErrModified) {
		t.Fatalf("VerifyAll = %+v", results)
	}

	// Reinstalling the recorded build repairs it.
	mustInstall(t, s, bins.v130, InstallOptions{})
	if err := s.Verify(inst); err != nil {
		t.Fatalf("Verify after reinstall: %v", err)
	}

	// A different build behind an unchanged manifest is caught by the lock
	// file: simulate by pinning another digest.
	lf, _ := s.ReadLock()
	entry := lf.Plugins["acme"]
	entry.SHA256[host.String()] = strings.Repeat("0", 64)
	lf.Plugins["acme"] = entry
	raw, _ := json.Marshal(lf)
	os.WriteFile(s.LockPath(), raw, 0o644)
	wantErr(t, s.Verify(inst), ErrLockMismatch, "the lock file "+s.LockPath()+" pins sha256 000000000000…", "marina plugin remove acme@1.3.0")
	wantErr(t, s.Pin(inst, "^1.2"), ErrLockMismatch, "to trust the installed build instead, delete the \"acme\" entry")

	// Another platform's digest for the same version is kept alongside.
	if err := s.Unpin("acme"); err != nil {
		t.Fatal(err)
	}
	foreign := *inst
	foreign.Platform, foreign.SHA256 = "plan9/amd64", strings.Repeat("1", 64)
	if err := s.Pin(&foreign, "^1.2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(inst, "^1.2"); err != nil {
		t.Fatal(err)
	}
	lf, _ = s.ReadLock()
	if got := lf.Plugins["acme"].SHA256; len(got) != 2 || got[host.String()] != inst.SHA256 {
		t.Fatalf("lock sha256 map = %v", got)
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	mustInstall(t, s, bins.v120, InstallOptions{})
	v13 := mustInstall(t, s, bins.v130, InstallOptions{})

	// Removing without a lock file does not create one.
	if err := s.Remove("acme", "1.2.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.LockPath()); !os.IsNotExist(err) {
		t.Fatalf("Remove created the lock file: %v", err)
	}
	list, _ := s.List()
	if len(list) != 1 || list[0].Version != "1.3.0" {
		t.Fatalf("after removing 1.2.0: %+v", list)
	}
	if _, err := s.Resolve("acme", "~1.2.0"); err == nil {
		t.Fatal("removed version still resolves")
	}
	wantErr(t, s.Remove("acme", "1.2.0"), ErrNotInstalled, "plugin acme 1.2.0 is not installed; installed: 1.3.0 ("+host.String()+")")

	// Removing the pinned version drops its lock entry.
	mustInstall(t, s, bins.v120, InstallOptions{})
	if err := s.Pin(v13, "^1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("acme", "1.2.0"); err != nil {
		t.Fatal(err)
	}
	if lf, _ := s.ReadLock(); lf.Plugins["acme"].Version != "1.3.0" {
		t.Fatalf("removing an unpinned version changed the lock: %+v", lf)
	}
	if err := s.Remove("acme", ""); err != nil {
		t.Fatal(err)
	}
	if lf, _ := s.ReadLock(); len(lf.Plugins) != 0 {
		t.Fatalf("lock after removing every version: %+v", lf)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "acme")); !os.IsNotExist(err) {
		t.Fatalf("plugin directory left behind: %v", err)
	}
	wantErr(t, s.Remove("acme", ""), ErrNotInstalled, "plugin acme is not installed")
	assertNoLeftovers(t, s.Root())
}

func TestInstallNeverModifiesAVersionInPlace(t *testing.T) {
	dir := t.TempDir()
	// Both binaries claim to be acme 1.2.0: a rebuild with the same version.
	s := Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "lock"), fixedDescriber(sdk.Description{
		Name: "acme", Version: "1.2.0", Protocol: "1.0", Hooks: []sdk.Hook{sdk.PostCluster},
	}))
	first := mustInstall(t, s, bins.v120, InstallOptions{})
	_, err := s.Install(testCtx(t), bins.v130, InstallOptions{})
	wantErr(t, err, ErrVersionExists, "plugin acme 1.2.0 ("+host.String()+") is already installed from "+bins.v120,
		"An installed version is never modified in place; remove it first with `marina plugin remove acme@1.2.0`")
	if sha(t, first.Path) != sha(t, bins.v120) {
		t.Fatal("the installed binary was replaced")
	}
	assertNoLeftovers(t, s.Root())
}

func TestConcurrentInstallsOfTheSamePlugin(t *testing.T) {
	s := newStore(t)
	srcs := []string{bins.v120, bins.v120, bins.v120, bins.v130, bins.v130}
	var wg sync.WaitGroup
	results := make([]*Installed, len(srcs))
	errs := make([]error, len(srcs))
	for i, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Install(testCtx(t), src, InstallOptions{})
		}()
	}
	wg.Wait()
	for i, src := range srcs {
		if errs[i] != nil {
			t.Fatalf("install %d: %v", i, errs[i])
		}
		if results[i].SHA256 != sha(t, src) || sha(t, results[i].Path) != results[i].SHA256 {
			t.Fatalf("install %d = %+v", i, results[i])
		}
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].Version != "1.2.0" || list[1].Version != "1.3.0" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	results2, err := s.VerifyAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results2 {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	assertNoLeftovers(t, s.Root())
	entries, _ := os.ReadDir(filepath.Join(s.Root(), "acme", "1.2.0", host.OS+"_"+host.Arch))
	if len(entries) != 2 {
		t.Fatalf("install directory holds %d entries, want binary + manifest", len(entries))
	}
}

// TestInstallLosingTheRenameRace makes another install land the same
// version exactly between the loser's check and its rename.
func TestInstallLosingTheRenameRace(t *testing.T) {
	for _, tt := range []struct {
		name   string
		winner string // what the other install puts in place
		kind   error
	}{
		{"same build", bins.v120, nil},
		{"different build", bins.v130, ErrVersionExists},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "lock"), fixedDescriber(sdk.Description{
				Name: "acme", Version: "1.2.0", Protocol: "1.0", Hooks: []sdk.Hook{sdk.PostCluster},
			}))
			other := Open(s.Root(), s.LockPath(), s.describe)
			calls := 0
			beforePlaceRename = func(string) {
				calls++
				if calls == 1 {
					if _, err := other.Install(testCtx(t), tt.winner, InstallOptions{}); err != nil {
						t.Errorf("winner: %v", err)
					}
				}
			}
			t.Cleanup(func() { beforePlaceRename = nil })
			inst, err := s.Install(testCtx(t), bins.v120, InstallOptions{})
			if calls == 0 {
				t.Fatal("the hook never ran; the race was not exercised")
			}
			// The loser saw no install, then its rename collided with the
			// winner's: only the retry that re-reads the winner's manifest
			// can produce the outcomes below.
			if tt.kind != nil {
				wantErr(t, err, tt.kind, "never modified in place")
			} else if err != nil || inst.SHA256 != sha(t, bins.v120) {
				t.Fatalf("loser = %+v, %v", inst, err)
			}
			if list, _ := s.List(); len(list) != 1 || sha(t, list[0].Path) != sha(t, tt.winner) {
				t.Fatalf("store after the race: %+v", list)
			}
			assertNoLeftovers(t, s.Root())
		})
	}
}

func TestInstallForAnotherPlatformAndSweep(t *testing.T) {
	dir := t.TempDir()
	s := Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "lock"), fixedDescriber(sdk.Description{
		Name: "acme", Version: "1.2.0", Protocol: "1.0", Hooks: []sdk.Hook{sdk.PostCluster},
	}))
	os.MkdirAll(filepath.Join(s.Root(), ".install-old"), 0o755)
	os.MkdirAll(filepath.Join(s.Root(), ".install-fresh"), 0o755)
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(s.Root(), ".install-old"), old, old)

	foreign := host.OS + "/" + otherArch
	inst := mustInstall(t, s, bins.other, InstallOptions{Platform: foreign})
	if inst.Platform != foreign || !strings.HasSuffix(filepath.Dir(inst.Path), host.OS+"_"+otherArch) {
		t.Fatalf("installed %+v", inst)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), ".install-old")); !os.IsNotExist(err) {
		t.Errorf("stale .install-old was not swept")
	}
	if _, err := os.Stat(filepath.Join(s.Root(), ".install-fresh")); err != nil {
		t.Errorf("a recent .install- directory (maybe a running install) was deleted")
	}
	_, err := s.Resolve("acme", "^1")
	wantErr(t, err, ErrNotInstalled, "installed only for other platforms (1.2.0 ("+foreign+"))", "this machine is "+host.String())
	_, err = s.Get("acme", "1.2.0")
	wantErr(t, err, ErrNotInstalled, "plugin acme 1.2.0 is not installed for "+host.String())
}

func TestVerifyAllReportsPinnedButMissing(t *testing.T) {
	s := newStore(t)
	inst := mustInstall(t, s, bins.v120, InstallOptions{})
	if err := s.Pin(inst, "^1"); err != nil {
		t.Fatal(err)
	}
	// The lock file came from elsewhere (a teammate, CI): the version is not here.
	os.RemoveAll(filepath.Join(s.Root(), "acme"))
	results, err := s.VerifyAll()
	if err != nil || len(results) != 1 || !results[0].Pinned {
		t.Fatalf("VerifyAll = %+v, %v", results, err)
	}
	wantErr(t, results[0].Err, ErrNotInstalled, "pins plugin acme 1.2.0, which is not installed; install it with `marina plugin install "+bins.v120+"`")
	wantErr(t, s.Verify(inst), ErrNotInstalled, "is not installed")
}

func TestDescriptionCache(t *testing.T) {
	s := newStore(t)
	c := &counting{next: describeReal}
	s.describe = c.describe
	inst := mustInstall(t, s, bins.v120, InstallOptions{})
	if d, ok := s.CachedDescription(inst.SHA256); !ok || d.Name != "acme" || d.Version != "1.2.0" {
		t.Fatalf("install did not cache the description: %+v %v", d, ok)
	}
	// The source binary has the same digest: no launch.
	d, sum, err := s.DescribeCached(testCtx(t), bins.v120)
	if err != nil || d.Version != "1.2.0" || sum != inst.SHA256 || c.n.Load() != 1 {
		t.Fatalf("DescribeCached = %+v %s %v (launches %d)", d, sum, err, c.n.Load())
	}
	// A new binary is launched once, then served from the cache.
	for range 2 {
		d, _, err = s.DescribeCached(testCtx(t), bins.v130)
		if err != nil || d.Version != "1.3.0" {
			t.Fatalf("DescribeCached(1.3.0) = %+v, %v", d, err)
		}
	}
	if c.n.Load() != 2 {
		t.Fatalf("describer launched %d times, want 2", c.n.Load())
	}
}

func TestListReportsBrokenManifests(t *testing.T) {
	s := newStore(t)
	mustInstall(t, s, bins.v120, InstallOptions{})
	inst := mustInstall(t, s, bins.v130, InstallOptions{})
	os.WriteFile(filepath.Join(filepath.Dir(inst.Path), ManifestFile), []byte(`{"schema":1,"name":"acme","version":"9.9.9"}`), 0o644)
	list, err := s.List()
	wantErr(t, err, ErrInvalid, "does not describe acme 1.3.0")
	if len(list) != 1 || list[0].Version != "1.2.0" {
		t.Fatalf("List kept %+v", list)
	}
	wantErr(t, s.Verify(inst), ErrInvalid, "remove "+filepath.Dir(inst.Path))
}
